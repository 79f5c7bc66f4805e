"""Block-manager, prefix-cache and scheduler readings state a cause only on its proof: each is
shown on a real slip graded end to end (the catalogue, tests/unlisted), and kept back on a slip
with another cause whose first differing call looks alike."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from buggy_impls import failing_report, shown_hint
from servelab import checkpoint
from servelab.grading import load_topic
from servelab.grading.diagnose import HOOKS
from servelab.grading.mistakes import mistakes
from servelab.grading.mistakes.block_manager import (
    allocate_not_atomic,
    fork_copies_blocks,
    free_ignores_refcount,
    length_before_alloc,
    table_before_check,
)
from servelab.grading.mistakes.scheduler import never_retire, one_victim_per_step
from servelab.grading.readings import Difference
from servelab.grading.readings.block_manager import block_manager_reading
from servelab.grading.readings.prefix_cache import prefix_cache_reading
from servelab.grading.readings.scheduler import scheduler_reading
from servelab.kv.blocks import OutOfBlocks, SequenceExists, Slot
from unlisted import unlisted

# catalogue slips: what the report of each must say
CATALOGUE = {
    "allocate recorded before the fit check": (
        "block-manager",
        table_before_check.Buggy,
        "before finding that it does not fit",
    ),
    "allocate takes before it checks": (
        "block-manager",
        allocate_not_atomic.Buggy,
        "before taking any",
    ),
    "free_seq ignores the refcount": (
        "block-manager",
        free_ignores_refcount.Buggy,
        "do not ignore the refcount",
    ),
    "fork copies the blocks": (
        "block-manager",
        fork_copies_blocks.Buggy,
        "copied the blocks instead of sharing them",
    ),
    "one victim per step": ("scheduler", one_victim_per_step.Buggy, "preempt again"),
    "never retires": ("scheduler", never_retire.Buggy, "never retires"),
}


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_the_cause_is_stated_on_the_slip_it_was_written_for(name: str) -> None:
    topic, impl, said = CATALOGUE[name]
    # left out of the catalogue, as a mistake nobody listed: the reading speaks, not the match
    undiagnosed = replace(load_topic(topic), diagnose=lambda program, impl: None)
    report, program = failing_report(undiagnosed, impl)
    others = [m for m in mistakes(topic) if m.impl is not impl]
    hint = shown_hint(HOOKS[topic].explain(program, impl, None, others), report)
    assert said in hint, hint


# unlisted slips: what the report must say, and the cause a look-alike reading stated before
UNLISTED = {
    "length recorded before the id check": ("before the lines that record", "does not fit"),
    "blocks taken before the id check": ("check that raises SequenceExists", "before taking any"),
    "free_seq skips the last block": ("it lost 0 of the 1", "ignore the refcount"),
    "fork gives the child a block": ("yours took 1 block in fork", "copied the blocks"),
    "the victim holds the most tokens": ("newest running", "preempt again"),
    "hits claimed by their count": ("off the evictable list", "before taking new blocks"),
    "hits claimed before the fit check": ("only after that test", "check that the request fits"),
    "room asked for the whole prompt": ("which fits: 1 of its 3 blocks is a hit", "free` where"),
    "lookup capped a block short": ("your cap is one block short", "cap one block short?"),
    "evictable hits revived last": ("before taking new blocks", "claiming a hit takes"),
    "retire skips the next sequence": ("however the list it walks changes", "never retires"),
    "retire retires one per step": ("retire every finished sequence", "changes under it"),
    "decode walks a slice of running": ("a loop over a copy of running", "reorders"),
    "decode preempts every newer sequence": ("as well as", "preempt again"),
    "retire stops at a running sequence": ("once they stand first in running", "never"),
    "retire from the back stops at a running one": ("once they stand last in running", "never"),
    "the victim holds the fewest tokens": ("the victim is the newest running", "preempt again"),
}
SLIPS = [u for u in unlisted() if u.name in UNLISTED]


def test_every_slip_named_here_is_unlisted() -> None:
    assert {u.name for u in SLIPS} == set(UNLISTED)


@pytest.mark.parametrize("u", SLIPS, ids=[u.name for u in SLIPS])
def test_the_report_states_what_the_call_proves(u: Any) -> None:
    report, _ = failing_report(u.topic, u.impl, u.step)
    said, unsaid = UNLISTED[u.name]
    assert said.lower() in report.hint.lower(), report.hint
    assert unsaid not in report.hint, report.hint


def _d(method: str, args: tuple[Any, ...], before: Any, mine: Any, theirs: Any, subject: Any):
    return Difference(method, "", args, before, mine[1], theirs[1], mine[0], theirs[0], subject)


class _StrictFit(checkpoint("block-manager", 1)):  # type: ignore[misc]
    """need >= free refuses: a request that takes the last free block is refused."""

    def allocate(self, seq: int, n_tokens: int) -> None:
        need = -(-n_tokens // self.block_size)
        if need and need >= len(self.free):
            raise OutOfBlocks("no room")
        self.tables[seq] = [self._alloc() for _ in range(need)]
        self.lens[seq] = n_tokens


class _OneBlockHigh(checkpoint("block-manager", 1)):  # type: ignore[misc]
    """n // block_size + 1 blocks, compared right: refuses only a multiple that fills the pool."""

    def allocate(self, seq: int, n_tokens: int) -> None:
        need = n_tokens // self.block_size + 1
        if need > len(self.free):
            raise OutOfBlocks("no room")
        self.tables[seq] = [self._alloc() for _ in range(need)]
        self.lens[seq] = n_tokens


