"""Calls that must raise a documented error and change nothing, and what a failed one says.

A report of a call that raised as it should but changed the state names what changed, part
by part (a table, a length, a block's refcount, the free list, the reclaim order), in the
notebook's own words; a state that can no longer be read back says which read failed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servelab.testing.core import InvariantViolation, RecordingMachine
from servelab.testing.pasteable import SUPPRESS_IMPORT

__all__ = [
    "ERROR_FAMILIES",
    "describe_change",
    "error_matches",
    "expect_error",
    "half_made",
    "wrong_class",
]

# Errors are matched by class name anywhere in the exception's class hierarchy, so the
# notebook's classes (and a learner's own ``class OutOfBlocks(MemoryError)``) pass. Their
# builtin bases are not enough: a plain KeyError for an unknown sequence is not the
# notebook's UnknownSequence, and a caller that catches UnknownSequence would miss it.
ERROR_FAMILIES: dict[str, tuple[type[BaseException], ...]] = {
    "OutOfBlocks": (MemoryError,),
    "UnknownSequence": (KeyError,),
    "SequenceExists": (ValueError,),
    "InvalidLength": (ValueError,),
}
"""The builtin base of each documented error, for the messages that name what was raised."""


def wrong_class(exc: BaseException, kind: str) -> str:
    """What to add when ``exc`` is of ``kind``'s builtin base but not of ``kind`` itself."""
    if isinstance(exc, ERROR_FAMILIES.get(kind, ())):
        return f": raise the notebook's {kind}, not a plain {type(exc).__name__}"
    return ""


def error_matches(exc: BaseException, kind: str) -> bool:
    """Whether ``exc`` is the documented error ``kind``: a class of that name in its MRO."""
    return any(cls.__name__ == kind for cls in type(exc).__mro__)


def _blocks_change(before: tuple[Any, ...], after: tuple[Any, ...]) -> list[str]:
    """The parts of a block-manager snapshot (tables with lengths, refcounts, free list,
    num_free) that differ, each as `what: before -> after`."""
    parts: list[str] = []
    (seqs0, refs0, free0, num0), (seqs1, refs1, free1, num1) = before, after
    tables0 = {s: list(t) for s, t, _ in seqs0 if t is not None}
    tables1 = {s: list(t) for s, t, _ in seqs1 if t is not None}
    if tables0 != tables1:
        parts.append(f"tables {tables0} -> {tables1}")
    lens0, lens1 = {s: n for s, _, n in seqs0}, {s: n for s, _, n in seqs1}
    if lens0 != lens1:
        parts.append(f"lengths {lens0} -> {lens1}")
    moved = [
        f"block {b}'s refcount {r0} -> {r1}"
        for b, (r0, r1) in enumerate(zip(refs0, refs1, strict=False))
        if r0 != r1
    ]
    parts.extend(moved)
    if free0 != free1:
        parts.append(f"free list {list(free0)} -> {list(free1)}")
    elif num0 != num1:
        parts.append(f"num_free {num0} -> {num1}")
    return parts


def describe_change(before: tuple[Any, ...], after: tuple[Any, ...]) -> str:
    """What differs between two snapshots: a block manager's, or a prefix cache's (the block
    manager's, then the reclaim order, the cached map's items and each block's hash)."""
    if (
        len(before) == 4
        and len(after) == 4
        and isinstance(before[0], tuple)
        and (len(before[0]) == 4 and isinstance(before[0][1], tuple))
    ):  # a prefix cache's: the block manager's snapshot comes first
        parts = _blocks_change(before[0], after[0])
        if before[1] != after[1]:
            parts.append(f"reclaim order {list(before[1])} -> {list(after[1])}")
        cached0, cached1 = sorted(b for _, b in before[2]), sorted(b for _, b in after[2])
        if cached0 != cached1:
            parts.append(f"cached blocks {cached0} -> {cached1}")
        hashed0 = [b for b, h in enumerate(before[3]) if h is not None]
        hashed1 = [b for b, h in enumerate(after[3]) if h is not None]
        if hashed0 != hashed1:
            parts.append(f"blocks with a hash {hashed0} -> {hashed1}")
        elif before[3] != after[3]:
            parts.append("a block's hash")
        if not parts and before[2] != after[2]:
            parts.append("the cached map")
    else:
        parts = _blocks_change(before, after)
    return "; ".join(parts)


def half_made(bm: Any, exc: Exception) -> str:
    """What reading ``bm`` back ran into: a sequence listed whose table or length cannot be
    read, where that is the one, else the error the reading raised."""
    try:
        for seq in bm.sequences():
            for read in ("block_table", "seq_len"):
                try:
                    getattr(bm, read)(seq)
                except Exception as err:
                    return (
                        f"sequences() lists {seq} while {read}({seq}) raises "
                        f"{type(err).__name__}: the failed call left sequence {seq} half recorded"
                    )
    except Exception:
        pass
    return f"reading the manager back raised {type(exc).__name__}: {exc}"


def expect_error(
    machine: RecordingMachine,
    code: str,
    fn: Callable[[], object],
    kind: str,
    why: str,
    state: Callable[[], Any],
    on_change: str = "exception-safety",
) -> None:
    """Run a call that must raise ``kind`` and change nothing that ``state()`` sees.

    The call is recorded as ``with suppress(kind): code`` so the repro stays pasteable.
    """
    before = state()
    if SUPPRESS_IMPORT not in machine.log:
        machine.log.insert(1, SUPPRESS_IMPORT)
    try:
        machine.do(f"with suppress({kind}): {code}", fn)
    except Exception as exc:
        if not error_matches(exc, kind):
            raise InvariantViolation(
                "expected-error",
                f"`{code}` raised {type(exc).__name__}: {exc}; expected {kind} ({why})"
                f"{wrong_class(exc, kind)}",
            ) from exc
    else:
        raise InvariantViolation(
            "expected-error", f"`{code}` returned normally; expected {kind} ({why})"
        )
    bm = getattr(machine, "bm", None)
    try:
        after = state()
    except Exception as exc:  # an entry left half made: the inspection itself fails
        raise InvariantViolation(
            on_change,
            f"`{code}` raised {kind} as it should, but then {half_made(bm, exc)}: a call "
            "that raises changes nothing",
        ) from None
    if after != before:
        what = describe_change(before, after) or "the state"
        raise InvariantViolation(
            on_change,
            f"`{code}` raised {kind} as it should, but changed the state first ({what}): "
            "a call that raises changes nothing",
        )
