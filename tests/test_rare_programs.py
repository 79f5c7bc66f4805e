"""Slips that only a rare program tells from the reference, each graded end to end: the check
added for it must fail, with its rule in the report (every grade once let these pass)."""

from __future__ import annotations

from buggy_impls import failing_report
from unlisted import unlisted


def _report(topic: str, name: str) -> str:
    slip = next(u for u in unlisted() if u.name == name)
    return failing_report(topic, slip.impl, slip.step)[0].text


def test_a_fork_that_checks_the_child_first_is_caught_on_an_unknown_parent() -> None:
    report = _report("block-manager", "fork checks the child first")
    assert "✗ step 4 · bad ids and lengths raise typed errors" in report
    assert "`bm.fork(7, 0)` raised SequenceExists" in report
    assert "where: the difference starts in your `fork`" in report
    assert "fork checks its parent before its child" in report


def test_an_absent_hash_read_as_the_last_block_is_caught_in_lookup() -> None:
    report = _report("prefix-cache", "an absent hash read as the last block")
    assert "✗ step 1 · a lookup stops at the first miss" in report
    assert "bm._lookup([5, 6, 7]) returned [7]; expected []" in report
    assert "where: the difference starts in your `_lookup`" in report


def test_a_retrieve_that_unpins_before_promoting_is_caught() -> None:
    report = _report("kv-offload", "a retrieve unpins before it promotes")
    assert "✗ step 3 · pins are held across the retrieve" in report
    assert "h.where('b'), pinned in cpu is ['disk'], expected ['cpu']" in report
    assert "where: the difference starts in your `Hierarchy.retrieve`" in report
    assert "keep every chunk of the lookup pinned" in report


def test_a_load_that_ties_the_recompute_is_not_worth_loading() -> None:
    report = _report("kv-offload", "a tie is worth loading")
    assert "✗ step 4 · worth loading, both ways" in report
    assert "h.worth_loading(0, 'cpu') is True, expected False" in report
    assert "worth_loading is load_seconds < recompute_seconds" in report


def test_a_length_recorded_before_a_refused_allocate_is_caught() -> None:
    report = _report("block-manager", "length recorded before the room check")
    assert "✗ step 1 · a request larger than the free blocks takes none" in report
    assert "changed the state before raising (lengths {0: 4} -> {0: 4, 1: 6})" in report
    assert report.split("reproduce:")[1].split("where:")[0].split()[-3] == "bm.seq_len(1)"
    assert "records the sequence before finding that it does not fit" in report


def test_a_free_that_keeps_the_length_is_caught() -> None:
    report = _report("block-manager", "free keeps the length")
    assert "✗ step 1 · free_seq returns blocks at refcount 0" in report
    assert "bm.seq_len(0) is 6; sequence 0 was freed" in report
    assert report.split("reproduce:")[1].split("where:")[0].split()[-1] == "bm.seq_len(0)"
    assert "where: the difference starts in your `free_seq`" in report
    assert "yours left 0 in `lengths`; the reference removes it" in report
    assert "free_seq forgets the sequence whole" in report


def test_a_cascade_that_adds_a_lower_miss_is_caught_in_cascade() -> None:
    report = _report("kv-offload", "a cascade adds a lower miss")
    assert "✗ step 3 · tiers at their edges" in report
    assert "where: the difference starts in your `Hierarchy._cascade`" in report


def test_a_chunk_of_the_cpu_tiers_exact_size_is_promoted() -> None:
    report = _report("kv-offload", "promotion only below the CPU size")
    assert "✗ step 3 · tiers at their edges" in report
    assert "h.where('a') after its retrieve is ['disk'], expected ['cpu', 'disk']" in report
    assert "where: the difference starts in your `Hierarchy.retrieve`" in report


def test_a_pinned_key_tried_before_the_caches_size_is_caught() -> None:
    report = _report("weight-cache", "a pinned key tried before the cache's size")
    assert "✗ step 4 · larger than the cache is told before a pin" in report
    assert (
        "cache.put('a', '<a weights>', 500) raised EntryPinned, expected an EntryTooLarge" in report
    )
    assert "where: the difference starts in your `_check_can_admit`" in report


