"""kv-offload readings of a hierarchy's reads, each proved on a copy of the state under where:
the tier held_bytes asked a chunk's size of (seen through size_of), the order a retrieve
returned its payloads in (against the reference's on a copy), and a chunk a lookup pinned in a
slower tier only; each kept silent on a look-alike."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from unlisted import offload
from unlisted.offload_reads import (
    HeldBytesTopDict,
    HeldBytesTopSizes,
    LookupPinsLastHolder,
    ReleaseInTheCpuTierFirst,
    RetrieveFirstTwice,
    RetrieveReversed,
    RetrieveTierOrder,
    WriteAgainUnderTheFinalName,
)

T = "kv-offload"
S3 = checkpoint(T, 3)


def _hint(impl: Any, step: int = 3) -> str:
    report, _ = failing_report(T, {**S3, "Hierarchy": impl}, step)
    return str(report.hint)


def test_held_bytes_asking_the_cpu_tier_for_a_disk_chunk_is_named() -> None:
    hint = _hint(HeldBytesTopSizes)
    assert (
        "yours asked the cpu tier for the size of 'b' (`tiers[0].size_of('b')`, the KeyError), "
        "a chunk only the disk tier holds; every size yours asked for, it asked of the cpu tier"
    ) in hint
    # the call under where: raised it itself: not told as a later raise
    assert "Later," not in hint
    assert "On the last line under reproduce:" in hint


def test_a_size_read_past_size_of_is_not_said_asked() -> None:
    hint = _hint(HeldBytesTopDict)
    assert "KeyError" in hint
    assert "asked the cpu tier" not in hint


def test_payloads_in_tier_order_are_named() -> None:
    hint = _hint(RetrieveTierOrder)
    assert (
        "yours returned the found chunks' payloads in another order: those of ['b', 'c', 'a'] "
        "for found ['b', 'a', 'c'], the faster tier's first"
    ) in hint


def test_payloads_in_another_order_say_the_order_only() -> None:
    hint = _hint(RetrieveReversed)
    assert "in another order" in hint
    assert "the faster tier's first" not in hint


def test_a_payload_returned_twice_is_not_an_order() -> None:
    hint = _hint(RetrieveFirstTwice)
    assert "in another order" not in hint


def test_a_chunk_pinned_on_disk_only_is_not_said_pinned_also() -> None:
    hint = _hint(LookupPinsLastHolder)
    assert "yours pinned 'a' in the disk tier where the cpu tier holds it too" in hint
    assert "also pinned" not in hint


def test_a_chunk_pinned_in_both_tiers_is_said_pinned_also() -> None:
    hint = _hint(offload.LookupPinsEachTierHolding)
    assert "also pinned" in hint


class _WriteInPlace(S3["DiskTier"]):  # type: ignore[misc]
    """Writes the chunk's file in place: the first write tears it."""

    def _write(self, key, payload):  # type: ignore[no-untyped-def]
        final = self.path(key)
        with open(final, "wb") as f:
            f.write(payload)
        return final


def _report(classes: dict[str, Any]) -> str:
    report, _ = failing_report(T, classes, 3)
    return str(report.text)


def test_a_chunk_torn_in_a_second_write_under_its_name_is_caught_and_named() -> None:
    text = _report({**S3, "DiskTier": WriteAgainUnderTheFinalName})
    assert "with crashing_writes('.chunk'): disk.put('b', payload('b', 40))" in text
    assert "b.chunk holds 20 of 40 bytes (the crash cut a write to a .chunk file)" in text
    assert "yours left b.chunk holding 20 of its 40 bytes when the write was cut short" in text


def test_a_chunk_torn_in_its_first_write_is_shown_by_the_first_crash() -> None:
    text = _report({**S3, "DiskTier": _WriteInPlace})
    assert "with crashing_writes(): disk.put('b', payload('b', 40))" in text
    assert "cut a write to a .chunk file" not in text


def test_a_release_in_the_cpu_tier_of_a_disk_find_is_named() -> None:
    hint = _hint(ReleaseInTheCpuTierFirst)
    assert (
        "yours took the pin on 'a' off the cpu tier, which holds it too, and left the one in "
        "the disk tier, the tier found names (('a', 1))"
    ) in hint


def test_a_release_unpinning_twice_is_not_said_to_unpin_elsewhere() -> None:
    hint = _hint(offload.ReleaseEveryPin)
    assert "the tier found names" not in hint
