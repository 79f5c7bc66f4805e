"""What a report says of the place only where the observed difference proves it.

A probe's title names the rule it checks; a setup line that raised before the check ran is
said to be one. A finished class graded at an earlier step is placed like that step's own
(what the step's reference cannot show yet is no difference). A look-alike mistake is asked
about only where, put in the learner's class, it behaves as the learner's method does at and
next to the diverging call.
"""

from __future__ import annotations

from typing import Any

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading import GradeFailure, grade, load_topic
from servelab.grading.diagnose import HOOKS
from servelab.grading.mistakes import mistakes
from servelab.kv.blocks import OutOfBlocks

_BM4 = checkpoint("block-manager", 4)
_EP4 = checkpoint("eviction-policy", 4)
_PC3 = checkpoint("prefix-cache", 3)


def _report(topic: str, impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(topic, impl, step, quiet=True)
    return str(failed.value)


class _RefusesExactFit(_BM4):  # type: ignore[misc, valid-type]
    """allocate refuses a need of two blocks or more equal to the free blocks (>= for >)."""

    def allocate(self, seq: int, n_tokens: int) -> None:
        self._new(seq)
        need = -(-n_tokens // self.block_size)
        if need > 1 and need >= len(self.free):
            raise OutOfBlocks("no room")
        _BM4.allocate(self, seq, n_tokens)


class _CowRaisesOnShare(_BM4):  # type: ignore[misc, valid-type]
    """append_slot raises a KeyError of its own on a shared block: the probe's own method."""

    def append_slot(self, seq: int) -> Any:
        if self.ref[self.tables[seq][-1]] > 1 and self.lens[seq] % self.block_size:
            raise KeyError(seq)
        return _BM4.append_slot(self, seq)


def test_a_setup_line_that_raises_is_not_reported_as_the_probes_rule() -> None:
    # the first probe whose setup fills the pool exactly is step 3's copy with no free block
    report = _report("block-manager", _RefusesExactFit, 4)
    assert (
        "✗ step 3 · a copy with no free block raises: not reached, its setup line "
        "`bm.allocate(0, 6)` raised first"
    ) in report


def test_the_probes_own_method_raising_keeps_the_title() -> None:
    report = _report("block-manager", _CowRaisesOnShare, 4)
    assert "not reached" not in report


class _SIEVEHandToOlder(_EP4["SIEVE"]):  # type: ignore[misc, name-defined]
    """A finished SIEVE whose removal moves the hand to the next older key."""

    def update_on_remove(self, key: Any) -> None:
        i = self.queue.index(key)
        if self.hand == key:
            self.hand = self.queue[i - 1] if i > 0 else None
        del self.queue[i]
        del self.visited[key]
        self.pinned.discard(key)


def test_a_finished_class_graded_at_an_earlier_step_is_placed() -> None:
    # the step-3 reference has no eviction_order: the finished class's is no difference
    report = _report("eviction-policy", {"LFU": _EP4["LFU"], "SIEVE": _SIEVEHandToOlder}, 3)
    assert "where: the difference starts in your `SIEVE.update_on_remove`" in report
    assert "no one method" not in report


class _RoomEvictableTwice(_PC3):  # type: ignore[misc, valid-type]
    """_room adds the evictable blocks to num_free, which already counts them."""

    def _room(self, hits: list[int]) -> int:
        held = sum(1 for b in hits if self.ref[b] == 0)
        return self.num_free + len(self.evictable_lru) - held


def test_a_look_alike_that_parts_from_yours_next_to_the_call_is_not_asked_about() -> None:
    # the catalogue's "room without subtracting the claimed hits" returns num_free, as yours
    # does on [0]; with no hits yours counts 2 where it counts 1: not the same cause
    report = _report("prefix-cache", _RoomEvictableTwice, 3)
    assert "start at your `_room`" in report
    assert "same symptom" not in report


def test_a_look_alike_that_behaves_as_yours_near_the_call_is_still_asked_about() -> None:
    m = next(x for x in mistakes("prefix-cache") if x.name == "claimed_hits_not_counted")
    _, program = failing_report(load_topic("prefix-cache"), m.impl)
    finding = HOOKS["prefix-cache"].explain(program, m.impl)
    assert f"that {m.like}: does yours do that?" in (finding.hint or "")