def test_a_copy_with_no_free_block_written_in_place_is_caught_at_step_3() -> None:
    report = _report("block-manager", "a copy without room written in place")
    assert "✗ step 3 · a copy with no free block raises" in report
    assert "`bm.append_slot(0)` returned Slot(block=1, offset=2, cow_src=None)" in report
    assert "a slot in block 1, which sequence 1 still holds; expected OutOfBlocks" in report
    assert "where: the difference starts in your `append_slot`" in report


def test_a_running_recomputed_chunk_that_samples_at_the_prompt_is_caught() -> None:
    report = _report("token-budget", "a running chunk samples at the prompt's end")
    assert "✗ step 3 · a running recomputed chunk samples only at the request's end" in report
    assert "is [(1, 2, 2, True)], expected [(1, 2, 2, False)]" in report
    assert "where: the difference starts in your `schedule_running`" in report
    assert "start + num_tokens == seq.num_tokens" in report


def test_a_remove_of_an_absent_chunk_is_not_found_before_in_use() -> None:
    report = _report("kv-offload", "remove tries the hold before the chunk")
    assert "✗ step 1 · remove refuses a chunk a transfer reads" in report
    assert "tier.remove('zz') raised ChunkInUse; expected ChunkNotFound" in report
    assert "where: the difference starts in your `remove`" in report
    assert "ChunkNotFound for an absent chunk" in report


def test_victims_that_free_exactly_the_need_are_enough() -> None:
    report = _report("kv-offload", "victims past an exact fit")
    assert "✗ step 2 · evict in policy order until it fits" in report
    assert "victims of put('d', 40 bytes) is ['a', 'b'], expected ['a']" in report
    assert "where: the difference starts in your `_choose_victims`" in report
    assert "evict in policy order only until the chunk fits, and no more" in report


def test_an_unref_taken_for_a_use_is_caught() -> None:
    report = _report("kv-offload", "an unref taken for a use")
    assert "✗ step 1 · a count is not a use" in report
    assert "after ref('a'), unref('a') is ['b', 'a'], expected ['a', 'b']" in report
    assert "where: the difference starts in your `unref`" in report


def test_chunks_promoted_last_first_are_caught() -> None:
    report = _report("kv-offload", "chunks promoted last first")
    assert "✗ step 3 · a retrieve keeps each tier's LRU order" in report
    assert "h.tiers[0].keys() after h.retrieve(h.lookup(['b', 'c'])) is ['c', 'b']" in report
    assert "where: the difference starts in your `Hierarchy.retrieve`" in report
    assert "promotes the chunks it read in the lookup's order" in report


def test_a_disk_read_without_a_use_is_caught() -> None:
    report = _report("kv-offload", "a disk read without a use")
    assert "✗ step 3 · a retrieve keeps each tier's LRU order" in report
    assert "h.tiers[1].keys() after h.retrieve(h.lookup(['a'])) is ['a', 'b', 'c']" in report
    assert "where: the difference starts in your `Hierarchy.retrieve`" in report
    assert "a read from disk is a use there" in report


def test_a_chunk_the_cpu_tier_holds_is_not_promoted_again() -> None:
    report = _report("kv-offload", "a chunk the CPU tier holds promoted again")
    assert "✗ step 3 · a chunk stored again after its lookup" in report
    assert "h.tiers[0].keys() after h.retrieve(found) is ['c', 'a'], expected ['a', 'c']" in report
    assert "where: the difference starts in your `Hierarchy.retrieve`" in report
    assert "promotes only a chunk the CPU tier does not hold now" in report


def test_a_release_that_unpins_where_the_chunk_is_now_is_caught() -> None:
    report = _report("kv-offload", "release unpins where the chunk is now")
    assert "✗ step 3 · a release drops its own pins" in report
    assert "where: the difference starts in your `Hierarchy.release`" in report
    assert "the tier found names" in report and "the cpu tier's pin is not this lookup's" in report


