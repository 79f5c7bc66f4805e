"""The report's sentences that a replay on copies could make false: the reference's method
raising on a copy of the learner's state (not something the reference does on its own; a
``raise`` of the reference's own is said plainly, as a check yours may lack), a
sequence listed again in out.finished (not retired early), and a retry whose pause changes
the learner's object through a function the copy shares (no call compared). Each slip is
graded end to end, and a look-alike next to it keeps its own sentence."""

from __future__ import annotations

import heapq
import os
from types import SimpleNamespace
from typing import Any

import pytest

import servelab.grading.where as where
from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.diagnose import HOOKS
from servelab.grading.where import place_hint, where_lines
from servelab.kv.blocks import BlockManager
from servelab.kv.scheduler import Sequence, StepOutput
from servelab.testing.core import InvariantViolation
from servelab.testing.scheduler import ModelOutput, SchedulerModel, compare_step
from servelab.weights import EntryPinned, EntryTooLarge

LFU = checkpoint("eviction-policy", 2)
Decoding = checkpoint("scheduler", 2)
Evicting = checkpoint("kv-offload", 2)
Checked = checkpoint("weight-cache", 4)

ON_A_COPY = "the reference's `update_on_hit`, run on a copy of your state, raises TypeError"


def _text(topic: str, impl: Any, step: int) -> str:
    return failing_report(topic, impl, step)[0].text


class HitRewritesItsListEntry(LFU):  # type: ignore[misc,valid-type]
    """Keeps one list entry per key on the heap and rewrites it on a hit, with no sift."""

    def update_on_put(self, key: Any, size: int) -> None:
        self.clock += 1
        self.count[key] = 1
        self.reached[key] = self.clock
        self.__dict__.setdefault("mine", {})[key] = item = [1, self.clock, key]
        heapq.heappush(self.heap, item)

    def update_on_hit(self, key: Any) -> None:
        self.clock += 1
        self.count[key] += 1
        self.reached[key] = self.clock
        if key not in self.pinned:
            self.mine[key][:2] = [self.count[key], self.clock]


class HitPushesTheOldCount(LFU):  # type: ignore[misc,valid-type]
    """Pushes a tuple with the count from before the hit: the reference runs on this state."""

    def update_on_hit(self, key: Any) -> None:
        self.clock += 1
        self.count[key] += 1
        self.reached[key] = self.clock
        if key not in self.pinned:
            heapq.heappush(self.heap, (self.count[key] - 1, self.clock, key))


def test_a_raise_of_the_reference_on_your_state_is_said_as_that() -> None:
    text = _text("eviction-policy", HitRewritesItsListEntry, 2)
    assert "out of heap order" in text
    assert ON_A_COPY in text
    assert "the reference raises" not in text
    assert f"hint: start at your `update_on_hit`: on the call under where:, {ON_A_COPY} " in text
    assert "compare what your methods keep with what the reference's keep" in text


def test_a_reference_that_returns_is_said_as_before() -> None:
    text = _text("eviction-policy", HitPushesTheOldCount, 2)
    assert "run on a copy of your state" not in text


class AdmitsBesidePins(Checked):  # type: ignore[misc,valid-type]
    """Checks the size and the key's own pin, never the bytes the other pins hold."""

    def _check_can_admit(self, key: Any, size: Any) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"size must be a positive int number of bytes, got {size!r}")
        if size > self.capacity:
            raise EntryTooLarge(f"{key!r} is larger than the whole cache")
        if self._pins.get(key):
            raise EntryPinned(f"{key!r} is pinned")


PINNED = """cache = WeightCache(100)
cache.put('a', '<a weights>', 30)
cache.put('b', '<b weights>', 30)
cache.pin('a')
cache.pin('b')
cache.put('c', '<c weights>', 50)"""


