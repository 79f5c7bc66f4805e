"""kv-offload slips at the edges (an absent chunk, no tokens, a load at its break-even point,
files left behind), each graded end to end: the check added for it fails with its rule."""

from __future__ import annotations

from buggy_impls import failing_report
from unlisted import unlisted


def _report(name: str) -> str:
    slip = next(u for u in unlisted() if u.name == name)
    return failing_report("kv-offload", slip.impl, slip.step)[0].text


def test_an_absent_chunk_taken_for_evictable_is_caught_in_can_evict() -> None:
    report = _report("an absent chunk evictable")
    assert "can_evict('zz') of an absent chunk is True, expected False" in report
    assert "where: the difference starts in your `can_evict`" in report
    assert "can_evict is False for a chunk that is not in the tier" in report


def test_an_unpin_and_an_unref_of_an_absent_chunk_raise_chunk_not_found() -> None:
    for method, error in (("unpin", "ChunkNotPinned"), ("unref", "ChunkNotReferenced")):
        name = f"{method} of an absent chunk not {'pinned' if method == 'unpin' else 'referenced'}"
        report = _report(name)
        assert "✗ step 1 · counts never go below zero" in report
        said = f"tier.{method}('zz') raised {error}; expected ChunkNotFound: 'zz' is not resident"
        assert said in report
        assert f"where: the difference starts in your `{method}`" in report


def test_a_discard_that_keeps_the_file_is_caught_at_the_eviction() -> None:
    report = _report("a discarded chunk keeps its file")
    assert "✗ step 3 · one file per chunk" in report
    assert "is ['a.chunk', 'b.chunk'] with ['b'] resident" in report
    assert "where: the difference starts in your `DiskTier._discard`" in report
    assert "`_drop` deletes a disk chunk's file" in report
    assert "leaves one file per chunk, the chunk's own" not in report


def test_a_temporary_file_left_behind_is_caught_in_write() -> None:
    report = _report("a temporary file left behind")
    assert "✗ step 3 · one file per chunk" in report
    assert "is ['a.chunk', 'a.chunk.tmp'] with ['a'] resident" in report
    assert "where: the difference starts in your `DiskTier._write`" in report
    assert "leaves one file per chunk, the chunk's own" in report
    assert "evicted or removed" not in report


def test_a_load_of_no_tokens_costs_nothing() -> None:
    report = _report("a load of no tokens pays a latency")
    assert "✗ step 4 · a load where latency dominates" in report
    assert "h.load_seconds(0, 'disk') is 0.001 s; the simulator takes 0 s" in report
    assert "where: the difference starts in your `Hierarchy.load_seconds`" in report


def test_worth_loading_prices_the_tokens_not_whole_chunks() -> None:
    report = _report("worth loading priced at whole chunks")
    assert "✗ step 4 · worth loading, both ways" in report
    assert "h.worth_loading(257, 'disk') is False, expected True" in report
    assert "worth_loading is load_seconds < recompute_seconds for those tokens" in report


def test_a_remove_that_refuses_only_referenced_chunks_is_caught_on_a_pinned_one() -> None:
    report = _report("remove of a pinned chunk")
    assert "tier.remove('a') freed a chunk a lookup pinned" in report
    assert "where: the difference starts in your `remove`" in report
    assert "`remove` refuses a chunk a transfer reads or a lookup pinned" in report
    assert "can_evict is False while pin_count > 0" not in report


def test_worth_loading_compares_the_times_unrounded() -> None:
    report = _report("worth loading in whole milliseconds")
    assert "✗ step 4 · worth loading, both ways" in report
    assert "h.worth_loading(1, 'cpu') is False, expected True" in report
    assert "where: the difference starts in your `Hierarchy.worth_loading`" in report


def test_a_cascade_that_raises_on_a_victim_too_large_for_disk_is_caught() -> None:
    report = _report("a cascade that raises on a victim too large for disk")
    assert "✗ step 3 · a victim larger than the tier below is dropped" in report
    assert "raised ChunkTooLarge after changing cpu.keys" in report
    assert "where: the difference starts in your `Hierarchy._cascade`" in report
    assert "a victim larger than the whole tier below is dropped" in report
