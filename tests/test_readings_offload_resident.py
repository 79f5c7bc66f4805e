"""A put that misses: a key already here is a use whatever the free bytes, and a chunk is said to
fit only where the free bytes hold it (the step-2 eviction rule is not stated of a step-1 tier)."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint

Pinned = checkpoint("kv-offload", 1)


class _RoomBeforeResident(Pinned):  # type: ignore[misc,valid-type]
    """Asks for room before asking whether the key is here: a stored key put again into a
    full tier is a miss."""

    def put(self, key: Any, payload: Any) -> Any:
        size = self._payload_size(payload)
        if size <= self.capacity and size > self.free:
            return None
        return super().put(key, payload)


class _OneByteMargin(Pinned):  # type: ignore[misc,valid-type]
    """Keeps a byte free: a chunk that fills the tier to the byte is a miss."""

    def put(self, key: Any, payload: Any) -> Any:
        size = self._payload_size(payload)
        if key not in self._sizes and size <= self.capacity and size >= self.free:
            return None
        return super().put(key, payload)


def test_a_stored_key_put_again_into_a_full_tier_is_told_it_is_a_use() -> None:
    report = failing_report("kv-offload", _RoomBeforeResident, 1)[0]
    hint = str(report.hint)
    assert "is already here" in hint and "test the room before" in hint
    assert "every evictable chunk" not in hint and "that fits" not in hint


def test_a_new_chunk_missed_is_told_the_free_bytes_not_the_eviction_rule() -> None:
    report = failing_report("kv-offload", _OneByteMargin, 1)[0]
    text = report.text
    assert "already here" not in text
    assert "every evictable chunk" not in text
