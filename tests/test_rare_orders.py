"""Slips that only one program tells from the reference (a table's order, a copy that lets go
of the shared block twice, a hit that fails its check, a decode into a copy, a plain block
freed in front, a claim that forgets), each graded end to end at its own step: the check
added for it fails, and the report names what yours did there and nothing else."""

from __future__ import annotations

import servelab
from buggy_impls import failing_report
from servelab.grading.readings.block_manager_cow import over_released_reading
from servelab.grading.readings.difference import Difference
from servelab.grading.readings.prefix_cache_rules import claim_forgotten
from unlisted import unlisted


def _report(topic: str, name: str) -> str:
    slip = next(u for u in unlisted() if u.name == name)
    return failing_report(topic, slip.impl, slip.step)[0].text


def test_a_table_built_as_a_set_is_caught_at_step_1() -> None:
    report = _report("block-manager", "table built as a set")
    assert "✗ step 1 · a table lists its blocks in the order taken" in report
    assert "bm.block_table(1) is [1, 2, 3]; the free list was [3, 2, 1, 0]" in report
    assert "where: the difference starts in your `allocate`" in report


def test_a_copy_that_releases_the_shared_block_twice_is_named() -> None:
    report = _report("block-manager", "copy releases the shared block twice")
    assert "where: the difference starts in your `append_slot`" in report
    assert "yours dropped the shared block 1's refcount by 2 (2 -> 0), and by 2 again" in report
    assert "refcount 0" not in report.split("hint:")[1]


def test_a_copy_that_zeroes_the_shared_block_is_not_read_as_released_twice() -> None:
    report = _report("block-manager", "copy zeroes the shared block")
    hint = report.split("hint:")[1]
    assert "twice" not in hint
    assert "dropped the shared block 1 to refcount 0 (2 -> 0), and to 0 again" in hint


def test_a_copy_that_releases_once_gets_no_over_release_reading() -> None:
    # the reading's condition: the shared block's refcount fell further than the reference's
    twice_impl = next(u for u in unlisted() if u.name == "copy releases the shared block twice")
    bm = twice_impl.impl(8, 4)
    bm.allocate(0, 6)
    bm.fork(0, 1)
    before = {"refcounts": {0: 2, 1: 2}, "tables": {0: [0, 1], 1: [0, 1]}}
    after = {"refcounts": {0: 2, 1: 1, 2: 1}, "tables": {0: [0, 2], 1: [0, 1]}}
    slot = "returned Slot(block=2, offset=2, cow_src=1)"
    same = Difference("append_slot", "", (0,), before, after, after, slot, slot, bm)
    assert over_released_reading(same) is None  # yours dropped it by one, as the reference
    reference = servelab.checkpoint("block-manager", 3)(8, 4)
    reference.allocate(0, 6)
    reference.fork(0, 1)
    twice = dict(after, refcounts={0: 2, 1: 0, 2: 1})
    unproven = Difference("append_slot", "", (0,), before, twice, after, slot, slot, reference)
    assert over_released_reading(unproven) is None  # one more holder: it falls by one there
    read = Difference("append_slot", "", (0,), before, twice, after, slot, slot, bm)
    assert "by 2 again when one more sequence held it" in (over_released_reading(read) or "")


def test_a_hit_that_fails_its_check_ends_the_lookup() -> None:
    report = _report("prefix-cache", "an unverified hit skipped")
    assert "✗ step 1 · a hit that fails its check ends the lookup" in report
    assert "bm._lookup([1, 2, 3, 4, 5, 6, 7]) returned [0, 2]; expected [0]" in report
    assert "where: the difference starts in your `_lookup`" in report


def test_a_decode_that_names_the_block_it_copied_is_caught_at_step_2() -> None:
    report = _report("prefix-cache", "a decode names the block it copied")
    assert "✗ step 2 · a decode that fills a copy names the copy" in report
    assert "yours left block 0 has a hash and block 1 none" in report
    assert "where: the difference starts in your `append_slot`" in report


def test_a_plain_free_block_put_in_front_is_caught_at_step_3() -> None:
    report = _report("prefix-cache", "a plain free block put in front")
    assert "✗ step 3 · a freed plain block joins the right end" in report
    assert "free_list() went from [1, 2, 3] to [0, 1, 2, 3]" in report
    # the call is found too, by the free list's order (the state's key counts it only)
    assert "where: the difference starts in your `_release`" in report
    assert "yours put 0 at the front of `free`" in report


def test_a_claim_that_forgets_the_hash_is_named() -> None:
    report = _report("prefix-cache", "a claim forgets the hash")
    assert "where: the difference starts in your `_claim`" in report
    assert "yours claimed block 0 for a hit but cleared its hash and removed its map entry" in (
        report
    )


def test_a_claim_that_leaves_the_block_evictable_is_not_read_as_forgetting() -> None:
    report = _report("prefix-cache", "release parks a held block")
    assert "yours claimed block" not in report


def test_claim_forgotten_reads_only_a_claim_that_cleared_what_the_reference_keeps() -> None:
    before = {"hashed": [0, 1], "cached": [0, 1]}
    kept = Difference(
        "_claim", "", (0,), before, before, before, "returned None", "returned None", None
    )
    assert claim_forgotten(kept) is None
    gone = {"hashed": [1], "cached": [1]}
    forgot = Difference(
        "_claim", "", (0,), before, gone, before, "returned None", "returned None", None
    )
    assert "cleared its hash and removed its map entry" in (claim_forgotten(forgot) or "")
    # the reference forgets too (a hit on a block it reclaims): nothing to read
    both = Difference(
        "_claim", "", (0,), before, gone, gone, "returned None", "returned None", None
    )
    assert claim_forgotten(both) is None


def test_a_copy_that_releases_both_blocks_is_told_the_copy_went_back() -> None:
    report = _report("block-manager", "copy releases both blocks")
    assert "where: the difference starts in your `append_slot`" in report
    assert "yours took block 2 for the copy and gave it back" in report
    assert "the shared block 1 fell by one (2 -> 1), as it should" in report


def test_a_copy_never_taken_off_the_free_list_is_not_told_it_went_back() -> None:
    report = _report("block-manager", "copy peeks the free list")
    assert "where: the difference starts in your `append_slot`" in report
    assert "gave it back" not in report
    assert "yours put block 2 in sequence 0's table with refcount 0" in report