def test_an_exact_fit_refused_is_told_as_the_comparison_only_when_yours_refuses_every_one() -> None:
    before = {"tables": {}, "num_free": 2}
    refused = ("raised OutOfBlocks", before)
    took = ("returned None", {"tables": {0: [0, 1]}, "num_free": 0})
    strict = block_manager_reading(_d("allocate", (0, 4), before, refused, took, _StrictFit(2, 2)))
    assert "an exact fit is no shortage" in (strict or "")
    high = block_manager_reading(_d("allocate", (0, 4), before, refused, took, _OneBlockHigh(2, 2)))
    assert high is not None and "exactly 2 free" in high
    assert "an exact fit is no shortage" not in high and "ceil(n / block_size)" in high


def test_a_failed_append_releases_before_the_copy_only_when_a_shared_block_lost_a_holder() -> None:
    raised = "raised OutOfBlocks"
    shared = {"tables": {0: [0, 1]}, "lengths": {0: 6}, "refcounts": {0: 1, 1: 2}, "num_free": 0}
    dropped = {**shared, "refcounts": {0: 1, 1: 1}}
    bm = checkpoint("block-manager", 4)(2, 4)
    said = block_manager_reading(
        _d("append_slot", (0,), shared, (raised, dropped), (raised, shared), bm)
    )
    assert "before releasing the shared block" in (said or "")
    boundary = {**shared, "lengths": {0: 8}, "refcounts": {0: 1, 1: 1}}
    freed = {**boundary, "refcounts": {0: 1}}
    said = block_manager_reading(
        _d("append_slot", (0,), boundary, (raised, freed), (raised, boundary), bm)
    )
    assert "before releasing the shared block" not in (said or "")


class _CountedInFinally(checkpoint("block-manager", 4)):  # type: ignore[misc]
    """Counts the token in a ``finally``: after a failed _alloc, not before it."""

    def append_slot(self, seq: int) -> Any:
        self._known(seq)
        table, n = self.tables[seq], self.lens[seq]
        try:
            if n % self.block_size == 0:
                table.append(self._alloc())
            return Slot(table[-1], n % self.block_size, None)
        finally:
            self.lens[seq] = n + 1


def test_a_failed_append_counted_the_token_only_when_the_length_rose_by_one() -> None:
    raised = "raised OutOfBlocks"
    before = {"tables": {0: [0]}, "lengths": {0: 4}, "refcounts": {0: 1}, "num_free": 0}
    bm = length_before_alloc.Buggy(1, 4)
    bm.allocate(0, 4)
    one = {**before, "lengths": {0: 5}}
    said = block_manager_reading(
        _d("append_slot", (0,), before, (raised, one), (raised, before), bm)
    )
    assert "raised the length before allocating" in (said or "")
    # counted after the failure (a finally): the same numbers, told without the order
    late = _CountedInFinally(1, 4)
    late.allocate(0, 4)
    said = block_manager_reading(
        _d("append_slot", (0,), before, (raised, one), (raised, before), late)
    )
    assert "raised the length before" not in (said or ""), said
    assert "yours counted the token (length 4 -> 5) though the call raised" in (said or "")
    zero = {**before, "lengths": {0: 0}}
    said = block_manager_reading(
        _d("append_slot", (0,), before, (raised, zero), (raised, before), bm)
    )
    assert "raised the length" not in (said or "")


