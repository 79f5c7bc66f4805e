"""The catalogue of known mistakes, one folder per topic, each mistake also a test of the grader.

Every mistake is built on the topic's one correct implementation, the last step's checkpoint
(:func:`correct_impl`, from :mod:`servelab.checkpoints`, generated from the notebook's
solution), so its block ids, orders, frees and return values are those of a learner who
follows the notebook. Each module plants exactly one mistake and defines:

* ``Buggy``: the implementation (a class, or for ``eviction-policy`` a ``{"LFU", "SIEVE"}`` dict);
* ``HINT``: a keyword that a correct diagnosis of this mistake must contain;
* ``LIKE`` (optional): what the mistake does, completing "behaves exactly like one that …";
  the module docstring's first sentence when absent.

The grader replays a failing program on these (:mod:`servelab.grading.diagnose`) and names the
one mistake that reproduces the learner's observations, so adding a hint means adding a mistake.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = [
    "CORRECT",
    "KERNELS",
    "RUN_ONLY",
    "Mistake",
    "correct_impl",
    "correct_module",
    "mistakes",
    "topic_dir",
]

CORRECT: dict[str, str] = {
    "weight-cache": "weight_cache",
    "eviction-policy": "eviction_policy",
    "block-manager": "block_manager",
    "prefix-cache": "prefix_cache",
    "scheduler": "scheduler",
    "kv-offload": "kv_offload",
    "token-budget": "token_budget",
}
"""The topics with a catalogue, each with its checkpoint module in :mod:`servelab.checkpoints`."""

RUN_ONLY: dict[str, str] = {"engine": "engine"}
"""Topics whose mistakes show only when the model runs. Their checks name the wrong KV slot
themselves (:mod:`servelab.kv.ledger`), so they are not replayed for a diagnosis as the
topics of :data:`CORRECT` are; their catalogues are each a test of the grader all the same."""

KERNELS: dict[str, str] = {"paged-kernel": "paged_kernel"}
"""Topics whose graded objects are Triton kernels: same catalogue format (``Buggy`` is the
checkpoint's kernel with one function of its chain replaced), but the grader compares outputs
on cases instead of replaying programs, so the class-based diagnosis does not apply."""


def _catalogued() -> dict[str, str]:
    return {**CORRECT, **RUN_ONLY, **KERNELS}


@dataclass(frozen=True)
class Mistake:
    """One known mistake: ``like`` completes "behaves exactly like one that …"."""

    topic: str
    name: str
    impl: Any
    hint: str
    like: str
    doc: str


def _package(topic: str) -> str:
    folder = topic.replace("-", "_")
    if topic not in _catalogued():
        known = ", ".join(sorted(_catalogued()))
        raise ValueError(f"no mistake catalogue for topic {topic!r}; known: {known}")
    return f"{__name__}.{folder}"


def topic_dir(topic: str) -> Path:
    """The folder of ``topic``'s catalogue (for loading a file by path, as the CLI does)."""
    return Path(__file__).parent / topic.replace("-", "_")


def correct_module(topic: str) -> ModuleType:
    """The checkpoint module of ``topic``: the notebook's solution, step by step."""
    _package(topic)
    return importlib.import_module(f"servelab.checkpoints.{_catalogued()[topic]}")


def correct_impl(topic: str) -> Any:
    """The one correct implementation of ``topic``: its last step's checkpoint (for
    ``eviction-policy``, the dict of policy classes its last grade cell passes)."""
    steps = correct_module(topic).STEPS
    return steps[max(steps)]()


def _like(module: ModuleType) -> str:
    like = getattr(module, "LIKE", None)
    if like:
        return str(like)
    first = " ".join((module.__doc__ or "").split()).split(". ")[0].rstrip(".")
    return first[:1].lower() + first[1:]


@cache
def mistakes(topic: str) -> tuple[Mistake, ...]:
    """Every known mistake of ``topic``, by module name."""
    package = importlib.import_module(_package(topic))
    found = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        doc = " ".join((module.__doc__ or "").split())
        found.append(Mistake(topic, info.name, module.Buggy, module.HINT, _like(module), doc))
    return tuple(found)
