"""The kind of a first diverging call, read from what it shows and nothing more.

A unit's factor is named only when the two numbers are exactly that factor apart; an entry
moved to the other end, left behind, missing or put in another list only when the fields show
it; and a call that shows none of these kinds gets no reading at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading.readings import Difference
from servelab.grading.readings.kinds import factor_words, kind_reading, number_words
from servelab.kv.offload import ChunkInUse


def _diff(before: Any, mine: Any, theirs: Any, outcomes: tuple[str, str] = ("", "")) -> Any:
    d = Difference("m", "", (), before, mine, theirs, outcomes[0], outcomes[1], None)
    return kind_reading(d)


@pytest.mark.parametrize(
    ("mine", "theirs", "said"),
    [
        (10.0, 0.01, "1000 times"),
        (0.01, 10.0, "1/1000"),
        (2.5e-9, 2.5, "1/1e9"),
        (8 * 3.0, 3.0, "bits vs bytes"),
        (4096, 4, "1024 times"),
    ],
)
def test_a_units_factor_is_named_with_the_slips_that_leave_it(
    mine: float, theirs: float, said: str
) -> None:
    words = factor_words(mine, theirs)
    assert words is not None and said in words and words.endswith("?")


def test_numbers_not_a_units_factor_apart_get_no_factor() -> None:
    assert factor_words(3.0, 1.0) is None
    assert factor_words(1000.5, 1.0) is None
    assert factor_words(0.0, 1.0) is None
    assert number_words(5, 5) is None
    assert number_words(True, 0) is None  # a bool is no count


def test_an_integer_one_away_is_off_by_one_and_a_float_one_away_is_not() -> None:
    assert "one more" in (number_words(5, 4) or "")
    assert "one less" in (number_words(3, 4) or "")
    assert number_words(5.0, 4.0) is None


def test_an_entry_put_at_the_back_where_the_reference_puts_it_at_the_front() -> None:
    before = {"waiting": [2]}
    said = _diff(before, {"waiting": [2, 1]}, {"waiting": [1, 2]})
    assert said == "yours put 1 at the back of `waiting`; the reference puts it at the front"
    said = _diff(before, {"waiting": [1, 2, 3]}, {"waiting": [2, 3, 1]})
    assert said is not None and "at the front of `waiting`" in said


def test_an_entry_left_in_removed_from_or_added_to_a_collection() -> None:
    before = {"pins": {"a": 1}, "keys": ["a", "b"]}
    left = _diff(before, before, {"pins": {}, "keys": ["a", "b"]})
    assert left == "yours left 'a' in `pins`; the reference removes it"
    removed = _diff(before, {"pins": {"a": 1}, "keys": ["b"]}, before)
    assert removed == "yours removed 'a' from `keys`; the reference keeps it"
    added = _diff(before, {"pins": {"a": 1}, "keys": ["a", "b", "c"]}, before)
    assert added == "yours added 'c' to `keys`; the reference does not"


def test_an_entry_in_one_list_where_the_reference_puts_it_in_another() -> None:
    before = {"out.finished": [], "out.preempted": []}
    said = _diff(
        before,
        {"out.finished": [1], "out.preempted": []},
        {"out.finished": [], "out.preempted": [1]},
    )
    assert said == "yours put 1 in `out.finished` where the reference puts it in `out.preempted`"


def test_a_dict_key_and_a_list_entry_that_look_alike_are_not_a_move() -> None:
    # sequence 2's table and block 2 on the free list are different things
    before = {"tables": {2: [2]}, "free": []}
    said = _diff(before, before, {"tables": {}, "free": [2]})
    assert said is not None and "where the reference puts it" not in said


def test_a_counter_moved_twice_as_far_says_the_arithmetic_without_a_copy_to_prove_why() -> None:
    # a step of 2 written as such is as likely as a change made twice: no cause without proof
    said = _diff({"evictions": 3}, {"evictions": 5}, {"evictions": 4})
    assert said == "yours moved `evictions` from 3 to 5, the reference to 4: twice as far"
    once = _diff({"used": 10}, {"used": 10}, {"used": 40})
    assert once == "yours left `used` at 10; the reference changes it to 40"


def test_the_wrong_field_is_a_question() -> None:
    before = {"pins": {"a": 1}, "refs": {}}
    said = _diff(before, {"pins": {"a": 1}, "refs": {"a": 1}}, {"pins": {}, "refs": {}})
    assert said == "yours changed `refs` where the reference changes `pins`: the wrong field?"


def test_a_result_a_units_factor_apart_and_a_result_that_is_only_different() -> None:
    same = {"used": 1}
    said = _diff(same, same, same, ("returned 4000", "returned 4"))
    assert said is not None and "1000 times" in said
    assert _diff(same, same, same, ("returned 7", "returned 4")) is None


def test_a_call_whose_fields_and_results_agree_has_no_kind() -> None:
    same = {"keys": ["a"], "used": 3}
    assert _diff(same, same, same, ("returned 1", "returned 1")) is None


def test_a_count_moved_the_other_way_and_a_pin_counted_twice_from_absent() -> None:
    said = _diff({"used": 10}, {"used": 5}, {"used": 15})
    assert said is not None and "the other way" in said
    twice = _diff({"pins": {}}, {"pins": {"a": 2}}, {"pins": {"a": 1}})
    assert twice is not None and "from 0 to 2" in twice and "twice as far" in twice
    assert "counted twice" not in twice


def test_the_same_changes_with_another_answer_say_the_work_is_right() -> None:
    same = {"keys": ["a"]}
    said = _diff(same, same, same, ("returned False", "returned True"))
    assert said is not None and "returned False, not True" in said
    moved = _diff(same, {"keys": []}, same, ("returned False", "returned True"))
    assert moved is None or "the work is right" not in moved


def test_a_result_block_size_times_off_is_blocks_for_tokens_once_a_second_state_agrees() -> None:
    class Manager:
        block_size = 4

    same = {"tables": {}}
    d = Difference(
        "allocate",
        "",
        (),
        same,
        same,
        same,
        "returned 2",
        "returned 8",
        Manager(),
        second=lambda: (1, 4, 4),
    )
    said = kind_reading(d)
    assert said is not None and "block_size (4)" in said and "tokens where blocks" in said
    assert number_words(2, 8) is None  # without a block size, 4x is no kind
    # one state alone: two numbers a block size apart, and no cause said
    alone = Difference("allocate", "", (), same, same, same, "returned 2", "returned 8", Manager())
    assert kind_reading(alone) == "yours returned 2, the reference 8"


def test_a_list_yours_left_as_it_was_is_read_by_what_the_reference_does_to_it() -> None:
    # the call moved 'b', so the reading names 'b' and the end it went to, not 'a'
    before = {"keys": ["b", "a"]}
    said = _diff(before, before, {"keys": ["a", "b"]})
    assert (
        said
        == "yours left `keys` as it was (['b', 'a']); the reference moves 'b' to the back of `keys`"
    )
    said = _diff({"keys": ["a", "b"]}, {"keys": ["a", "b"]}, {"keys": ["b", "a"]})
    assert said is not None and "moves 'a' to the back" in said
    said = _diff({"keys": ["a", "b", "c"]}, {"keys": ["a", "b", "c"]}, {"keys": ["c", "a", "b"]})
    assert said is not None and "moves 'c' to the front of `keys`" in said
    said = _diff({"hashed": [3]}, {"hashed": [3]}, {"hashed": [3, 7]})
    assert said == "yours left `hashed` as it was ([3]); the reference adds 7 to `hashed`"
    said = _diff({"keys": ["a", "b"]}, {"keys": ["a", "b"]}, {"keys": ["b"]})
    assert said == "yours left `keys` as it was (['a', 'b']); the reference removes 'a' from `keys`"


def test_of_two_readings_of_a_move_the_one_that_moves_the_calls_argument_is_said() -> None:
    before = {"keys": ["a", "b"]}
    d = Difference("get", "", ("b",), before, before, {"keys": ["b", "a"]}, "", "", None)
    said = kind_reading(d)
    assert said is not None and "moves 'b' to the front of `keys`" in said


def test_a_new_entry_put_at_the_other_end_is_the_one_said() -> None:
    # two entries that swap ends read both ways: the one the call added is the one it moved
    said = _diff({"running": ["A"]}, {"running": ["N", "A"]}, {"running": ["A", "N"]})
    assert said == ("yours put 'N' at the front of `running`; the reference puts it at the back")
    said = _diff({"running": ["A"]}, {"running": ["A", "N"]}, {"running": ["N", "A"]})
    assert said == "yours put 'N' at the back of `running`; the reference puts it at the front"
    both = _diff({"running": []}, {"running": ["B", "A"]}, {"running": ["A", "B"]})
    assert both == (
        "yours left the same entries in `running` in another order (['B', 'A'], not ['A', 'B'])"
    )
    three = _diff({"running": []}, {"running": ["C", "B", "A"]}, {"running": ["A", "B", "C"]})
    assert three == "yours left `running` in the reverse of the reference's order"


def test_an_entry_is_not_read_as_moved_between_a_steps_output_and_the_state() -> None:
    # a step's output lists sequence ids; the block manager's free list, block ids: a 1 in
    # each is not the same thing
    before = {"free": [0, 1], "out.decodes": []}
    said = _diff(before, {"free": [0], "out.decodes": [1]}, {"free": [0, 1], "out.decodes": []})
    assert said is None or "where the reference puts it in" not in said
    moved = _diff(
        {"out.preempted": [], "out.finished": []},
        {"out.preempted": [], "out.finished": [3]},
        {"out.preempted": [3], "out.finished": []},
    )
    assert moved == "yours put 3 in `out.finished` where the reference puts it in `out.preempted`"


class _Tally:
    """A count kept by a method and, in the slip, by the one it calls too."""

    def __init__(self) -> None:
        self.used = 5

    def _drop(self, n: int) -> None:
        self.used -= n

    def remove(self, n: int) -> None:
        self.used -= n  # the slip: _drop subtracts it again
        self._drop(n)

    def remove_two(self, n: int) -> None:
        self.used -= 2 * n  # twice as far, in one line: no method of it counts again

    def remove_each(self, n: int) -> None:
        self.used -= n  # the slip again, with _drop reached from a list comprehension
        [self._drop(1) for _ in range(n)]


def _tally_diff(method: str, fields: Any = lambda obj: {"used": obj.used}) -> Any:
    d = Difference(
        method, "", (1,), {"used": 5}, {"used": 3}, {"used": 4}, "", "", _Tally(), fields=fields
    )
    return kind_reading(d)


def test_a_change_made_again_by_a_method_the_call_reaches_is_counted_twice() -> None:
    said = _tally_diff("remove")
    assert said == (
        "yours moved `used` from 5 to 3, the reference to 4: counted twice, once in this "
        "method's own lines and again in `_drop`, which it calls"
    )


def test_a_second_count_through_a_comprehension_names_the_method_it_reaches() -> None:
    said = _tally_diff("remove_each")
    assert said is not None and "again in `_drop`, which it calls" in said, said
    assert "<listcomp>" not in said


def test_twice_as_far_in_the_method_alone_or_unreadable_names_no_second_count() -> None:
    assert (
        _tally_diff("remove_two")
        == "yours moved `used` from 5 to 3, the reference to 4: twice as far"
    )
    # without the topic's fields the copy cannot be read: the arithmetic only
    assert _tally_diff("remove", None).endswith(": twice as far")


def test_a_graded_remove_that_subtracts_before_its_discard_gets_counted_twice() -> None:
    hint = _graded_hint("kv-offload", _RemoveSubtractsTwice, 2)
    assert "counted twice, once in this method's own lines and again in `_discard`" in hint


def test_a_graded_fork_that_adds_two_gets_the_arithmetic_and_no_second_count() -> None:
    hint = _graded_hint("block-manager", _ForkRefsTwo, 3)
    assert "leaves it at 3, 4, 5 or 6, where one more holder makes it 2, 3, 4 or 5" in hint
    assert "counted twice" not in hint


def _graded_hint(topic: str, impl: Any, step: int) -> str:
    from buggy_impls import failing_report

    report, _ = failing_report(topic, impl, step)
    return report.hint


_KV2 = checkpoint("kv-offload", 2)
_BM3 = checkpoint("block-manager", 3)


class _RemoveSubtractsTwice(_KV2):  # type: ignore[misc, valid-type]
    """remove subtracts the size, then calls _discard, which subtracts it again."""

    def remove(self, key: Any) -> None:
        self._resident(key, "remove")
        if not self.can_evict(key):
            raise ChunkInUse(f"{key!r} is in use")
        self._used -= self._sizes[key]
        self._discard(key)


class _ForkRefsTwo(_BM3):  # type: ignore[misc, valid-type]
    """fork adds 2 to each shared block's refcount, in its own loop: no call counts again."""

    def fork(self, parent: Any, child: Any) -> None:
        for block in self.tables[parent]:
            self.ref[block] += 2
        self.tables[child] = list(self.tables[parent])
        self.lens[child] = self.lens[parent]


def test_a_field_whose_reading_raised_has_no_entries_to_compare() -> None:
    before = {"order": ["a", "b"]}
    said = _diff(before, {"order": ("unreadable", "KeyError")}, {"order": ["b", "a"]})
    assert said is None or "'unreadable'" not in said
