"""A put that evicts what the reference evicts while `used` ends elsewhere is told which part of
the move yours left out: the stored chunk's size, and that only a put that evicts leaves it out
where a copy shows a put with room adding it; a victim left in `used` is not told that."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint

T = "kv-offload"
Evicting = checkpoint(T, 2)


def _hint(impl: Any) -> str:
    report, _ = failing_report(T, impl, 2)
    return str(report.hint)


def _store(tier: Any, key: Any, copy: Any, size: int) -> None:
    tier._data[key] = copy
    tier._sizes[key] = size


class _SizeAddedWithRoomOnly(Evicting):  # type: ignore[misc]
    """Adds the chunk's size to `used` only when the put evicted nothing."""

    def put(self, key: Any, payload: bytes, wait: int = 0) -> Any:
        size = self._payload_size(payload)
        if key in self._sizes or size > self.capacity:
            return super().put(key, payload, wait)
        victims = self._choose_victims(size)
        if victims is None:
            return super().put(key, payload, wait)
        evicted = [(v, self._read(v)) for v in victims]
        copy = self._write(key, payload)
        for v in victims:
            self._discard(v)
        _store(self, key, copy, size)
        if not victims:
            self._used += size
        return evicted


class _VictimsLeftInUsed(Evicting):  # type: ignore[misc]
    """Forgets each victim without taking its bytes off `used`."""

    def put(self, key: Any, payload: bytes, wait: int = 0) -> Any:
        size = self._payload_size(payload)
        if key in self._sizes or size > self.capacity:
            return super().put(key, payload, wait)
        victims = self._choose_victims(size)
        if victims is None:
            return super().put(key, payload, wait)
        evicted = [(v, self._read(v)) for v in victims]
        copy = self._write(key, payload)
        for v in victims:
            self._sizes.pop(v)
            self._drop(v)
        _store(self, key, copy, size)
        self._used += size
        return evicted


def test_a_size_added_only_with_room_is_named_with_its_path() -> None:
    said = _hint(_SizeAddedWithRoomOnly)
    assert "off `used` but never added the" in said
    assert "on a put that evicts (a put that evicts nothing adds it, on a copy)" in said


def test_victims_left_in_used_are_not_told_the_size_was_never_added() -> None:
    said = _hint(_VictimsLeftInUsed)
    assert "evicted 'a' (66 bytes) but left its bytes in `used`" in said
    assert "never added" not in said
