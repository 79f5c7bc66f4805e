"""A kv-offload check's own message and hint say only what is true of the learner's run: a
remove that refused quietly is not told it freed the chunk, and a put that stored a chunk it
had no room for is told what it stored, next to the reference's sum labelled as the
reference's. A None from a put or its victim choice is one of their answers (a miss), not a
path that forgot to return. Graded end to end."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade

TOPIC = "kv-offload"
Pinned = checkpoint(TOPIC, 1)
Evicting = checkpoint(TOPIC, 2)


class RemoveInUseReturnsFalse(Pinned):
    """remove answers False for a chunk in use, without raising ChunkInUse."""

    def remove(self, key: str) -> bool:
        self._resident(key, "remove")
        if not self.can_evict(key):
            return False
        self._discard(key)
        return True


class RemoveChecksPinsOnly(Pinned):
    """remove refuses a pinned chunk only: one a transfer reads is freed."""

    def remove(self, key: str) -> None:
        self._resident(key, "remove")
        if self.pin_count(key):
            raise RuntimeError(f"{key!r} is pinned")
        self._discard(key)


class NeedFromCapacity(Evicting):
    """_choose_victims needs size - capacity bytes, forgetting what is used."""

    def _choose_victims(self, size: int) -> list[str] | None:
        need = size - self.capacity
        victims: list[str] = []
        for key in self._sizes:
            if need <= 0:
                break
            if self.can_evict(key):
                victims.append(key)
                need -= self._sizes[key]
        return victims if need <= 0 else None


class VictimScanStopsAtHeld(Evicting):
    """_choose_victims gives up (a miss) at the first chunk can_evict refuses."""

    def _choose_victims(self, size: int) -> list[str] | None:
        need = size - self.free
        victims: list[str] = []
        for key in self._sizes:
            if need <= 0:
                break
            if not self.can_evict(key):
                return None
            victims.append(key)
            need -= self._sizes[key]
        return victims if need <= 0 else None


def _report(impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, impl, step, quiet=True)
    return str(failed.value)


FREED = "freed a chunk a transfer still reads"
REFERENCED = "a chunk still referenced by a GPU transfer must not be evicted or freed"

# slip, step, what the report must say, what it must no longer say
CASES = {
    "a quiet refusal": (
        RemoveInUseReturnsFalse,
        1,
        ["tier.remove('a') returned False and left 'a' resident", "by raising ChunkInUse"],
        [FREED, REFERENCED],
    ),
    "a referenced chunk freed": (
        RemoveChecksPinsOnly,
        1,
        [FREED, "your `remove`"],
        ["left 'a' resident"],
    ),
    "room counted from the capacity": (
        NeedFromCapacity,
        2,
        [
            "in the reference the pinned 'a' leaves 10 of the 30 bytes free",
            "yours stored 'b' beside it: used is 40 of 30",
        ],
        [],
    ),
    "a miss where room could be made": (
        VictimScanStopsAtHeld,
        2,
        [
            "yours answered None once can_evict refused 'a', and asked it of no chunk after "
            "that one",
            "which makes room here (['b', 'c'])",
        ],
        ["every path of", "a name still None"],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_checks_message_and_hint_say_only_what_the_run_shows(case: str) -> None:
    impl, step, says, never = CASES[case]
    text = _report(impl, step)
    for part in says:
        assert part in text, text
    for part in never:
        assert part not in text, text
