"""Mistakes nobody listed: learner-style classes the catalogue does not contain.

Each plants one slip of the kind learners make (an off-by-one fit, state bumped before raising,
the wrong field updated, a helper of their own that goes wrong) on top of the notebook's
checkpoint classes, and says which skeleton method holds it. The grader must fail each one,
point at that method, and claim no certainty: it has never seen them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unlisted import blocks, offload, policies, prefix, scheduler, token_budget, weights


@dataclass(frozen=True)
class Unlisted:
    topic: str
    step: int
    name: str
    impl: Any
    methods: frozenset[str]
    """The skeleton methods holding the mistake (or calling the learner's faulty helper)."""


def unlisted() -> list[Unlisted]:
    found = []
    for module in (weights, policies, blocks, scheduler, prefix, offload, token_budget):
        for name, (step, impl, methods) in module.MISTAKES.items():
            found.append(Unlisted(module.TOPIC, step, name, impl, frozenset(methods)))
    return found
