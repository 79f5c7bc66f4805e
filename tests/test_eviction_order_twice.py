"""An eviction_order() that lists a key twice is told the repeat (with the stale-entry question
under LFU), not a tie-break it did not break; one that lists each key once is not told it."""

from __future__ import annotations

import heapq
from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint

P = "eviction-policy"
TWICE = " times (["


def _hint(impl: Any) -> str:
    return str(failing_report(P, impl, 2)[0].hint)


class _OrderFromEveryEntry(checkpoint(P, 2)):  # type: ignore[misc]
    """Lists the key of every heap entry that is not pinned, stale ones too."""

    def eviction_order(self) -> list[Any]:
        entries = heapq.nsmallest(len(self.heap), self.heap)
        return [key for _, _, key in entries if key in self.count and key not in self.pinned]


class _OrderByCountOnly(checkpoint(P, 2)):  # type: ignore[misc]
    """Orders by count alone, newest first among equal counts: each key listed once."""

    def eviction_order(self) -> list[Any]:
        keys = [k for k in self.count if k not in self.pinned]
        return sorted(reversed(keys), key=lambda k: self.count[k])


def test_an_order_with_a_key_twice_is_told_the_repeat() -> None:
    said = _hint(_OrderFromEveryEntry)
    assert TWICE in said and "does yours list those too?" in said
    assert "tie-break" not in said


def test_an_order_with_each_key_once_is_not_told_a_repeat() -> None:
    assert TWICE not in _hint(_OrderByCountOnly)