def test_another_error_than_out_of_blocks_is_no_prefix_fit_check() -> None:
    bm = checkpoint("prefix-cache", 3)(4, 2)
    before = {"tables": {0: [0, 1]}, "refcounts": {0: 1, 1: 1}, "num_free": 2}
    claimed = {**before, "refcounts": {0: 2, 1: 2}}
    raised = "raised SequenceExists"
    said = prefix_cache_reading(
        _d("allocate", (0, [1, 2, 3]), before, (raised, claimed), (raised, before), bm)
    )
    assert said is not None and "SequenceExists" in said and "fits" not in said


class _ClaimsInlineAllocAdds(checkpoint("prefix-cache", 3)):  # type: ignore[misc]
    """Claims each hit first, by ``ref += 1`` (an evictable hit stays on the evictable list),
    and ``_alloc`` raises the refcount by one: the hit reclaimed ends held twice, as when the
    hits are claimed after the new blocks are taken."""

    def allocate(self, seq: int, token_ids: list[int]) -> int:
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        for block in hits:
            self.ref[block] += 1
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), -(-len(tokens) // self.block_size)):
            table.append(self._alloc())
            if i < len(chain):
                self._register(table[-1], *chain[i])
        self.tables[seq], self.seq_tokens[seq] = table, tokens
        return len(hits) * self.block_size

    def _alloc(self) -> int:
        block = self.free.popleft() if self.free else self.evictable_lru.popitem(last=False)[0]
        self._forget(block)
        self.ref[block] += 1
        return block


def _hit_oldest_evictable(cls: Any) -> Any:
    """A pool of three one-token blocks, every one evictable, block 0 ([1]) the oldest."""
    bm = cls(3, 1)
    bm.allocate(0, [1])
    bm.allocate(1, [4, 5])
    bm.free_seq(0)
    bm.free_seq(1)
    return bm


def test_a_hit_taken_twice_is_told_as_claimed_late_only_when_it_was_reclaimed_unclaimed() -> None:
    before = {"tables": {}, "refcounts": {}, "reclaim order": [0, 2, 1]}
    theirs = ("returned 1", {"tables": {2: [0, 2]}, "refcounts": {0: 1, 2: 1}})
    twice = ("returned 1", {"tables": {2: [0, 0]}, "refcounts": {0: 2}})
    late = _hit_oldest_evictable(unlisted_impl("evictable hits revived last"))
    said = prefix_cache_reading(_d("allocate", (2, [1, 9]), before, twice, theirs, late))
    assert "before taking new blocks" in (said or ""), said
    # the same fields from a call that claimed the hit first, yet left it evictable
    early = _hit_oldest_evictable(_ClaimsInlineAllocAdds)
    said = prefix_cache_reading(_d("allocate", (2, [1, 9]), before, twice, theirs, early))
    assert said is not None and "before taking new blocks" not in said, said
    assert "at refcount 1: claiming a hit takes it off the evictable list" in said


def unlisted_impl(name: str) -> Any:
    return next(u.impl for u in unlisted() if u.name == name)


class _FitsAgainstNumFree(checkpoint("prefix-cache", 3)):  # type: ignore[misc]
    """Tests the fit first, but against num_free, not _room(hits): an evictable hit counts as
    room, and the allocate runs out half-way, its hits already claimed."""

    def allocate(self, seq: int, token_ids: list[int]) -> int:
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self.num_free:
            raise OutOfBlocks(f"sequence {seq} needs {need} new blocks")
        for block in hits:
            self._claim(block)
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), len(hits) + need):
            table.append(self._alloc())
            if i < len(chain):
                self._register(table[-1], *chain[i])
        self.tables[seq], self.seq_tokens[seq] = table, tokens
        return len(hits) * self.block_size


