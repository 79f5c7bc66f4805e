"""Checkpoints: the reference solution of a course notebook as of any step.

A learner who falls behind in a workshop picks up the class that passes step ``n`` and goes on
with step ``n + 1``::

    from servelab import checkpoint
    PinningCache = checkpoint("weight-cache", step=3)   # then write step 4's class on top

The modules beside this one are generated from ``solutions/`` by ``tools/notebooks.py``
(``make exercises``), so a checkpoint is always exactly the notebook's own solution code.
"""

from __future__ import annotations

import importlib
from typing import Any

from servelab.grading.registry import checkpoint_modules

__all__ = ["checkpoint", "checkpoint_topics"]


def checkpoint_topics() -> list[str]:
    """The topics that have checkpoints, in course order."""
    return list(checkpoint_modules())


def checkpoint(topic: str, step: int) -> Any:
    """What the ``step`` grade cell of ``topic``'s notebook grades, solved.

    For most topics that is a class; for steps 3-4 of ``eviction-policy`` it is the dict of
    policy classes the grade cell passes; for ``paged-kernel`` a ``@triton.jit`` function.
    Raises ValueError for an unknown topic or step.
    """
    modules = checkpoint_modules()
    if topic not in modules:
        raise ValueError(f"no checkpoints for topic {topic!r}; choose one of {list(modules)}")
    module = importlib.import_module(f"servelab.checkpoints.{modules[topic]}")
    steps = module.STEPS
    if isinstance(step, bool) or not isinstance(step, int) or step not in steps:
        raise ValueError(f"{topic} has checkpoints for steps {sorted(steps)}, got {step!r}")
    return steps[step]()
