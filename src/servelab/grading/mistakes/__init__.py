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

from servelab.grading.registry import TOPICS, load_topic

__all__ = [
    "CORRECT",
    "KERNELS",
    "RUN_ONLY",
    "Mistake",
    "catalogued",
    "correct_impl",
    "correct_module",
    "mistakes",
    "topic_dir",
]


@cache
def catalogued() -> dict[str, str]:
    """The topics with a replayed catalogue (those whose module declares a replay), in course
    order, each with its checkpoint module in :mod:`servelab.checkpoints`."""
    found = {}
    for name in TOPICS:
        topic = load_topic(name)
        if topic.replay is not None and topic.checkpoint is not None:
            found[name] = topic.checkpoint
    return found


@cache
def _unreplayed(kind: str) -> dict[str, str]:
    """The topics whose catalogue is of ``kind`` (:attr:`~servelab.grading.topic.Topic.catalogue`),
    in course order, each with its checkpoint module."""
    found = {}
    for name in TOPICS:
        topic = load_topic(name)
        if topic.catalogue == kind and topic.checkpoint is not None:
            found[name] = topic.checkpoint
    return found


def __getattr__(name: str) -> Any:
    """``CORRECT``: :func:`catalogued` as a module constant. ``RUN_ONLY``: the topics whose
    mistakes show only when the model runs (their checks name the wrong KV slot themselves, so
    they are not replayed for a diagnosis); ``KERNELS``: the topics whose graded objects are
    Triton kernels (same catalogue format, ``Buggy`` being the checkpoint's kernel with one
    function of its chain replaced, but compared on cases instead of replayed). Each of their
    mistakes is a test of the grader all the same."""
    if name == "CORRECT":
        return catalogued()
    if name == "RUN_ONLY":
        return _unreplayed("run-only")
    if name == "KERNELS":
        return _unreplayed("kernels")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _catalogued() -> dict[str, str]:
    return {**catalogued(), **_unreplayed("run-only"), **_unreplayed("kernels")}


@dataclass(frozen=True)
class Mistake:
    """One known mistake: ``like`` completes "behaves exactly like one that …"."""

    topic: str
    name: str
    impl: Any
    hint: str
    like: str
    doc: str


def _has_catalogue(topic: str) -> bool:
    """Whether ``topic`` has a catalogue, loading that topic alone (a weight-cache grade
    must not import the capstone's torch)."""
    if topic not in TOPICS:
        return False
    declared = load_topic(topic)
    return declared.checkpoint is not None and (
        declared.replay is not None or declared.catalogue in ("run-only", "kernels")
    )


def _package(topic: str) -> str:
    folder = topic.replace("-", "_")
    if not _has_catalogue(topic):
        known = ", ".join(sorted(_catalogued()))
        raise ValueError(f"no mistake catalogue for topic {topic!r}; known: {known}")
    return f"{__name__}.{folder}"


def topic_dir(topic: str) -> Path:
    """The folder of ``topic``'s catalogue (for loading a file by path, as the CLI does)."""
    return Path(__file__).parent / topic.replace("-", "_")


def correct_module(topic: str) -> ModuleType:
    """The checkpoint module of ``topic``: the notebook's solution, step by step."""
    _package(topic)
    return importlib.import_module(f"servelab.checkpoints.{load_topic(topic).checkpoint}")


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
