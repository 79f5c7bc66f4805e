"""The program a kv-offload probe writes and runs: one fresh tier, disk tier or hierarchy, and
method calls on it, each written as a line the report can reproduce."""

from __future__ import annotations

import os
import tempfile
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from servelab.grading._script import Script, graded_names
from servelab.grading.kv_offload_hints import HINTS
from servelab.grading.kv_offload_replay import REPLAY
from servelab.grading.kv_offload_values import Payload
from servelab.grading.steady import MEMORY_FOLDER
from servelab.testing.kv_offload import tier_fields

__all__ = [
    "OffloadScript",
    "chunks_in_memory",
    "hierarchy_script",
    "misfit",
    "put_chunk",
    "store_chunk",
    "tier_script",
]

_MEMORY = MEMORY_FOLDER


@contextmanager
def chunks_in_memory() -> Iterator[None]:
    """Within the block, a temporary folder (the disk tier's own, when no root is given) is
    made in memory where the system has such a file system: the same files and the same
    calls, but a write's fsync and a folder's removal cost next to nothing, and a grade's
    state machine builds a disk tier for every program it runs."""
    before = tempfile.tempdir
    usable = os.path.isdir(_MEMORY) and os.access(_MEMORY, os.W_OK | os.X_OK)
    if usable:
        tempfile.tempdir = _MEMORY
    try:
        yield
    finally:
        if usable:
            tempfile.tempdir = before


class OffloadScript(Script):
    """A :class:`Script` on one fresh tier, disk tier or hierarchy, built by ``first``
    (``tier = Tier(100, 'LRU')``); ``call`` writes a method call on it as a line and runs it."""

    def __init__(self, impl: Any, first: str) -> None:
        super().__init__(REPLAY.namespace(impl), graded_names(REPLAY, impl), HINTS)
        self.subject = first.split("=", 1)[0].strip()
        self(first)

    @property
    def obj(self) -> Any:
        return self.ns[self.subject]

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        return self(f"{self.subject}.{method}({', '.join(shown)})")

    def keys(self) -> list[Any]:
        return list(self(f"{self.subject}.keys()"))

    def expect(self, got: Any, want: Any, what: str, rule: str | None = None) -> None:
        """``got`` must equal ``want``; ``rule`` names the hint when it is not the probe's own.
        An iterator (a generator) where a list belongs is told as such: the probe's rule was
        not what broke."""
        if got != want:
            if isinstance(want, list) and isinstance(got, Iterator):
                kind = type(got).__name__
                why = (
                    "a generator runs only when it is iterated, once, and then reads the state "
                    "as it is by then"
                    if isinstance(got, types.GeneratorType)
                    else f"a {kind} equals no list, and the first loop over it uses it up"
                )
                raise self.fail(
                    f"{what} is a {kind} object, expected the list {want!r}",
                    hint=f"yours returned a {kind} object where a list belongs: {why}; build "
                    "the list in the call ([...] or list(...))",
                )
            raise self.fail(f"{what} is {got!r}, expected {want!r}", rule)

    def expect_raises(
        self, kinds: tuple[type[BaseException], ...], method: str, *args: Any
    ) -> None:
        """The call must raise one of ``kinds`` and change nothing."""
        before = tier_fields(self.obj)
        code = f"{self.subject}.{method}({', '.join(repr(a) for a in args)})"
        try:
            self.call(method, *args)
        except kinds:
            after = tier_fields(self.obj)
            if after != before:
                raise self.fail(
                    f"{code} raised, but the tier changed: {before} -> {after}"
                ) from None
            return
        except Exception as exc:
            names = " or ".join(k.__name__ for k in kinds)
            raise self.fail(f"{code} raised {type(exc).__name__}, expected a {names}") from exc
        raise self.fail(f"{code} returned normally; it must raise and change nothing")


def tier_script(impl: Any, capacity: int, policy: str = "LRU") -> OffloadScript:
    return OffloadScript(impl, f"tier = Tier({capacity}, {policy!r})")


def hierarchy_script(impl: Any, cpu: int, disk: int) -> OffloadScript:
    return OffloadScript(impl, f"h = Hierarchy({cpu}, {disk})")


def put_chunk(s: OffloadScript, key: str, size: int, **kw: Any) -> Any:
    return s.call("put", key, Payload(key, size), **kw)


def store_chunk(s: OffloadScript, key: str, size: int) -> Any:
    return s.call("store", key, Payload(key, size))


#: The classes steps 3 and 4 grade, as the notebook's grade cells pass them.
CLASSES = ("Tier", "DiskTier", "Hierarchy")
_NOTEBOOK = {3: ("EvictingTier", "DiskTier", "Hierarchy")}
_NOTEBOOK[4] = ("EvictingTier", "DiskTier", "CostAwareHierarchy")


def _passed(impl: Any) -> str:
    if isinstance(impl, Mapping):
        missing = [repr(k) for k in CLASSES if k not in impl]
        return f"a dict without {' and '.join(missing)}"
    if isinstance(impl, type):
        return f"the class `{impl.__name__}` alone"
    return f"a {type(impl).__name__}"


def misfit(impl: Any, step: int) -> tuple[str, str] | None:
    """From step 3 on, the grade takes a dict of the three classes: said before any check
    runs when a grade cell passes anything else (a check would meet a missing class as a
    ``NameError`` in its own program, and read it as a typo of the learner's)."""
    if step < 3 or (isinstance(impl, Mapping) and all(k in impl for k in CLASSES)):
        return None
    names = _NOTEBOOK.get(step, _NOTEBOOK[4])
    wanted = ", ".join(f'"{key}": {name}' for key, name in zip(CLASSES, names, strict=True))
    return (
        f"from step 3 on, the grade takes a dict of three classes, {{{wanted}}}; this grade "
        f"cell passed {_passed(impl)}",
        f'pass the dict, as the notebook\'s grade cell does: grade("kv-offload", {{{wanted}}}, '
        f"step={step})",
    )
