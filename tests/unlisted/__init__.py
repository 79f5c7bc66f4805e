"""Mistakes nobody listed: learner-style classes the catalogue does not contain.

Each plants one slip of the kind learners make (an off-by-one fit, state bumped before raising,
the wrong field updated, a helper of their own that goes wrong) on top of the notebook's
checkpoint classes, and says which skeleton method holds it. The grader must fail each one,
point at that method, and claim no certainty: it has never seen them.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any

from servelab.grading.registry import TOPICS


@dataclass(frozen=True)
class Unlisted:
    topic: str
    step: int
    name: str
    impl: Any
    methods: frozenset[str]
    """The skeleton methods holding the mistake (or calling the learner's faulty helper)."""


def unlisted() -> list[Unlisted]:
    """Every module of this package's mistakes, in the course order of their topics."""
    modules = [
        importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)
    ]
    found = []
    for module in sorted(modules, key=lambda module: TOPICS.index(module.TOPIC)):
        for name, (step, impl, methods) in module.MISTAKES.items():
            found.append(Unlisted(module.TOPIC, step, name, impl, frozenset(methods)))
    return found
