"""Reports that state only what they have earned: a learner's own Python error, a factor that
looks like the block size, and a failure no method could be found for.

A learner's IndexError or KeyError says where the code broke, not why: the report names the
line, the call and what the reference returns there, and a check's hint only where its
declaration fits that call (never the error type's usual cause, "check the empty case"). Two
numbers a block size apart in one small state are often a coincidence: the unit's factor is
said only once a second state shows it again. Where no method is found, a check's hint about
another method is left out.
"""

from __future__ import annotations

import heapq
import io
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading._learner import EXCEPTION_HINTS
from servelab.grading.about import About, Hint
from servelab.grading.diagnose import GRAFTED_ONLY, NO_PLACE, Finding, observed, with_place
from servelab.grading.readings import Difference
from servelab.grading.readings.kinds import kind_reading, number_words
from servelab.weights.policies import NoVictim

POLICIES = checkpoint("eviction-policy", 4)
OFFLOAD = checkpoint("kv-offload", 4)


class RetireDeletesBySnapshotIndex(checkpoint("scheduler", 3)):  # type: ignore[misc]
    """Deletes each finished sequence by its index in a snapshot: the list has shrunk."""

    def retire(self, out: Any) -> None:
        for i, seq in enumerate(list(self.running)):
            if seq.is_finished:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
                del self.running[i]


class FreePopsByIndex(checkpoint("block-manager", 4)):  # type: ignore[misc]
    """Pops the table's blocks by a rising index while the table shrinks."""

    def free_seq(self, seq: Any) -> None:
        self._known(seq)
        table = self.tables[seq]
        for i in range(len(table)):
            self._release(table.pop(i))
        del self.tables[seq], self.lens[seq]


class LFUPopLooksUpRemoved(POLICIES["LFU"]):  # type: ignore[misc]
    """Reads the count of a heap entry's key before checking it is still resident."""

    def pop_victim(self) -> Any:
        while self.heap:
            count, reached, key = heapq.heappop(self.heap)
            if key in self.pinned or (self.count[key], self.reached[key]) != (count, reached):
                continue
            self.update_on_remove(key)
            return key
        raise NoVictim("every resident key is pinned")


class ReleaseDeletesByIndex(OFFLOAD["Hierarchy"]):  # type: ignore[misc]
    """Deletes each released entry from the lookup's list by a rising index."""

    def release(self, found: Any) -> None:
        for j in range(len(found)):
            key, i = found[j]
            self.tiers[i].unpin(key)
            del found[j]


class RoomPlainFreeOnly(checkpoint("prefix-cache", 3)):  # type: ignore[misc]
    """Counts only the plain free list as room, not the evictable cached blocks."""

    def _room(self, hits: Any) -> Any:
        return len(self.free)


class SIEVEPinDropsKey(POLICIES["SIEVE"]):  # type: ignore[misc]
    """Takes a pinned key out of the queue instead of recording the pin."""

    def update_on_pin(self, key: Any) -> None:
        if key in self.queue:
            if self.hand == key:
                i = self.queue.index(key)
                self.hand = self.queue[i + 1] if i + 1 < len(self.queue) else None
            self.queue.remove(key)


def _hint(topic: str, impl: Any) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(topic, impl, out=io.StringIO(), quiet=True)
    return failed.value.report.hint


SLIPS = {
    "scheduler retire": (
        "scheduler",
        RetireDeletesBySnapshotIndex,
        (
            "`retire`",
            "raised IndexError: list assignment index out of range",
            "`del self.running[i]`",
            "reference returns None",
        ),
    ),
    "block manager free": (
        "block-manager",
        FreePopsByIndex,
        ("`free_seq`", "raised IndexError", "`self._release(table.pop(i))`", "returns None"),
    ),
    "LFU pop": (
        "eviction-policy",
        {**POLICIES, "LFU": LFUPopLooksUpRemoved},
        (
            "`LFU.pop_victim`",
            "raised KeyError: 'c' (a lookup of a key that is not there)",
            "self.count[key]",
            "returns 'a'",
        ),
    ),
    "offload release": (
        "kv-offload",
        {**OFFLOAD, "Hierarchy": ReleaseDeletesByIndex},
        ("`Hierarchy.release`", "raised IndexError", "`key, i = found[j]`", "returns None"),
    ),
}


@pytest.mark.parametrize("name", list(SLIPS))
def test_a_learners_own_error_is_reported_by_its_line_call_and_the_references_outcome(
    name: str,
) -> None:
    topic, impl, said = SLIPS[name]
    hint = _hint(topic, impl)
    for words in said:
        assert words in hint, hint
    assert "on the call under where:" in hint, hint
    # the error type's usual cause is a guess about this slip, and the fields a raise left
    # half-changed are no rule broken
    for usual in (EXCEPTION_HINTS["IndexError"], EXCEPTION_HINTS["KeyError"], "empty case"):
        assert usual not in hint, hint
    assert "yours left" not in hint and "yours removed" not in hint, hint


def test_after_a_learners_error_a_checks_hint_shows_only_where_it_fits_the_call() -> None:
    # the stale-entry check's hint is declared about LFU.pop_victim: the call that raised
    hint = _hint("eviction-policy", {**POLICIES, "LFU": LFUPopLooksUpRemoved})
    assert "This check was written for: pop_victim must skip stale heap entries" in hint, hint
    # the scheduler machine's hint for an exception is declared about no one method; the
    # refcount check's is about free_seq's fields, which a raise leaves half-changed
    hint = _hint("scheduler", RetireDeletesBySnapshotIndex)
    assert "This check was written for" not in hint, hint
    hint = _hint("block-manager", FreePopsByIndex)
    assert "This check was written for" not in hint, hint
    assert "refcount" not in hint, hint


