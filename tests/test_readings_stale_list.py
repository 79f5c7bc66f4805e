"""A victim that is no longer resident is told by the learner's own list that still holds it,
as it was before the call; a victim no list of the learner's holds is not given that cause."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint

W = "weight-cache"
Pinning = checkpoint(W, 3)


def _hint(impl: Any) -> str:
    report, _ = failing_report(W, impl, 3)
    return str(report.hint)


class _OrderNeverPruned(Pinning):  # type: ignore[misc]
    """Keeps its own use order in a list that an eviction never takes the victim out of."""

    def put(self, key: Any, value: Any, size: int) -> Any:
        order = self.__dict__.setdefault("_order", [])
        if key in order:
            order.remove(key)
        order.append(key)
        return super().put(key, value, size)

    def get(self, key: Any) -> Any:
        order = self.__dict__.setdefault("_order", [])
        if key in order and key in self._entries:
            order.remove(key)
            order.append(key)
        return super().get(key)

    def _next_victim(self) -> Any:
        for key in self.__dict__.get("_order", []):
            if not self._pins.get(key):
                return key
        return None


class _GhostVictim(Pinning):  # type: ignore[misc]
    """Names a key never put once two entries are resident: no list of its own holds it."""

    def _next_victim(self) -> Any:
        return "~ghost" if len(self._entries) >= 2 else super()._next_victim()


def test_a_victim_kept_in_a_stale_list_is_told_by_that_list() -> None:
    said = _hint(_OrderNeverPruned)
    assert "which is not resident: your `_order` ([" in said
    assert "still holds it, as it was before this call" in said


def test_a_victim_that_no_list_holds_is_not_told_a_stale_list() -> None:
    said = _hint(_GhostVictim)
    assert "still holds it" not in said
