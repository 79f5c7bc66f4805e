"""A check that stops on what the learner's code gave it is told as a failed check with its
program, not as the learner's crash; a None where a collection belongs is said as such."""

from __future__ import annotations

import pytest

import servelab
from servelab.grading import GradeFailure
from servelab.grading.check_side import check_stopped
from servelab.grading.readings.difference import Difference, returned_none, unreadable

LookupBlocks = servelab.checkpoint("prefix-cache", 1)


class LookupNoneWhenNoHit(LookupBlocks):  # type: ignore[misc, valid-type]
    """A lookup that answers None, not an empty list, when nothing hits."""

    def _lookup(self, tokens):  # type: ignore[no-untyped-def]
        return super()._lookup(tokens) or None


class LookupRaisesItself(LookupBlocks):  # type: ignore[misc, valid-type]
    """A lookup that iterates None itself when nothing is cached under the first hash."""

    def _lookup(self, tokens):  # type: ignore[no-untyped-def]
        hits = super()._lookup(tokens) or None
        return [block for block in hits]


def _report(cls: type, step: int) -> str:
    with pytest.raises(GradeFailure) as failure:
        servelab.grade("prefix-cache", cls, step, quiet=True)
    return str(failure.value)


def test_a_check_that_cannot_read_a_none_shows_the_program_and_the_place() -> None:
    report = _report(LookupNoneWhenNoHit, 1)
    assert "the check could not read what the last line under reproduce: gave back" in report
    assert "TypeError: 'NoneType' object is not iterable" in report
    reproduce = report.split("reproduce:\n", 1)[1].split("    where:", 1)[0]
    assert reproduce.strip().splitlines()[-1].strip() == "bm._lookup([7, 7, 7])"
    assert "where: the difference starts in your `_lookup`" in report
    assert "yours returned None where the reference returns []" in report
    # the exception type's guessed cause is not the hint: the place and the None are
    assert "often None returned by a method that forgot to return" not in report


def test_the_learners_own_error_is_still_told_as_theirs() -> None:
    report = _report(LookupRaisesItself, 1)
    assert "the check could not read" not in report
    assert "TypeError" in report
    assert "[block for block in hits]" in report  # the learner's line that raised


def test_only_an_error_of_the_checks_own_code_is_turned() -> None:
    assert check_stopped(AssertionError("a rule")) is None
    try:
        [].pop()
    except IndexError as exc:  # raised here, in a test: no probe's script in progress
        assert check_stopped(exc) is None


def _returned(mine: str, theirs: str, changed: bool = False) -> Difference:
    after = {"free": [1]} if changed else {"free": [0]}
    return Difference(
        "_lookup", "", ([7],), {"free": [0]}, after, {"free": [0]}, mine, theirs, None
    )


def test_a_none_is_named_only_where_the_reference_returns_a_collection() -> None:
    assert "returned None where the reference returns []" in str(
        returned_none(_returned("returned None", "returned []"))
    )
    assert returned_none(_returned("returned None", "returned 'a'")) is None  # a None on purpose
    assert returned_none(_returned("returned None", "returned None")) is None
    assert returned_none(_returned("returned None", "returned []", changed=True)) is None
    assert returned_none(_returned("returned ()", "returned []")) is None


DecodingScheduler = servelab.checkpoint("scheduler", 2)


class RetireLeavesATuple(DecodingScheduler):  # type: ignore[misc, valid-type]
    """A retire that keeps the sequences still running as a tuple: admit's append fails later."""

    def retire(self, out):  # type: ignore[no-untyped-def]
        keep = []
        for seq in self.running:
            if seq.is_finished:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
            else:
                keep.append(seq)
        self.running = tuple(keep)


def test_an_error_in_the_class_built_on_is_told_after_the_graft_place_without_a_cause() -> None:
    with pytest.raises(GradeFailure) as failure:
        servelab.grade("scheduler", RetireLeavesATuple, 2, quiet=True)
    report = str(failure.value)
    assert "where: the difference is in your `retire`" in report
    hint = report.split("hint: ", 1)[1]
    assert hint.startswith("start at your `retire` (see where:)")
    assert "raised AttributeError: 'tuple' object has no attribute 'append'" in hint
    assert "a typo" not in hint  # the type's usual cause speaks of a line that is not theirs


Scheduler = servelab.checkpoint("scheduler", 3)


class PreemptRequeuesTheId(Scheduler):  # type: ignore[misc, valid-type]
    """A preempt that puts the victim's id, not the sequence, back on waiting."""

    def preempt(self, victim, out):  # type: ignore[no-untyped-def]
        self.bm.free_seq(victim.seq_id)
        self.waiting.appendleft(victim.seq_id)
        out.preempted.append(victim)


def test_a_field_that_cannot_be_read_is_said_so_not_read_as_an_entry() -> None:
    with pytest.raises(GradeFailure) as failure:
        servelab.grade("scheduler", PreemptRequeuesTheId, 3, quiet=True)
    report = str(failure.value)
    assert "where: the difference starts in your `preempt`" in report
    hint = report.split("hint: ", 1)[1]
    assert "reading your `waiting` raised AttributeError, where the reference's reads [" in hint
    assert "unreadable" not in hint  # the marker is not a value of the learner's


def test_a_field_unreadable_on_the_references_side_is_not_read_as_a_missing_entry() -> None:
    from servelab.grading.observe import Unreadable

    d = Difference(
        "pin",
        "",
        ("b",),
        {"eviction order": ["a", "b"]},
        {"eviction order": ["a", "b"]},
        {"eviction order": Unreadable(KeyError("b"))},
        "returned None",
        "returned None",
        None,
    )
    said = str(returned_none(d) or "") + str(unreadable(d))
    assert "reading `eviction order` raised KeyError; after yours it reads ['a', 'b']" in said
    assert "removes" not in said
