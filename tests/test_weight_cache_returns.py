"""What a weight cache's call returned in place of the reference's answer: a pin() or unpin()
that answers its key's count from before the call, a get that answers the entry's size,
each said only where calls on copies from other states return the same; pin counts one
apart that no reading proves are shown without a cause."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.readings.difference import Difference
from servelab.grading.readings.weight_cache_rules import returned_other_count
from unlisted.weights_returns import PinReturnsKeysPinned

Sized, Pinning = checkpoint("weight-cache", 1), checkpoint("weight-cache", 3)


def _hint(impl: Any, step: int) -> str:
    report, _ = failing_report("weight-cache", impl, step)
    return str(report.hint)


class _PinReturnsOldCount(Pinning):  # type: ignore[misc,valid-type]
    def pin(self, key):
        before = self._pins.get(key, 0)
        self._pins[key] = before + 1
        return before


class _PinReturnsTwoLessFromTheSecond(Pinning):  # type: ignore[misc,valid-type]
    """Answers 0 on a first pin (the count before it) but 1 on a second, one off only at
    first: not the count before the call."""

    def pin(self, key):
        self._pins[key] = self._pins.get(key, 0) + 1
        return 0 if self._pins[key] == 1 else self._pins[key] - 2


class _GetReturnsSize(Sized):  # type: ignore[misc,valid-type]
    def get(self, key):
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key][0]


class _GetReturnsThirty(Sized):  # type: ignore[misc,valid-type]
    """Answers 30 for every key: the first key's size only by chance."""

    def get(self, key):
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return 30


class _GetReturnsKey(Sized):  # type: ignore[misc,valid-type]
    def get(self, key):
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return key


class _GetReturnsA(Sized):  # type: ignore[misc,valid-type]
    """Answers 'a' for every key: the key asked for only by chance."""

    def get(self, key):
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return "a"


def test_a_get_answering_its_key_is_named() -> None:
    said = _hint(_GetReturnsKey, 1)
    assert "yours returned 'a', the key asked for" in said and "answers 'b' too" in said


def test_a_get_answering_one_constant_key_is_not_said_to_answer_the_key() -> None:
    assert "the key asked for" not in _hint(_GetReturnsA, 1)


def test_a_pin_answering_the_count_before_it_is_named() -> None:
    report, _ = failing_report("weight-cache", _PinReturnsOldCount, 3)
    # the check, the place and the hint all name the first pin with a wrong answer
    assert "cache.pin('b') returned 0, expected 1 (the pin count now)" in report.text
    assert "called as cache.pin('b')" in report.text, report.text
    said = str(report.hint)
    assert "the pins 'b' had before this pin" in said and "off by one" not in said


def test_a_pin_one_off_only_at_first_is_shown_without_a_cause() -> None:
    said = _hint(_PinReturnsTwoLessFromTheSecond, 3)
    assert "yours changed the pins as the reference does but returned 0, not 1" in said
    assert "before this pin" not in said and "off by one" not in said


def test_a_get_answering_the_size_is_named() -> None:
    said = _hint(_GetReturnsSize, 1)
    assert "the size stored for 'a'" in said and "answers 50, its size too" in said


def test_a_get_answering_a_constant_is_not_called_the_size() -> None:
    assert "size stored" not in _hint(_GetReturnsThirty, 1)


def _pin_difference(cache: Any, key: str, mine: int, theirs: int) -> Difference:
    pins = {k: cache.pin_count(k) for k in cache.keys() if cache.pin_count(k)}
    before = {"resident": list(cache.keys()), "pins": pins}
    after = {**before, "pins": {**pins, key: pins.get(key, 0) + 1}}
    return Difference(
        "pin", "", (key,), before, after, after, f"returned {mine}", f"returned {theirs}", cache
    )


def test_a_count_over_the_cache_names_only_the_states_it_was_tried_from() -> None:
    alone = PinReturnsKeysPinned(100)
    alone.put("a", "A", 10)
    alone.pin("a")
    said = returned_other_count(_pin_difference(alone, "a", 1, 2)) or ""
    assert "the number of keys pinned" in said, said
    assert said.endswith("from other states (one more pin of this key)"), said
    beside = PinReturnsKeysPinned(100)
    for k in "ab":
        beside.put(k, k.upper(), 10)
    beside.pin("a")
    said = returned_other_count(_pin_difference(beside, "a", 1, 2)) or ""
    tried = "another key's pin(), one more pin elsewhere, or one more pin of this key"
    assert said.endswith(f"from other states ({tried})"), said
