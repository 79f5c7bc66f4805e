"""Slips of three kinds a report tells plainly, whatever the topic: a refused call that
changed the state first (the fields it changed, before -> after), a method that returns or
keeps an object another party also holds (the same object, proved by identity), and a call
whose changes are the reference's while its answer is not (the answer against the rule).

Each is graded end to end, with a look-alike where the sentence must not appear."""

from __future__ import annotations

import io
from collections import deque
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import InvalidLength, OutOfBlocks
from servelab.testing.aliasing import held_at, own_line, returned_own
from servelab.weights.policies import NoVictim

POLICIES = checkpoint("eviction-policy", 4)
TIER = checkpoint("kv-offload", 2)
CACHE = checkpoint("weight-cache", 4)
SHARING = checkpoint("prefix-cache", 2)


def _failed(topic: str, impl: Any, step: int) -> Any:
    with pytest.raises(GradeFailure) as failed:
        grade(topic, impl, step, out=io.StringIO(), quiet=True)
    return failed.value.report


def _passes(topic: str, impl: Any, step: int) -> None:
    grade(topic, impl, step, out=io.StringIO(), quiet=True)


# ------------------------------------------------------------------ held_at, returned_own
class _Held:
    def __init__(self) -> None:
        self.queue = [1, 2]
        self.data = {"a": bytearray(b"x")}
        self.free = deque([3])
        self.name = "cpu"


def test_held_at_names_an_attribute_or_an_entry_of_one() -> None:
    held = _Held()
    assert held_at(held, held.queue) == "queue"
    assert held_at(held, held.data["a"]) == "data['a']"
    assert held_at(held, held.free) == "free"


def test_held_at_needs_the_same_object_and_one_a_caller_can_change() -> None:
    held = _Held()
    assert held_at(held, list(held.queue)) is None  # equal is not the same
    assert held_at(held, held.name) is None  # a str cannot be changed in place
    assert held_at(object(), []) is None  # no fields at all


def test_returned_own_reads_only_a_line_about_the_method_found() -> None:
    program = "p = SIEVE()\n" + own_line("p", "eviction_order()", "queue")
    said = returned_own(program, "SIEVE.eviction_order")
    assert said is not None and "keeps at `queue`, not a copy" in said
    assert returned_own(program, "pop_victim") is None
    assert returned_own("p = SIEVE()\np.eviction_order()", "eviction_order") is None


# ------------------------------------------------------------------ a returned list
class SieveOrderIsQueue(POLICIES["SIEVE"]):  # type: ignore[misc]
    """With no hand, no pin and no visited bit, returns the queue itself as the order."""

    def eviction_order(self) -> Any:
        if self.hand is None and not self.pinned and not any(self.visited.values()):
            return self.queue
        return super().eviction_order()


class SieveOrderCopiesQueue(POLICIES["SIEVE"]):  # type: ignore[misc]
    """The same fast path, returning a copy of the queue: right."""

    def eviction_order(self) -> Any:
        if self.hand is None and not self.pinned and not any(self.visited.values()):
            return list(self.queue)
        return super().eviction_order()


def test_an_order_that_is_the_policys_own_list_is_said_to_be_so() -> None:
    report = _failed("eviction-policy", {**POLICIES, "SIEVE": SieveOrderIsQueue}, 4)
    text = report.text
    assert "returned the policy's own `queue` list (the same object, not a copy)" in text
    assert "p.eviction_order() is p.queue  # True" in text
    assert "`SIEVE.eviction_order`" in report.hint
    assert "keeps at `queue`, not a copy" in report.hint
    assert "popping" not in report.hint  # no question about a cause it did not have


def test_an_order_copied_from_the_queue_passes() -> None:
    _passes("eviction-policy", {**POLICIES, "SIEVE": SieveOrderCopiesQueue}, 4)


# ------------------------------------------------------------------ a kept argument
class TierKeepsCallersPayload(TIER):  # type: ignore[misc]
    """Stores the caller's payload object itself."""

    def _write(self, key: Any, payload: Any) -> Any:
        return payload