def test_a_failed_allocate_that_tested_first_is_told_the_test_not_an_order() -> None:
    report, _ = failing_report("prefix-cache", _FitsAgainstNumFree, 3)
    assert "start at your `allocate`" in report.hint, report.hint
    assert "more than _room(hits)" in report.hint, report.hint
    assert "check that the request fits before claiming" not in report.hint, report.hint


class _ReclaimsInPlace(checkpoint("prefix-cache", 3)):  # type: ignore[misc]
    """Claims its hits right but takes each new block itself: plain free first, else the oldest
    evictable, forgotten yet never taken off the evictable list."""

    def allocate(self, seq: int, token_ids: list[int]) -> int:
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self._room(hits):
            raise OutOfBlocks(f"sequence {seq} needs {need} new blocks")
        for block in hits:
            self._claim(block)
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), len(hits) + need):
            block = self.free.popleft() if self.free else next(iter(self.evictable_lru))
            self._forget(block)
            self.ref[block] = 1
            table.append(block)
            if i < len(chain):
                self._register(block, *chain[i])
        self.tables[seq], self.seq_tokens[seq] = table, tokens
        return len(hits) * self.block_size


def test_a_block_left_evictable_is_told_as_a_hit_only_when_it_is_one() -> None:
    hit = unlisted_impl("hits claimed by their count")
    report, _ = failing_report("prefix-cache", hit, 3)
    assert "a hit on an evictable block takes it off the evictable list" in report.hint
    report, _ = failing_report("prefix-cache", _ReclaimsInPlace, 3)
    assert "start at your `allocate`" in report.hint, report.hint
    assert "a hit on an evictable block" not in report.hint, report.hint
    assert "though this call took it as a new block" in report.hint, report.hint


class _DropsTheLastHit(checkpoint("prefix-cache", 1)):  # type: ignore[misc]
    """Returns its hits less the last, however long the prompt."""

    def _lookup(self, tokens: list[int]) -> list[int]:
        return list(super()._lookup(tokens)[:-1])


def test_a_lookup_one_short_is_told_as_its_cap_only_when_a_longer_prompt_finds_the_block() -> None:
    bm = _DropsTheLastHit(8, 2)
    for block, link in enumerate(bm._chain([1, 2, 3, 4, 5, 6])):
        bm._register(block, *link)
    state = {"hashed": [0, 1, 2]}
    args = ([1, 2, 3, 4, 5, 6, 7],)
    d = _d("_lookup", args, state, ("returned [0, 1]", state), ("returned [0, 1, 2]", state), bm)
    assert "cap is one block short" not in (prefix_cache_reading(d) or "")


def test_finished_sequences_left_running_are_told_as_skipped_only_after_one_dropped() -> None:
    before = {"running": [(0, 2), (1, 2), (2, 2)]}
    theirs = ("returned None", {"running": [(1, 2)]})
    skipped = ("returned None", {"running": [(1, 2), (2, 2)]})
    said = scheduler_reading(_d("retire", (None,), before, skipped, theirs, None)) or ""
    assert "left finished sequence(s) [2] running" in said and "changes under it" not in said


def test_extra_victims_are_told_only_after_the_reference_s_own_victims() -> None:
    before = {"running": [(0, 3), (1, 3), (2, 3)], "waiting": []}
    theirs = {"running": [(0, 3), (1, 3)], "waiting": [(2, 3)], "out.preempted": [2]}
    extra = {"running": [(0, 3)], "waiting": [(1, 3), (2, 3)], "out.preempted": [2, 1]}
    said = scheduler_reading(
        _d("decode", (None,), before, ("returned None", extra), ("returned None", theirs), None)
    )
    assert "as well as" in (said or "")
    other = {"running": [(0, 3)], "waiting": [(2, 3), (1, 3)], "out.preempted": [1, 2]}
    said = scheduler_reading(
        _d("decode", (None,), before, ("returned None", other), ("returned None", theirs), None)
    )
    assert "as well as" not in (said or "")


def test_a_decode_that_raised_after_preempting_asks_about_its_loop_only_for_a_freed_one() -> None:
    before = {"running": [(0, 3), (1, 3)]}
    mine = {"running": [(0, 3)]}
    for error, asked in (("UnknownSequence", True), ("IndexError", False)):
        d = _d("decode", (None,), before, (f"raised {error}", mine), ("returned None", mine), None)
        assert ("loop over a copy of running" in (scheduler_reading(d) or "")) is asked
