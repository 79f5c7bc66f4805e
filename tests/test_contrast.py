"""Neighbouring calls: the condition under which a learner's method and the reference's part.

The sentence is a fact of an experiment on the learner's own code: the same call by both
methods with one argument changed. It is said when the pattern is clean (one number, a switch
at another number, a key stored or new) and never otherwise; the experiment runs on copies.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading.diagnose import HOOKS
from servelab.grading.localise import Divergence
from servelab.grading.readings.contrast import appended, condition
from servelab.kv.blocks import OutOfBlocks
from unlisted import blocks, weights

Allocating = checkpoint("block-manager", 1)
Tier = checkpoint("kv-offload", 1)


class RefusesExactFit(Allocating):  # type: ignore[misc, valid-type]
    """Compares with `>=`: a sequence that needs exactly the free blocks is refused."""

    def allocate(self, seq: int, n_tokens: int) -> None:
        need = -(-n_tokens // self.block_size)
        if need >= len(self.free):
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks")
        self.tables[seq] = [self._alloc() for _ in range(need)]
        self.lens[seq] = n_tokens


class KeepsTwoBlocksBack(Allocating):  # type: ignore[misc, valid-type]
    """Keeps two blocks back it was never asked to: refuses from two blocks fewer than free."""

    def allocate(self, seq: int, n_tokens: int) -> None:
        need = -(-n_tokens // self.block_size)
        if need + 2 > len(self.free):
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks")
        self.tables[seq] = [self._alloc() for _ in range(need)]
        self.lens[seq] = n_tokens


class RefusesEvenCounts(Allocating):  # type: ignore[misc, valid-type]
    """Refuses every even token count: a pattern no one number or switch describes."""

    def allocate(self, seq: int, n_tokens: int) -> None:
        if n_tokens % 2 == 0:
            raise OutOfBlocks(f"sequence {seq}: {n_tokens} tokens")
        super().allocate(seq, n_tokens)


class RePutKeepsPlace(Tier):  # type: ignore[misc, valid-type]
    """A put of a key already stored returns at once: it keeps its old place in the order."""

    def put(self, key: str, payload: bytes) -> Any:
        if key in self._sizes:
            return []
        return super().put(key, payload)


#: A key stored, another, then the first again: the third put is the first that differs.
RE_PUT = "tier = RePutKeepsPlace(100, 'LRU')\n" + "\n".join(
    f"tier.put({k!r}, {k.encode()!r})" for k in "bab"
)


def _divergence(topic: str, program: str, impl: Any, step: int) -> Divergence:
    place = HOOKS[topic].localised(program, impl, step)
    assert place.divergence is not None
    return place.divergence


def _said(topic: str, program: str, impl: Any, step: int) -> str | None:
    return condition(HOOKS[topic].skeleton, _divergence(topic, program, impl, step))


def test_an_exact_fit_refused_parts_only_at_that_length_with_the_switch_one_early() -> None:
    said = _said(
        "block-manager", "bm = RefusesExactFit(1, 1)\nbm.allocate(0, 1)", RefusesExactFit, 1
    )
    assert said == (
        "tried with `n_tokens` from 0 to 5, yours and the reference part only at 1 (they agree "
        "at 0 and 2), where `n_tokens` (1) equals `num_free` (1): yours raises OutOfBlocks "
        "from 1 on, the reference from 2 on"
    )


class OneTokenGetsNoBlock(Allocating):  # type: ignore[misc, valid-type]
    """Gives a one-token prompt no block (as if its first token needed none): a slip at a fixed
    number, which a pool of one free block makes look like a rule about the free blocks."""

    def allocate(self, seq: int, n_tokens: int) -> None:
        if n_tokens == 1:
            self.tables[seq] = []
            self.lens[seq] = n_tokens
            return
        super().allocate(seq, n_tokens)


def test_a_relation_confirmed_on_a_second_state_is_said() -> None:
    # three blocks, one taken by an earlier call: the exact fit parts at 2 there, and from the
    # pool built one block larger at 3, with the free blocks: the relation is the rule broken
    program = "bm = RefusesExactFit(3, 1)\nbm.allocate(0, 1)\nbm.allocate(1, 2)"
    said = _said("block-manager", program, RefusesExactFit, 1)
    assert said is not None
    assert "only at 2 (they agree at 1 and 3), where `n_tokens` (2) equals `num_free` (2)" in said


def test_a_coincidence_of_a_tiny_state_is_not_said_as_a_relation() -> None:
    # one free block and a one-token prompt: true that 1 equals `num_free`, but from a larger
    # pool they still part at 1 alone, so the number, not the free blocks, parts them
    program = "bm = OneTokenGetsNoBlock(1, 1)\nbm.allocate(0, 1)"
    said = _said("block-manager", program, OneTokenGetsNoBlock, 1)
    assert said == (
        "tried with `n_tokens` from 0 to 5, yours and the reference part only at 1 (they agree "
        "at 0 and 2)"
    )


def test_a_relation_with_no_second_state_to_try_it_on_is_left_out() -> None:
    d = _divergence(
        "block-manager", "bm = RefusesExactFit(1, 1)\nbm.allocate(0, 1)", RefusesExactFit, 1
    )
    said = condition(HOOKS["block-manager"].skeleton, dataclasses.replace(d, program=""))
    assert said is not None and "only at 1" in said
    assert "equals" not in said and said.endswith("the reference from 2 on")


def test_switch_points_apart_by_more_than_one_are_named_with_the_gap() -> None:
    said = _said(
        "block-manager", "bm = KeepsTwoBlocksBack(4, 1)\nbm.allocate(0, 4)", KeepsTwoBlocksBack, 1
    )
    assert said is not None
    assert said == (
        "tried with `n_tokens` from 0 to 8, yours raises OutOfBlocks from `n_tokens` = 3 on, "
        "the reference from 5 on: 2 too early"
    )


def test_a_re_put_parts_for_a_key_already_stored_and_agrees_for_a_new_one() -> None:
    said = _said("kv-offload", RE_PUT, RePutKeepsPlace, 1)
    assert said is not None
    assert said.startswith("yours and the reference part for a key already in `keys` ('b')")
    assert said.endswith("for a key in no field ('c', 'd') they agree")


class PutRoomByCount(Tier):  # type: ignore[misc, valid-type]
    """A new key fits when its size is below the capacity less the number of keys: a room
    check on bytes and keys mixed, on the path a key already stored never reaches."""

    def put(self, key: str, payload: bytes) -> Any:
        if key not in self._sizes and self._payload_size(payload) > self.capacity - len(
            self._sizes
        ):
            return None
        if key not in self._sizes:
            self._data[key] = self._write(key, payload)
            self._sizes[key] = self._payload_size(payload)
            self._used += self._sizes[key]
            return []
        return super().put(key, payload)


def test_a_new_key_missing_room_gets_no_key_sentence_where_a_stored_key_returns_early() -> None:
    # the reference misses on 'b' (no room) and returns [] for the stored 'a': both sides
    # agree there only because a stored key never reaches the room check
    program = (
        "tier = PutRoomByCount(30, 'LRU')\ntier.put('a', b'a' * 20)\ntier.pin('a')\n"
        "tier.put('b', b'b' * 20)"
    )
    said = _said("kv-offload", program, PutRoomByCount, 1)
    assert said is None or "no field" not in said


def test_the_hint_says_what_the_reference_does_to_a_list_yours_left_as_it_was() -> None:
    hint = HOOKS["kv-offload"].explain(RE_PUT, RePutKeepsPlace, 1).place
    assert hint is not None
    assert "yours left `keys` as it was (['b', 'a']); the reference moves 'b' to the back" in hint
    assert "'a' at the back" not in hint  # the call moved 'b', not 'a'
    assert "Yours and the reference part for a key already in `keys`" in hint


def test_a_fit_check_one_block_too_many_parts_at_the_multiples_of_the_block_size() -> None:
    # n // block_size + 1 (an unlisted slip) differs at every multiple of the block size and
    # agrees between them
    program = "bm = OneBlockTooMany(4, 4)\nbm.allocate(0, 4)"
    d = _divergence("block-manager", program, blocks.OneBlockTooMany, 4)
    assert condition(HOOKS["block-manager"].skeleton, d) == (
        "tried with `n_tokens` from 0 to 8, yours and the reference part only at 0, 4 and 8, "
        "the multiples of block_size (4) among them"
    )


def test_a_pattern_that_is_not_clean_gets_no_sentence() -> None:
    # parts at every even count, agrees at every odd one: not one number, not one switch, and
    # no block size to read it by
    program = "bm = RefusesEvenCounts(8, 1)\nbm.allocate(0, 2)"
    assert _said("block-manager", program, RefusesEvenCounts, 1) is None


def test_a_correct_method_on_both_sides_gets_no_sentence() -> None:
    d = _divergence(
        "block-manager", "bm = RefusesExactFit(1, 1)\nbm.allocate(0, 1)", RefusesExactFit, 1
    )
    assert d.reference_class is not None
    subject = copy.deepcopy(d.subject)
    subject.__class__ = d.reference_class  # yours is now the reference's method itself
    same = dataclasses.replace(d, subject=subject, mine=d.theirs)
    assert condition(HOOKS["block-manager"].skeleton, same) is None


def test_the_experiment_changes_nothing_in_the_learners_object() -> None:
    d = _divergence("kv-offload", RE_PUT, RePutKeepsPlace, 1)
    before = copy.deepcopy(vars(d.subject))
    assert condition(HOOKS["kv-offload"].skeleton, d) is not None
    assert vars(d.subject) == before
    assert type(d.subject).__name__ == "RePutKeepsPlace"


def test_no_sentence_without_a_copy_of_the_object_or_the_reference() -> None:
    d = _divergence(
        "block-manager", "bm = RefusesExactFit(1, 1)\nbm.allocate(0, 1)", RefusesExactFit, 1
    )
    skeleton = HOOKS["block-manager"].skeleton
    assert condition(skeleton, dataclasses.replace(d, subject=None)) is None
    assert condition(skeleton, dataclasses.replace(d, reference_class=None)) is None
    assert condition(skeleton, None) is None


def test_a_neighbour_that_cannot_be_copied_silences_the_sentence() -> None:
    d = _divergence(
        "block-manager", "bm = RefusesExactFit(1, 1)\nbm.allocate(0, 1)", RefusesExactFit, 1
    )
    subject = copy.deepcopy(d.subject)
    subject.lock = threading.Lock()  # no deep copy of a lock
    bare = dataclasses.replace(d, subject=subject)
    assert condition(HOOKS["block-manager"].skeleton, bare) is None


def test_an_unlisted_slip_not_decided_by_its_key_gets_no_key_sentence() -> None:
    # the same pin recorded then refused for an absent key: absent keys raise on both sides, so
    # agreeing there says nothing, and no sentence claims the key decides it
    program = "c = PinThenCheck(100)\nc.pin('a')"
    place = HOOKS["weight-cache"].localised(program, weights.PinThenCheck, None)
    said = condition(HOOKS["weight-cache"].skeleton, place.divergence)
    assert said is None or "key" not in said


@pytest.mark.parametrize(
    ("hint", "said", "joined"),
    [
        ("start at x: y", "yours part", "start at x: y. Yours part"),
        ("does yours do that?", "yours part", "does yours do that? Yours part"),
        ("start at x", None, "start at x"),
    ],
)
def test_the_sentence_follows_the_hint_as_its_own(hint: str, said: str | None, joined: str) -> None:
    assert appended(hint, said) == joined


class PrintsAndRefusesExactFit(RefusesExactFit):
    """The exact-fit slip, with a debugging print left in."""

    def allocate(self, seq: int, n_tokens: int) -> None:
        print("allocating", seq, n_tokens)
        super().allocate(seq, n_tokens)


def test_a_learners_print_in_a_neighbouring_call_stays_quiet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    d = _divergence(
        "block-manager",
        "bm = PrintsAndRefusesExactFit(1, 1)\nbm.allocate(0, 1)",
        PrintsAndRefusesExactFit,
        1,
    )
    capsys.readouterr()
    said = condition(HOOKS["block-manager"].skeleton, d)
    assert said is not None and "only at 1" in said
    assert capsys.readouterr().out == ""


def test_a_field_whose_reading_raised_holds_no_keys_for_the_key_sentence() -> None:
    # ("unreadable", "TypeError") marks a `len` whose reading raised: its two words are not
    # keys the field holds ("for one already in `len` ('unreadable', 'TypeError')")
    from servelab.grading.observe import Unreadable
    from servelab.grading.readings.contrast import _holders, _present_keys

    for marker in (Unreadable(TypeError()), ("unreadable", "TypeError")):
        before = {"len": marker, "order": ["a", "b"]}
        assert _present_keys(before, "x") == [("a", "order"), ("b", "order")]
        assert _holders(before, "unreadable") == []
        assert _present_keys({"len": marker}, "x") == []
