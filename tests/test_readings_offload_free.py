"""A ``_choose_victims`` that finds no room, or chooses victims, while the tier's free bytes
already hold the chunk is told the numbers and need = size - free; that it frees the chunk's
whole size, ignoring the free bytes, only where a replay on a fresh tier of its own shows it."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint

T = "kv-offload"
Evicting = checkpoint(T, 2)
IGNORED = "so yours frees the chunk's whole size (need = size), ignoring the free bytes"


def _hint(impl: Any) -> str:
    report, _ = failing_report(T, impl, 2)
    return str(report.hint)


class _FreesWholeSize(Evicting):  # type: ignore[misc]
    """Counts the victims' bytes up to the chunk's size, never the bytes already free."""

    def _choose_victims(self, size: int) -> Any:
        victims, got = [], 0
        for key in self._sizes:
            if got >= size:
                break
            if self.can_evict(key):
                victims.append(key)
                got += self._sizes[key]
        return victims if got >= size else None


class _UsedTakenForFree(Evicting):  # type: ignore[misc]
    """Look-alike: need = size - used, the used bytes read as the free ones (the same as the
    whole size on an empty tier, not once a chunk is held)."""

    def _choose_victims(self, size: int) -> Any:
        need, victims = size - self._used, []
        for key in self._sizes:
            if need <= 0:
                break
            if self.can_evict(key):
                victims.append(key)
                need -= self._sizes[key]
        return victims if need <= 0 else None


class _EvictsOneFirst(Evicting):  # type: ignore[misc]
    """Look-alike: tests the room only after taking a victim, so one is always evicted."""

    def _choose_victims(self, size: int) -> Any:
        need, victims = size - self.free, []
        for key in self._sizes:
            if self.can_evict(key):
                victims.append(key)
                need -= self._sizes[key]
                if need <= 0:
                    break
        return victims if need <= 0 else None


class _OneVictimTooMany(Evicting):  # type: ignore[misc]
    """Look-alike: stops one victim late, once the chunk fits with room to spare."""

    def _choose_victims(self, size: int) -> Any:
        need, victims = size - self.free, []
        for key in self._sizes:
            if need < 0:
                break
            if self.can_evict(key):
                victims.append(key)
                need -= self._sizes[key]
        return victims if need <= 0 else None


def test_a_miss_with_the_chunk_in_the_free_bytes_is_told_the_numbers_and_the_proof() -> None:
    hint = _hint(_FreesWholeSize)
    assert "yours answered None (no room) for a chunk of 10 bytes with 100 of" in hint, hint
    assert "need = size - free, here 10 - 100 = -90" in hint, hint
    assert "holding 'a' (4 bytes, 6 free): yours chose ['a'] for a chunk of 4" in hint, hint
    assert IGNORED in hint, hint


def test_the_used_bytes_read_as_free_get_the_numbers_but_not_the_whole_size() -> None:
    hint = _hint(_UsedTakenForFree)
    assert "need = size - free, here 10 - 100 = -90" in hint, hint
    assert "ignoring the free bytes" not in hint, hint


def test_a_victim_chosen_while_the_free_bytes_hold_the_chunk_is_told_so() -> None:
    hint = _hint(_EvictsOneFirst)
    assert "yours chose ['a'] to evict for a chunk of 20 bytes with 70 of" in hint, hint
    assert "need = size - free, here 20 - 70 = -50" in hint, hint
    assert "ignoring the free bytes" not in hint, hint


def test_one_victim_too_many_is_told_the_free_bytes_only_where_they_hold_the_chunk() -> None:
    # caught first where the free bytes hold the chunk exactly (need 0): there it is so
    hint = _hint(_OneVictimTooMany)
    assert "40 of the tier's 100 bytes free, which already hold it" in hint, hint
    assert "need = size - free, here 40 - 40 = 0" in hint, hint
