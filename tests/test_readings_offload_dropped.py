"""An unpin() or unref() that takes its key out of the counts with one still left, where the
same call from one more keeps it, is told the threshold; one that drops the key from any count
is not told that."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint

T = "kv-offload"
Tier = checkpoint(T, 1)
LEFT = "only when its count reaches 0; does yours keep it only while more than one is left?"


def _hint(impl: Any) -> str:
    return str(failing_report(T, impl, 1)[0].hint)


class _UnrefDropsAtOne(Tier):  # type: ignore[misc]
    """Keeps a transfer count only while two or more are left."""

    def unref(self, key: Any) -> Any:
        self._resident(key, "unref")
        left = self._refs.get(key, 0) - 1
        if left < 0:
            return super().unref(key)
        if left >= 2:
            self._refs[key] = left
        else:
            self._refs.pop(key, None)
        return self.ref_count(key)


class _UnpinDropsAtOne(Tier):  # type: ignore[misc]
    """Keeps a pin count only while two or more are left."""

    def unpin(self, key: Any) -> Any:
        self._resident(key, "unpin")
        left = self._pins.get(key, 0) - 1
        if left < 0:
            return super().unpin(key)
        if left > 1:
            self._pins[key] = left
        else:
            self._pins.pop(key, None)
        return left


class _UnrefDropsAll(Tier):  # type: ignore[misc]
    """Forgets every transfer of a key at its first unref."""

    def unref(self, key: Any) -> Any:
        self._resident(key, "unref")
        if not self._refs.get(key):
            return super().unref(key)
        del self._refs[key]
        return self.ref_count(key)


def test_an_unref_dropping_at_one_is_told_the_threshold() -> None:
    said = _hint(_UnrefDropsAtOne)
    assert "out of `refs` with one transfer still left" in said and LEFT in said


def test_an_unpin_dropping_at_one_is_told_the_threshold() -> None:
    said = _hint(_UnpinDropsAtOne)
    assert "out of `pins` with one pin still left" in said and LEFT in said


def test_an_unref_dropping_every_transfer_is_not_told_a_threshold() -> None:
    assert LEFT not in _hint(_UnrefDropsAll)
