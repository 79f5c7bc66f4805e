"""kv-offload readings at a tier's edges, each graded end to end on a planted slip and kept
silent on a look-alike: victims chosen at a chunk can_evict refuses (watched can_evict), a
chunk's bytes off by one number for every length, a put of a resident key that changed its
bytes, a retrieve that read a copy in a tier the lookup did not return (watched get), a load
that moves whole chunks; and the probes that a disk write copied over the chunk's name is
cut by a crash and that a disk put hands back its victims' bytes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.testing.kv_offload import crashing_writes
from unlisted import offload, offload_orders
from unlisted.offload_tiers import (
    CopyOverTheChunk,
    DiskCountsATenthMore,
    DiskCountsItsHeader,
    LoadWholeChunks,
    LookupDropsItsPinsOnAMiss,
    LookupStopsBelowTheCpu,
    PromotionVictimsPutBelow,
    PutAgainUpdates,
    PutResidentBeforeSize,
    RecordsBeforeItFits,
    RemoveDropsTheCopyFirst,
    RetrieveReadsEveryCopy,
    VictimsCountRefusedBytes,
    VictimsStopAtRefused,
    VictimsWithTheirCopy,
)

T = "kv-offload"
S3 = checkpoint(T, 3)
S4 = checkpoint(T, 4)


def _text(impl: Any, step: int) -> str:
    report, _ = failing_report(T, impl, step)
    return str(report.text)


def test_bytes_of_a_refused_chunk_counted_as_room_are_named() -> None:
    text = _text(VictimsCountRefusedBytes, 2)
    assert (
        "yours chose [] and stopped where the 10 free bytes, its victims' 0 and the bytes of "
        "'a' (20 bytes), which can_evict refused, first reach the 20 the chunk needs"
    ) in text
    assert "answered None once can_evict refused" not in text


def test_a_choice_that_stops_at_a_refused_chunk_is_named() -> None:
    text = _text(VictimsStopAtRefused, 2)
    assert (
        "yours answered None once can_evict refused 'a', and asked it of no chunk after that "
        "one ('b', 'c' in policy order"
    ) in text
    assert "first reach" not in text


def test_a_choice_short_of_room_without_a_refusal_is_not_said_to_count_one() -> None:
    text = _text(offload.VictimsOneShort, 2)
    assert "can_evict refused" not in text


def test_a_constant_number_of_bytes_added_to_every_chunk_is_named() -> None:
    text = _text({**S3, "DiskTier": DiskCountsItsHeader}, 3)
    assert (
        "yours counts 8 more bytes than the payload's length for every chunk, at every length "
        "tried (1, 7, 100, 4096 bytes)"
    ) in text


def test_bytes_off_by_a_varying_amount_are_not_said_constant() -> None:
    text = _text({**S3, "DiskTier": DiskCountsATenthMore}, 3)
    assert "for every chunk, at every length" not in text
    assert "times the payload's length" not in text


def test_a_resident_put_that_changed_its_bytes_is_said_to_be_no_update() -> None:
    text = _text(PutAgainUpdates, 2)
    assert "whose key it already holds" in text
    assert "Yours also changed `used` from 10 to 101 for a key it holds" in text


def test_a_resident_put_that_changed_nothing_is_not_said_to_change_bytes() -> None:
    text = _text(PutResidentBeforeSize, 2)
    assert "whose key it already holds" in text
    assert "Yours also changed `used`" not in text


def test_a_read_of_a_copy_in_another_tier_is_named() -> None:
    text = _text({**S3, "Hierarchy": RetrieveReadsEveryCopy}, 3)
    assert (
        "yours read 'a' with get in the cpu tier too (a replay of the call watched each "
        "tier's get), though the lookup found it in the disk tier"
    ) in text


def test_a_promotion_of_a_resident_chunk_is_not_said_a_read() -> None:
    text = _text({**S3, "Hierarchy": offload_orders.PromoteResidentToo}, 3)
    assert "with get in the cpu tier too" not in text


def test_a_load_of_whole_chunks_is_named() -> None:
    text = _text({**S4, "Hierarchy": LoadWholeChunks}, 4)
    assert "yours moves the bytes of whole chunks: a load of 257 tokens costs yours" in text


def test_a_load_short_of_a_partial_chunk_is_not_said_whole() -> None:
    text = _text({**S4, "Hierarchy": offload.ChunksRoundedDown}, 4)
    assert "whole chunks" not in text


def test_a_disk_write_copied_over_the_chunk_is_cut_by_a_crash_and_named() -> None:
    text = _text({**S3, "DiskTier": CopyOverTheChunk}, 3)
    assert "with crashing_writes('.chunk'): disk.put('b', payload('b', 40))" in text
    assert "b.chunk holds 20 of 40 bytes (the crash cut a write to a .chunk file)" in text
    assert "yours left b.chunk holding 20 of its 40 bytes when the write was cut short" in text


def test_a_copy_is_cut_only_from_a_file_beside_it(tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    (here / "a.chunk").write_bytes(b"a" * 40)
    with crashing_writes(".chunk") as cut:
        shutil.copytree(here, there)  # a copy of the whole folder: no chunk written
    assert cut == [] and (there / "a.chunk").read_bytes() == b"a" * 40
    (here / "b.tmp").write_bytes(b"b" * 40)
    with crashing_writes(".chunk") as cut:
        shutil.copyfile(here / "b.tmp", here / "b.chunk")  # the crash ends the block
        raise AssertionError("the copy was not cut")
    assert cut == [str(here / "b.chunk")] and (here / "b.chunk").stat().st_size == 20


def test_a_disk_put_handing_back_paths_is_caught() -> None:
    text = _text({**S3, "DiskTier": VictimsWithTheirCopy}, 3)
    assert "✗ step 3 · victims keep their KV" in text
    assert "disk.put('c', payload('c', 50)) handed back 'a' with a PosixPath, not its bytes" in text
    assert "yours handed back 'a' with a PosixPath, not its payload's bytes" in text


def test_victims_handed_back_as_keys_are_not_said_to_lack_bytes() -> None:
    text = _text(offload.PutReturnsEvictedKeys, 2)
    assert "not its payload's bytes" not in text


def test_pins_a_lookup_took_back_are_named() -> None:
    text = _text({**S3, "Hierarchy": LookupDropsItsPinsOnAMiss}, 3)
    assert "yours pinned 'a' and took the pin(s) back before it returned" in text


def test_a_lookup_that_stopped_early_is_not_said_to_take_pins_back() -> None:
    text = _text({**S3, "Hierarchy": LookupStopsBelowTheCpu}, 3)
    assert "took the pin(s) back" not in text


def test_a_copy_dropped_before_a_refusal_is_seen_in_the_tier_copies() -> None:
    text = _text(RemoveDropsTheCopyFirst, 1)
    assert "yours raised ChunkInUse but changed _data first" in text


def test_a_count_changed_before_a_refusal_is_not_said_a_copy() -> None:
    text = _text(offload.UnrefCountsFirst, 1)
    assert "_data" not in text


def test_a_promotion_victim_put_again_below_is_caught() -> None:
    text = _text({**S3, "Hierarchy": PromotionVictimsPutBelow}, 3)
    assert "✗ step 3 · a victim already below" in text
    assert "a victim the tier below already holds is not put there again" in text


def test_a_miss_that_left_the_chunk_recorded_is_named() -> None:
    text = _text(RecordsBeforeItFits, 2)
    assert "yours returned None (a miss) and yet left 'b' in `keys`, `used` 20 -> 40" in text


def test_a_miss_that_changed_nothing_is_not_said_recorded() -> None:
    text = _text(offload.FitNeedsSpare, 1)
    assert "a miss leaves the tier as it was" not in text