def test_a_raise_the_reference_states_itself_is_said_plainly() -> None:
    text = _text("weight-cache", AdmitsBesidePins, 4)
    assert "the reference raises PinnedCapacityExceeded; nothing changed" in text
    assert "run on a copy of your state" not in text
    place = HOOKS["weight-cache"].localised(PINNED, AdmitsBesidePins, 4)
    assert where_lines(place)[3] == "the reference raises PinnedCapacityExceeded; nothing changed"
    assert place_hint(place) == (
        "start at your `_check_can_admit`: on the call under where:, the reference raises "
        "PinnedCapacityExceeded where yours returned None"
    )


class FinishedKeptForTheRun(Decoding):  # type: ignore[misc,valid-type]
    """Hands out one list of every sequence finished so far as each step's out.finished."""

    def retire(self, out: Any) -> None:
        kept = self.__dict__.setdefault("all_done", [])
        for seq in [s for s in self.running if s.is_finished]:
            self.bm.free_seq(seq.seq_id)
            self.running.remove(seq)
            kept.append(seq)
        out.finished = kept


def test_a_sequence_listed_again_is_not_said_to_retire_early() -> None:
    text = _text("scheduler", FinishedKeptForTheRun, 2)
    assert "in out.finished, retired in an earlier step" in text
    assert "had not generated all" not in text


def _listed(tokens_made: int) -> str:
    """The violation when a step lists sequence 0 (prompt 1, 1 token to make), which has made
    ``tokens_made`` tokens and left running in an earlier step, in out.finished."""
    model = SchedulerModel(num_blocks=2, block_size=1, watermark=0, stage=2)
    model.add(0, 1, 1)
    model.tokens[0] += tokens_made
    model.waiting.clear()
    seq = Sequence.dummy(0, prompt_len=1, max_new_tokens=1)
    sched = SimpleNamespace(bm=BlockManager(2, 1), running=[], waiting=[])
    with pytest.raises(InvariantViolation) as caught:
        compare_step(sched, StepOutput(finished=[seq]), ModelOutput(), model, {0: seq})
    return str(caught.value)


def test_a_sequence_listed_before_its_last_token_is_said_to_retire_early() -> None:
    assert "had not generated all their tokens yet (0: 0 of 1)" in _listed(0)
    assert "retired in an earlier step" in _listed(1)
    assert "had not generated all" not in _listed(1)


class RoomSoughtOnce(Evicting):  # type: ignore[misc,valid-type]
    """Chooses its victims before the retry loop and never again: a pause cannot help."""

    def put(self, key: Any, payload: bytes, wait: int = 0) -> Any:
        size = self._payload_size(payload)
        if size > self.capacity or key in self._sizes:
            return super().put(key, payload, wait)
        chosen = self._choose_victims(size)
        for _ in range(wait):
            if chosen is not None:
                break
            self._sleep()
        if chosen is None:
            return None
        return super().put(key, payload)


def test_a_pause_that_changes_your_object_compares_no_call() -> None:
    text = _text("kv-offload", RoomSoughtOnce, 2)
    assert "once 'a' was unpinned is None, expected ['a']" in text
    assert "where: the difference is in your `put`: with the reference's in its place" in text
    assert "yours evicted" not in text
    assert "the reference returns None" not in text


def test_a_line_that_only_starts_with_the_word_raise_is_no_raise(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """`raised = counts[key]` failing in the reference is its method meeting your state."""
    source = tmp_path / "reference.py"
    source.write_text("def pop(counts):\n    raised = counts['k']\n    return raised\n")
    names: dict[str, Any] = {}
    exec(compile(source.read_text(), str(source), "exec"), names)
    try:
        names["pop"]({})
    except KeyError as exc:
        error = exc
    monkeypatch.setattr(where, "_OWN", str(tmp_path) + os.sep)
    d = SimpleNamespace(mine=("returned 1", {}), theirs=("raised KeyError", {}), their_error=error)
    assert where._raised_on_yours(d)  # type: ignore[arg-type]
