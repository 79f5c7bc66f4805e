"""Two returned numbers one apart are asked about as an off by one only where the offset is
the method's own: other calls of the method (other arguments, the program with an earlier
line left out, a second state) part yours from the reference by the same offset. A number
one off as a by-product of something else (a pin count that adds the transfers reading the
key) is shown as the difference alone."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.readings.kinds import number_words
from servelab.grading.readings.kinds_offset import offset_holds
from unlisted import policies, weights

OFF = "off by one?"


def _hint(topic: str, impl: Any, step: int) -> str:
    report, _ = failing_report(topic, impl, step)
    return str(report.hint)


class _PinAddsTransfers(checkpoint("kv-offload", 1)):  # type: ignore[misc]
    """pin() answers the pins plus the transfers reading the key: one more with one transfer,
    right with none; no off by one of its own."""

    def pin(self, key):
        self._resident(key, "pin")
        self._pins[key] = self._pins.get(key, 0) + 1
        return self._pins[key] + self._refs.get(key, 0)


class _PinAnswersOneMore(checkpoint("kv-offload", 1)):  # type: ignore[misc]
    """pin() answers one more than the pin count, always: an off by one of its own."""

    def pin(self, key):
        self._resident(key, "pin")
        self._pins[key] = self._pins.get(key, 0) + 1
        return self._pins[key] + 1


def test_an_off_by_one_of_the_methods_own_is_asked_about() -> None:
    said = _hint("weight-cache", weights.UnpinReturnsOldCount, 3)  # named by what it returns
    assert "the pins 'a' had before this unpin" in said and OFF not in said
    sieve = {**checkpoint("eviction-policy", 4), "SIEVE": policies.SIEVELenOneShort}
    said = _hint("eviction-policy", sieve, 4)  # a query: its fields are read through len()
    assert "one less than the reference's" in said and OFF in said
    said = _hint("kv-offload", _PinAnswersOneMore, 1)
    assert "yours returned 2, the reference 1" in said and OFF in said


def test_a_number_one_off_as_a_by_product_is_shown_without_the_question() -> None:
    said = _hint("kv-offload", _PinAddsTransfers, 1)
    assert "yours returned 2, the reference 1: one more than the reference's" in said
    assert "off by one" not in said


def test_the_offset_must_hold_in_every_other_call_tried() -> None:
    def pairs(*found: tuple[Any, Any]) -> Any:
        return lambda: list(found)

    assert offset_holds(1, False, pairs((3, 2), (1, 0)), None)
    assert offset_holds(-1, False, None, lambda: (2, 3, None))
    assert not offset_holds(1, False, pairs((3, 2), (1, 1)), None)  # one call agrees
    assert not offset_holds(1, False, pairs((3, 2), (4, 2)), None)  # another offset
    assert not offset_holds(1, False, pairs(), None)  # nothing tried: nothing proven
    assert not offset_holds(1, True, pairs((3, 2)), None)  # the call changed a field wrong
    assert not offset_holds(1, False, pairs((3, 2), ("a", "b")), None)


def test_numbers_one_apart_are_said_without_a_cause() -> None:
    assert number_words(5, 4) == "one more than the reference's"
    assert number_words(3, 4) == "one less than the reference's"
