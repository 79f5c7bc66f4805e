"""The list of graded topics: the one place a topic is registered.

Everything about a topic lives in its own module, ``servelab.grading.<topic>``, as one
:class:`~servelab.grading.topic.Topic`; this module only lists them, in course order.
:func:`topics`, the catalogue of known mistakes (:mod:`servelab.grading.mistakes`), diagnosis
(:mod:`servelab.grading.diagnose`) and the checkpoints (:mod:`servelab.checkpoints`) all
derive from this list, so a new topic is one module plus one line here.

Topics are imported when first asked for, not when the grader is: a grade cell loads only
the topic it grades.
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache

from servelab.grading.topic import Topic

__all__ = ["TOPICS", "checkpoint_module", "checkpoint_modules", "load_topic", "topics"]

TOPICS: tuple[str, ...] = (
    "weight-cache",
    "eviction-policy",
    "block-manager",
    "invariant-checker",
    "scheduler",
    "prefix-cache",
    "kv-offload",
    "token-budget",
    "paged-kernel",
    "engine",
)
"""Every topic that ships with servelab, in course order; each is ``servelab.grading.<name>``
with ``-`` read as ``_``."""


def topics() -> list[str]:
    """Names of every topic that ships with servelab, sorted."""
    return sorted(TOPICS)


def module_name(topic: str) -> str:
    """The module of ``topic``: ``servelab.grading.weight_cache`` for ``weight-cache``."""
    return "servelab.grading." + topic.replace("-", "_")


@cache
def load_topic(name: str) -> Topic:
    """The :class:`Topic` that ``servelab.grading.<name>`` declares as ``TOPIC``."""
    if name not in TOPICS:
        raise ValueError(f"unknown topic {name!r}; known topics: {', '.join(topics())}")
    topic = getattr(importlib.import_module(module_name(name)), "TOPIC", None)
    if not isinstance(topic, Topic) or topic.name != name:
        raise ValueError(f"{module_name(name)} defines no TOPIC named {name!r}")
    return topic


def checkpoint_module(name: str) -> str | None:
    """The module of :mod:`servelab.checkpoints` for topic ``name`` (``weight_cache`` for
    ``weight-cache``), or None where the topic has none.

    Found by name, without importing the topic: asking for a checkpoint must not load every
    topic's grader (the capstone's imports torch, the kernel's sets ``TRITON_INTERPRET``).
    Each topic's :attr:`~servelab.grading.topic.Topic.checkpoint` names the same module.
    """
    if name not in TOPICS:
        return None
    module = name.replace("-", "_")
    return module if importlib.util.find_spec(f"servelab.checkpoints.{module}") else None


def checkpoint_modules() -> dict[str, str]:
    """Each topic with checkpoints, in course order, and its module in
    :mod:`servelab.checkpoints`."""
    found = {}
    for name in TOPICS:
        module = checkpoint_module(name)
        if module is not None:
            found[name] = module
    return found