def test_two_results_a_block_size_apart_by_chance_get_no_unit_factor() -> None:
    # _room counting the plain free list: 1 where 2 are left, with block_size 2; a second
    # state (a pool one block larger) parts them by one block, not by a factor; your _room
    # called with no hits shows the cause
    hint = _hint("prefix-cache", RoomPlainFreeOnly)
    assert "with no hits at all yours counts 1 block(s) of room where num_free is 2" in hint
    assert "the plain free and the evictable ones alike" in hint, hint
    assert "block_size" not in hint and "tokens" not in hint, hint


def test_a_block_size_factor_is_said_only_once_a_second_state_shows_it_again() -> None:
    class Manager:
        block_size = 4

    same = {"tables": {}}

    def diff(second: Any) -> str | None:
        d = Difference(
            "allocate", "", (), same, same, same, "returned 2", "returned 8", Manager(), "", False
        )
        return kind_reading(Difference(**{**d.__dict__, "second": second}))

    assert diff(lambda: (3, 12, 4)) is not None
    assert "block_size (4)" in (diff(lambda: (3, 12, 4)) or "")
    for unconfirmed in (None, lambda: None, lambda: (3, 5, 4), lambda: (12, 3, 4)):
        said = diff(unconfirmed)
        assert said == "yours returned 2, the reference 8", said
    assert number_words(2, 8, 4) is None  # one state alone: no kind, not even a factor
    assert number_words(2, 8, 4, (1, 4, 4)) is not None


def test_a_pin_taken_out_of_the_queue_is_read_as_the_pin_never_recorded() -> None:
    # the replay compares `pinned` too: the pin is placed, and its reading says what differs
    # (the order is right), not the rule the order already keeps
    hint = _hint("eviction-policy", {**POLICIES, "SIEVE": SIEVEPinDropsKey})
    assert hint.startswith("start at your `SIEVE.update_on_pin`"), hint
    assert "did not add it to `pinned`" in hint and "takes it out of" not in hint, hint


def test_with_no_method_found_a_hint_about_another_method_is_left_out() -> None:
    remove = Hint("the hand moves on", About(("SIEVE.update_on_remove",), ("hand",)))
    assert with_place(Finding(), remove, code="p.update_on_pin('b')\np.queue  # ['a']") == NO_PLACE
    assert with_place(Finding(), remove, code="p.hand  # 'b'") == remove
    assert with_place(Finding(), remove, code="p.update_on_remove('b')") == NO_PLACE
    called = Hint("pop", About(("SIEVE.pop_victim",), ("result",)))
    assert with_place(Finding(), called, code="x = p.pop_victim()") == called
    # a hint that declares nothing is no check's to judge; a method found by its graft alone
    # keeps only a hint about it, or one about what the check saw that names no other method
    assert with_place(Finding(), "plain words", code="p.queue") == "plain words"
    grafted = Finding(methods=("SIEVE.update_on_pin",))
    assert with_place(grafted, remove, code="p.queue") == GRAFTED_ONLY.format(
        method="update_on_pin"
    )
    assert with_place(grafted, remove, code="p.hand  # 'b'") == GRAFTED_ONLY.format(
        method="update_on_pin"
    )
    hand = Hint("the hand stays put", About((), ("hand",)))
    assert with_place(grafted, hand, code="p.hand  # 'b'") == hand


def test_what_a_check_saw_is_read_from_its_last_line() -> None:
    assert observed("p.put('a')\np.pinned  # set()") == (None, "pinned")
    assert observed("len(p)  # 1") == (None, "len")
    assert observed("v = p.pop_victim()") == ("pop_victim", None)
    assert observed("") == (None, None)


class LFUHitPushesNothing(POLICIES["LFU"]):  # type: ignore[misc]
    """A hit pushes no heap entry; pop_victim later takes min() of no current entry."""

    def update_on_hit(self, key: Any) -> None:
        self.clock += 1
        self.count[key] += 1
        self.reached[key] = self.clock

    def pop_victim(self) -> Any:
        live = [
            e
            for e in self.heap
            if (self.count.get(e[2]), self.reached.get(e[2])) == e[:2] and e[2] not in self.pinned
        ]
        count, reached, key = min(live)
        self.heap.remove((count, reached, key))
        self.update_on_remove(key)
        return key


def test_an_error_raised_after_the_first_difference_leaves_that_difference_its_reading() -> None:
    # the ValueError comes from the heap an earlier hit left without its entry: the report
    # starts at that hit, not at the line that raised
    hint = _hint("eviction-policy", {**POLICIES, "LFU": LFUHitPushesNothing})
    assert hint.startswith("start at your `LFU.update_on_hit`"), hint
    assert "it raised ValueError" not in hint, hint
    if "Later, on the last line under reproduce:, line " in hint:  # the program that raised
        assert "raised ValueError: min() arg is an empty sequence" in hint, hint
    else:  # step 1's heap check fails first, before any pop: it names the missing entry
        assert "what differs is the heap" in hint and "pushes one entry" in hint, hint