class TierSlicesPayload(TIER):  # type: ignore[misc]
    """Stores a slice of the payload: a new object, so right."""

    def _write(self, key: Any, payload: Any) -> Any:
        return payload[:]


def test_a_tier_that_keeps_the_callers_bytearray_is_said_to() -> None:
    report = _failed("kv-offload", TierKeepsCallersPayload, 2)
    text = report.text
    assert "a put keeps its own copy" in text
    assert "the tier keeps the caller's object itself at `_data['a']`" in text
    assert "tier._data['a'] is chunk  # True" in text
    assert "`_write`" in report.hint


def test_a_tier_that_keeps_a_slice_passes() -> None:
    _passes("kv-offload", TierSlicesPayload, 2)


# ------------------------------------------------------------------ a refusal that changed
class SieveHandFollowsThenGivesUp(POLICIES["SIEVE"]):  # type: ignore[misc]
    """The hand follows the sweep and stays on the last pinned key when it gives up."""

    def pop_victim(self) -> Any:
        if not self.queue:
            raise NoVictim("empty")
        i = 0 if self.hand is None else self.queue.index(self.hand)
        run = 0
        while True:
            i %= len(self.queue)
            key = self.hand = self.queue[i]
            if key in self.pinned:
                run += 1
                if run == len(self.queue):
                    raise NoVictim("every resident key is pinned")
                i += 1
            elif self.visited[key]:
                run = 0
                self.visited[key] = False
                i += 1
            else:
                self.update_on_remove(key)
                return key


class SieveHandPutBackThenGivesUp(SieveHandFollowsThenGivesUp):
    """The same sweep, which puts the hand back where it was before giving up: right."""

    def pop_victim(self) -> Any:
        hand = self.hand
        try:
            return super().pop_victim()
        except NoVictim:
            self.hand = hand
            raise


def test_a_no_victim_that_moved_the_hand_shows_the_move() -> None:
    report = _failed("eviction-policy", {**POLICIES, "SIEVE": SieveHandFollowsThenGivesUp}, 4)
    text = report.text
    assert "raised NoVictim as it should, but changed the policy first (hand None -> 'b')" in text
    assert "changed hand first" in report.hint


def test_a_no_victim_that_puts_the_hand_back_passes() -> None:
    _passes("eviction-policy", {**POLICIES, "SIEVE": SieveHandPutBackThenGivesUp}, 4)


# ------------------------------------------------------------------ the answer alone
class UnpinReturnsPopped(CACHE):  # type: ignore[misc]
    """The last unpin returns what dict.pop gives back (1), not the pins left (0)."""

    def unpin(self, key: Any) -> Any:
        if not self._pins.get(key):
            raise ValueError(f"{key!r} is not pinned")
        left = self._pins[key] - 1
        if left:
            self._pins[key] = left
            return left
        return self._pins.pop(key)


class UnpinKeepsLastPin(CACHE):  # type: ignore[misc]
    """The last unpin returns 1 and leaves the pin: its state is wrong too."""

    def unpin(self, key: Any) -> Any:
        if not self._pins.get(key):
            raise ValueError(f"{key!r} is not pinned")
        if self._pins[key] > 1:
            self._pins[key] -= 1
        return self._pins[key]


class CachedCountedAfterRegister(SHARING):  # type: ignore[misc]
    """Counts the cached tokens after registering the prompt's own new blocks."""

    def allocate(self, seq: Any, token_ids: Any) -> Any:
        super().allocate(seq, token_ids)
        return self.num_cached_tokens(token_ids)


class CachedCountedWithoutRegistering(SHARING):  # type: ignore[misc]
    """Registers none of its new blocks and answers as if all of them hit: state wrong too."""

    def _register(self, block: Any, h: Any, block_tokens: Any) -> None:
        pass

    def allocate(self, seq: Any, token_ids: Any) -> Any:
        super().allocate(seq, token_ids)
        return len(list(token_ids)) // self.block_size * self.block_size


