"""What a weight cache's call answered or counted in place of the reference's, named only
where copies that differ in one thing behave as the reference does: an unpin answering
whether its key is still pinned (a bool), an unpin answering None for the last pin, a get
answering the newest entry's value, a 0 left in `_pins` read as a pin by the victim scan,
a get of a pinned key counting no hit. Each beside a look-alike where it must not be said."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint

TOPIC = "weight-cache"
Sized, Pinning, Checked, Final = (checkpoint(TOPIC, s) for s in (1, 3, 4, 5))


def _hint(impl: Any, step: int) -> str:
    report, _ = failing_report(TOPIC, impl, step)
    return str(report.hint)


def _unpin_one(cache: Any, key: Any) -> int:
    left = cache._pins[key] - 1
    if left:
        cache._pins[key] = left
    else:
        del cache._pins[key]
    return left


class _UnpinAnswersStillPinned(Pinning):  # type: ignore[misc,valid-type]
    def unpin(self, key):
        _unpin_one(self, key)
        return key in self._pins


class _UnpinAnswersAtMostOne(Pinning):  # type: ignore[misc,valid-type]
    """An int capped at 1, not a bool: True is never answered."""

    def unpin(self, key):
        return min(_unpin_one(self, key), 1)


class _UnpinAnswersNoneAtZero(Pinning):  # type: ignore[misc,valid-type]
    def unpin(self, key):
        _unpin_one(self, key)
        return self._pins.get(key)


class _UnpinAnswersNothing(Pinning):  # type: ignore[misc,valid-type]
    """None for every unpin, the last or not."""

    def unpin(self, key):
        _unpin_one(self, key)


class _GetAnswersNewest(Sized):  # type: ignore[misc,valid-type]
    def get(self, key):
        if key not in self._entries:
            return None
        value = self._entries[next(reversed(self._entries))][1]
        self._entries.move_to_end(key)
        return value


class _GetAnswersOldest(Sized):  # type: ignore[misc,valid-type]
    """Another key's value, but the oldest's, whatever is put after it."""

    def get(self, key):
        if key not in self._entries:
            return None
        value = self._entries[next(iter(self._entries))][1]
        self._entries.move_to_end(key)
        return value


class _ZeroKeptSkippedAsPinned(Pinning):  # type: ignore[misc,valid-type]
    def unpin(self, key):
        self._pins[key] -= 1
        return self._pins[key]

    def _next_victim(self):
        return next((k for k in self._entries if k not in self._pins), None)


class _EverPinnedSkipped(Pinning):  # type: ignore[misc,valid-type]
    """Skips every key ever pinned, from a set of its own: no 0 is left in `_pins`."""

    def pin(self, key):
        self.__dict__.setdefault("ever", set()).add(key)
        return super().pin(key)

    def _next_victim(self):
        ever = self.__dict__.get("ever", set())
        return next((k for k in self._entries if k not in ever), None)


class _PinnedHitUncounted(Final):  # type: ignore[misc,valid-type]
    def get(self, key):
        if key in self.eviction_order():
            self.hits += 1
        elif key not in self._entries:
            self.misses += 1
        return Pinning.get(self, key)


class _NoHitCounted(Final):  # type: ignore[misc,valid-type]
    """Counts misses only, pinned key or not."""

    def get(self, key):
        if key not in self._entries:
            self.misses += 1
        return Pinning.get(self, key)


def test_an_unpin_answering_whether_still_pinned_is_named() -> None:
    said = _hint(_UnpinAnswersStillPinned, 3)
    assert "yours answers whether 'a' is still pinned, a bool" in said
    assert "False for the last unpin" in said


def test_an_unpin_answering_an_int_is_not_called_a_bool() -> None:
    assert "a bool" not in _hint(_UnpinAnswersAtMostOne, 3)


def test_an_unpin_answering_none_for_the_last_pin_is_named() -> None:
    said = _hint(_UnpinAnswersNoneAtZero, 3)
    assert "yours returned None for the last unpin of 'a'" in said
    assert "with one pin more yours answers 1" in said


def test_an_unpin_answering_nothing_is_not_said_to_answer_none_at_zero_only() -> None:
    assert "only the count that reaches 0" not in _hint(_UnpinAnswersNothing, 3)


def test_a_get_answering_the_newest_value_is_named() -> None:
    said = _hint(_GetAnswersNewest, 1)
    assert "the value of 'b', the most recently used entry before this get" in said
    assert "yours answers the newest entry's value" in said


def test_a_get_answering_the_oldest_value_is_not_called_the_newest() -> None:
    assert "newest" not in _hint(_GetAnswersOldest, 1)


def test_a_zero_left_in_pins_and_read_as_a_pin_is_named() -> None:
    said = _hint(_ZeroKeptSkippedAsPinned, 3)
    assert "left it in `_pins` with a count of 0" in said
    assert "on a copy with that 0 entry deleted, yours names 'a'" in said


def test_a_scan_skipping_keys_ever_pinned_is_not_told_of_a_zero() -> None:
    said = _hint(_EverPinnedSkipped, 3)
    assert "count of 0" not in said and "whose pins were all released" in said


def test_a_pinned_hit_left_uncounted_is_named() -> None:
    said = _hint(_PinnedHitUncounted, 5)
    assert "yours counted no hit for 'a', which is pinned" in said
    assert "a get of a pinned key is a hit like any other" in said


def test_hits_never_counted_are_not_blamed_on_the_pin() -> None:
    assert "pinned" not in _hint(_NoHitCounted, 5)


class _ReplaceKeepsOldValue(Sized):  # type: ignore[misc,valid-type]
    """`old_size, value = ...pop(key)` rebinds the new value to the old one."""

    def put(self, key, value, size):
        if key in self._entries:
            old_size, value = self._entries.pop(key)
            self._used -= old_size
        self._entries[key] = (size, value)
        self._used += size


class _ReplaceKeepsOldSize(Sized):  # type: ignore[misc,valid-type]
    """Stores the new value but keeps the first size."""

    def put(self, key, value, size):
        if key in self._entries:
            size = self._entries[key][0]
            self._used -= size
        self._entries[key] = (size, value)
        self._entries.move_to_end(key)
        self._used += size


class _UnpinKeepsZero(Checked):  # type: ignore[misc,valid-type]
    def unpin(self, key):
        if key not in self._pins:
            raise ValueError(f"{key!r} is not pinned")
        self._pins[key] -= 1
        return self._pins[key]


class _UnpinNeverRaises(Checked):  # type: ignore[misc,valid-type]
    """Lets every unpin through, deleting the key at 0: no 0 is left in `_pins`."""

    def unpin(self, key):
        left = self._pins.get(key, 0) - 1
        if left > 0:
            self._pins[key] = left
        else:
            self._pins.pop(key, None)
        return max(left, 0)


def test_a_replacement_keeping_the_old_value_is_caught_and_named() -> None:
    report, _ = failing_report(TOPIC, _ReplaceKeepsOldValue, 1)
    assert "a replacement stores its new value" in report.text
    assert "a replacement of yours keeps the old value" in str(report.hint)
    assert "old size" not in str(report.hint)


def test_a_replacement_keeping_the_old_size_is_not_said_to_keep_the_value() -> None:
    assert "keeps the old value" not in _hint(_ReplaceKeepsOldSize, 1)


def test_an_unpin_let_through_by_a_zero_left_in_pins_is_named() -> None:
    said = _hint(_UnpinKeepsZero, 4)
    assert "an earlier unpin left 'a' in `_pins` with a count of 0" in said
    assert "yours raises ValueError, as the reference does" in said


def test_an_unpin_let_through_without_a_zero_is_told_the_rule_only() -> None:
    said = _hint(_UnpinNeverRaises, 4)
    assert "count of 0" not in said and "never goes below zero" in said
