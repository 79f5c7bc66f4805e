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
    RetrieveFirstTwice,
    RetrieveReversed,
    RetrieveTierOrder,
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
    assert "yours pinned 'b' in the disk tier where the cpu tier holds it too" in hint
    assert "also pinned" not in hint


def test_a_chunk_pinned_in_both_tiers_is_said_pinned_also() -> None:
    hint = _hint(offload.LookupPinsEachTierHolding)
    assert "also pinned" in hint