def test_an_unpin_whose_pins_are_right_is_told_its_answer_against_the_rule() -> None:
    hint = _failed("weight-cache", UnpinReturnsPopped, 4).hint
    assert "changed the pins as the reference does but returned 1, not 0" in hint
    assert "unpin() returns the pins left after removing this one" in hint


def test_an_unpin_whose_pins_are_wrong_is_not_told_its_work_is_right() -> None:
    hint = _failed("weight-cache", UnpinKeepsLastPin, 4).hint
    assert "as the reference does" not in hint


class CachedCountedAsPrompt(SHARING):  # type: ignore[misc]
    """Answers the prompt's length: the state right, an answer no lookup gives."""

    def allocate(self, seq: Any, token_ids: Any) -> Any:
        super().allocate(seq, token_ids)
        return len(list(token_ids))


def test_an_allocate_that_answers_the_lookup_after_its_own_blocks_is_told_so() -> None:
    hint = _failed("prefix-cache", CachedCountedAfterRegister, 2).hint
    assert "yours returned 8, what num_cached_tokens answers for this prompt after the call" in hint
    assert "asked before the call, it answers 0, the reference's answer" in hint
    assert "the work is right" not in hint


def test_an_allocate_whose_state_is_right_is_told_only_its_answer_differs() -> None:
    hint = _failed("prefix-cache", CachedCountedAsPrompt, 2).hint
    assert "changed the state as the reference does but returned" in hint
    assert "the answer it returns is not" in hint
    assert "num_cached_tokens answers" not in hint


def test_an_allocate_whose_state_differs_is_not_told_its_work_is_right() -> None:
    hint = _failed("prefix-cache", CachedCountedWithoutRegistering, 2).hint
    assert "the work is right" not in hint


# ------------------------------------------------------------------ a length with no table
BLOCKS = checkpoint("block-manager", 4)


class LengthBeforeValidation(BLOCKS):  # type: ignore[misc]
    """Records the length before checking it: a refused allocate leaves a length behind."""

    def allocate(self, seq: Any, n_tokens: Any) -> None:
        self._new(seq)
        self.lens[seq] = n_tokens
        super().allocate(seq, n_tokens)


class LengthBeforeValidationUndone(BLOCKS):  # type: ignore[misc]
    """Records the length first, and takes it back when the check refuses: right."""

    def allocate(self, seq: Any, n_tokens: Any) -> None:
        self._new(seq)
        self.lens[seq] = n_tokens
        try:
            super().allocate(seq, n_tokens)
        except Exception:
            del self.lens[seq]
            raise


class LengthKeptOnlyWhenInvalid(BLOCKS):  # type: ignore[misc]
    """Records the length first; takes it back on OutOfBlocks, but not on InvalidLength."""

    def allocate(self, seq: Any, n_tokens: Any) -> None:
        self._new(seq)
        self.lens[seq] = n_tokens
        if not isinstance(n_tokens, int) or n_tokens < 0:
            raise InvalidLength(f"a token count must be a non-negative int, got {n_tokens!r}")
        try:
            super().allocate(seq, n_tokens)
        except OutOfBlocks:
            del self.lens[seq]
            raise


def test_a_refused_allocate_that_kept_a_length_shows_it() -> None:
    report = _failed("block-manager", LengthBeforeValidation, 4)
    assert "`bm.allocate(1, 6)` raised OutOfBlocks but changed the state before" in report.text
    assert "(lengths {0: 4} -> {0: 4, 1: 6})" in report.text
    assert "records the sequence before finding that it does not fit" in report.hint
    assert "before taking any" not in report.hint  # it took no block


def test_an_invalid_length_kept_is_shown_too() -> None:
    report = _failed("block-manager", LengthKeptOnlyWhenInvalid, 4)
    assert "raised InvalidLength but changed the state before raising" in report.text
    assert "(lengths {0: 5} -> {0: 5, 1: -1})" in report.text
    assert "changed lengths first" in report.hint


def test_a_refused_allocate_that_takes_its_length_back_passes() -> None:
    _passes("block-manager", LengthBeforeValidationUndone, 4)
