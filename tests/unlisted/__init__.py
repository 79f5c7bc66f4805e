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

from servelab import checkpoint
from servelab.grading.graft import _layer
from servelab.grading.registry import TOPICS, load_topic


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


def _by_name(impl: Any) -> dict[str, type]:
    """A checkpoint's classes by their name in the grade cell's dict ("" for a lone class)."""
    return {"": impl} if isinstance(impl, type) else dict(impl)


def carried(u: Unlisted) -> Any:
    """``u`` carried through its topic's last step: each class of the slip rebuilt on the last
    checkpoint's class it stands for, its own methods on top (a zero-argument ``super()`` in
    them reaches the last step's method), as a learner who keeps the slip finishes the course.
    A lone class of the early steps stands for the first class of a later dict (the tier, LFU);
    a slip built on the last checkpoint already is returned as it is."""
    steps = [s.number for s in load_topic(u.topic).steps]
    final = _by_name(checkpoint(u.topic, steps[-1]))
    role = {c: key for n in steps for key, c in _by_name(checkpoint(u.topic, n)).items()}

    def rebuilt(cls: type) -> tuple[str, type]:
        base = next(c for c in cls.__mro__ if c in role)
        key = role[base] if role[base] in final else next(iter(final))
        made, own = final[key], cls.__mro__[: cls.__mro__.index(base)]
        if made is base:  # built on the last checkpoint already
            return key, cls
        for mine in reversed(own):
            for name, value in vars(mine).items():
                if callable(value) or isinstance(value, property | staticmethod | classmethod):
                    made = _layer(made, name, value)
        if own:
            made.__name__ = made.__qualname__ = cls.__name__
        return key, made

    if isinstance(u.impl, type):
        key, made = rebuilt(u.impl)
        return made if key == "" else {**final, key: made}
    mine = {**final, **dict(rebuilt(cls) for cls in u.impl.values())}
    return u.impl if mine == u.impl else mine
