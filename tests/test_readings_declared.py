"""A reading is shown only on the difference it was written for (:class:`WrittenFor`).

Each pair below grades two real mistakes end to end: a catalogue mistake, left out of the
catalogue as for a mistake nobody listed, whose first diverging call is the difference the
reading was written for (the reading is shown), and a slip of ``tests/unlisted/`` whose call
reaches the same branch with another difference: another outcome pair, a field the reading
does not explain, or the other direction (the reading is not shown).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from buggy_impls import failing_report, shown_hint
from servelab.grading import load_topic
from servelab.grading.diagnose import HOOKS
from servelab.grading.mistakes import mistakes
from servelab.grading.readings import Difference
from servelab.grading.readings.difference import (
    BOTH_RAISED,
    MINE_RAISED,
    RESULT,
    SAME,
    THEIRS_RAISED,
    VALUE,
    WrittenFor,
)
from unlisted import unlisted

UNLISTED = {u.name: u for u in unlisted()}


def _left_out_hint(topic: str, name: str) -> str:
    """The hint for catalogue mistake ``name`` with it left out of the catalogue."""
    m = next(x for x in mistakes(topic) if x.name == name)
    undiagnosed = replace(load_topic(topic), diagnose=lambda program, impl: None)
    report, program = failing_report(undiagnosed, m.impl)
    others = [x for x in mistakes(topic) if x.name != name]
    return shown_hint(HOOKS[topic].explain(program, m.impl, None, others), report)


# (topic, catalogue mistake the reading was written for, unlisted slip it was not, the reading)
PAIRS = [
    ("weight-cache", "evict_forgets_used", "evict subtracts the size twice", "from `used`"),
    (
        "weight-cache",
        "evict_forgets_used",
        "evict forgets pins with a failing lookup",
        "from `used`",
    ),
    (
        "weight-cache",
        "evicted_bytes_not_counted",
        "eviction of the oldest counted twice",
        "count every eviction",
    ),
    ("eviction-policy", "lfu_ignores_pins", "LFU pin resets the count", "a pinned key is not a"),
    (
        "eviction-policy",
        "sieve_len_counts_pinned",
        "SIEVE len one short",
        "a pinned key is not one until update_on_unpin",
    ),
    ("eviction-policy", "sieve_hand_backwards", "SIEVE pop returns None", "the hand moves from"),
    (
        "eviction-policy",
        "sieve_insert_at_hand",
        "SIEVE put resets the hand",
        "joins the newest end",
    ),
    ("block-manager", "allocate_zero_takes_block", "allocate of zero tokens raises", "no block"),
    ("block-manager", "fork_child_empty", "fork zeroes the parent's length", "the child starts"),
    (
        "prefix-cache",
        "release_cached_to_free",
        "release parks a held block",
        "freed by its last holder",
    ),
]


@pytest.mark.parametrize(("topic", "written_for", "other", "reading"), PAIRS)
def test_a_reading_is_shown_on_its_difference_and_on_no_other(
    topic: str, written_for: str, other: str, reading: str
) -> None:
    assert reading in _left_out_hint(topic, written_for)
    u = UNLISTED[other]
    report, _ = failing_report(u.topic, u.impl, u.step)
    assert "where: the difference starts" in report.text  # the same method, another difference
    assert reading not in report.hint, report.hint


def test_an_eviction_that_takes_too_much_names_the_victim_s_size() -> None:
    u = UNLISTED["evict subtracts the size twice"]
    report, _ = failing_report(u.topic, u.impl, u.step)
    assert "yours took 40 bytes off `used` for 'a', which holds 20" in report.hint


# --- the declaration itself ---------------------------------------------------------------


def _d(mine: tuple[str, dict[str, Any]], theirs: tuple[str, dict[str, Any]]) -> Difference:
    return Difference("m", "", (), {}, mine[1], theirs[1], mine[0], theirs[0], None)


def test_the_outcome_pair_is_one_of_five() -> None:
    assert _d(("returned 1", {}), ("returned 1", {})).outcome_pair == SAME
    assert _d(("returned 1", {}), ("returned 2", {})).outcome_pair == VALUE
    assert _d(("raised KeyError", {}), ("returned 2", {})).outcome_pair == MINE_RAISED
    assert _d(("returned None", {}), ("raised NoVictim", {})).outcome_pair == THEIRS_RAISED
    assert _d(("raised KeyError", {}), ("raised KeyError", {})).outcome_pair == BOTH_RAISED


def test_a_reading_fits_only_its_outcome_pairs() -> None:
    same = _d(("returned None", {"used": 2}), ("returned None", {"used": 1}))
    raised = _d(("raised KeyError", {"used": 2}), ("returned None", {"used": 1}))
    written = WrittenFor((SAME,), ("used",))
    assert written.show(same, "text") == "text"
    assert written.show(raised, "text") is None


def test_every_field_that_differs_must_be_explained() -> None:
    d = _d(("returned None", {"used": 2, "keys": ["a"]}), ("returned None", {"used": 1}))
    assert not WrittenFor((SAME,), ("used",)).fits(d)
    assert WrittenFor((SAME,), ("used", "keys")).fits(d)


@pytest.mark.parametrize(
    ("mine", "theirs", "way"),
    [
        (3, 1, 1),
        (1, 3, -1),
        ({"a": 2, "b": 1}, {"a": 1, "b": 1}, 1),
        ({"a": 2}, {"a": 1, "b": 1}, None),  # one key each way: no one direction
        ({}, {"a": 1}, -1),  # an absent key counts 0
        ([1, 2, 3], [1], 1),
        ([1, 2], [2, 1], None),  # the same entries in another order
    ],
)
def test_a_direction_is_read_from_numbers_mappings_and_sizes(
    mine: Any, theirs: Any, way: int | None
) -> None:
    d = _d(("returned None", {"f": mine}), ("returned None", {"f": theirs}))
    assert WrittenFor((SAME,), above=("f",)).fits(d) is (way == 1)
    assert WrittenFor((SAME,), below=("f",)).fits(d) is (way == -1)


def test_a_result_has_a_direction_when_both_are_numbers() -> None:
    more = _d(("returned 3", {}), ("returned 2", {}))
    other = _d(("returned 'a'", {}), ("returned 'b'", {}))
    assert WrittenFor((VALUE,), above=(RESULT,)).fits(more)
    assert not WrittenFor((VALUE,), below=(RESULT,)).fits(more)
    assert not WrittenFor((VALUE,), above=(RESULT,)).fits(other)