def test_worth_loading_without_the_latency_is_caught_and_named() -> None:
    report = _report("kv-offload", "worth loading without the latency")
    assert "✗ step 4 · worth loading, both ways" in report
    assert "h.worth_loading(65536, 'disk') is True, expected False" in report
    assert "where: the difference starts in your `Hierarchy.worth_loading`" in report
    assert "as a load from 'disk' would with no latency" in report


def test_a_chunk_larger_than_the_cpu_tier_stays_below() -> None:
    report = _report("kv-offload", "a chunk larger than the CPU tier promoted")
    assert "✗ step 3 · tiers at their edges" in report
    assert "h.tiers[1].put('z', payload('z', 40))" in report
    assert "where: the difference starts in your `Hierarchy.retrieve`" in report
    assert "yours raised ChunkTooLarge where the reference returns" in report
    assert "wrong field" not in report


def test_worth_loading_over_another_link_is_not_read_as_a_missing_latency() -> None:
    report = _report("kv-offload", "worth loading over the host link")
    assert "as a load from the 'cpu' tier would" in report
    assert "no latency" not in report


def test_evictions_counted_in_put_are_caught_by_a_direct_evict() -> None:
    report = _report("weight-cache", "evictions counted in put")
    assert "✓ step 5 · hits, misses and evictions are counted" in report
    assert "✗ step 5 · an eviction is counted in _evict" in report
    assert "after cache._evict('a'), (hits, misses, evictions, evicted_bytes) is (0, 0, 0, 0)" in (
        report
    )
    assert "where: the difference starts in your `_evict`" in report


def test_a_prefix_hit_held_by_a_running_request_needs_no_free_block() -> None:
    report = _report("token-budget", "a prefix hit's shared blocks counted as new")
    assert "✗ step 2 · a prefix hit held by a running request takes no free block" in report
    assert "is [(0, 9, 1, True)], expected [(0, 9, 1, True), (1, 8, 1, True)]" in report
    assert "where: the difference starts in your `admit`" in report
    assert "shared, not taken from the free pool" in report


def test_an_append_that_raises_the_length_before_its_block_is_caught_at_step_2() -> None:
    report = _report("block-manager", "append raises the length before the block")
    assert "✗ step 2 · an append with no free block changes nothing" in report
    assert "`bm.append_slot(0)` raised OutOfBlocks but changed the state before raising" in report
    assert "where: the difference starts in your `append_slot`" in report
    assert "lengths {0: 4} -> {0: 5}" in report


def test_an_append_that_leaves_a_half_made_entry_is_caught_at_step_2() -> None:
    report = _report("block-manager", "append leaves a half-made entry")
    assert "✗ step 2 · an append with no free block changes nothing" in report
    assert "where: the difference starts in your `append_slot`" in report
    assert "tables {0: [0]} -> {0: [0, None]}" in report


def test_admission_sized_at_the_prompt_is_caught_at_step_1() -> None:
    report = _report("scheduler", "admission sized at the prompt")
    assert "✗ step 1 · a request with generated tokens is sized at all its tokens" in report
    assert "is [(1, 2)], expected [(1, 5)]: prompt 2 + 3 generated" in report
    assert "where: the difference starts in your `admit`" in report
    assert "seq.num_tokens tokens (prompt + generated)" in report


def test_fits_asked_about_the_prompt_only_is_caught_at_step_1() -> None:
    report = _report("scheduler", "fits asked about the prompt only")
    assert "✗ step 1 · a request with generated tokens is sized at all its tokens" in report
    assert "OutOfBlocks: sequence 1 needs 3 blocks for 5 tokens, only 2 are free" in report
    assert "where: the difference starts in your `admit`" in report


def test_an_admit_that_allocates_the_prompt_only_is_caught_at_step_1() -> None:
    report = _report("scheduler", "admit allocates the prompt")
    assert "✗ step 1 · a request with generated tokens is sized at all its tokens" in report
    assert "bm.seq_len(1) after admission is 2, expected 5" in report
    assert "where: the difference starts in your `admit`" in report
