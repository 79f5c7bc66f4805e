"""A mistake that its own step's grade catches never passes the grade of every step.

The catalogue is built on the last checkpoint, so tests/test_catalogue.py grades it on every
step as it is; a mistake nobody listed is put on the classes of the step that meets it, so
here each is carried through the last step first (:func:`unlisted.carried`), as a learner who
keeps the slip finishes the course.
"""

from __future__ import annotations

import io

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade, load_topic, topics
from servelab.grading.mistakes import correct_impl
from unlisted import Unlisted, carried, unlisted

TOPIC = "kv-offload"
CARRIED = [u for u in unlisted() if carried(u) is not u.impl]


def _failure(impl: object, step: int | None = None, topic: str = TOPIC) -> list[str]:
    """The report's lines from its first failing check on."""
    with pytest.raises(GradeFailure) as failure:
        grade(topic, impl, step, out=io.StringIO(), quiet=True)
    lines = failure.value.report.lines
    return lines[next(i for i, line in enumerate(lines) if "✗" in line) :]


def _promotion_slip() -> Unlisted:
    return next(u for u in unlisted() if u.name == "retrieve never promotes")


def test_carrying_rebuilds_the_slip_on_the_last_checkpoint() -> None:
    u = _promotion_slip()
    mine = carried(u)
    last = checkpoint(TOPIC, 4)
    assert set(mine) == set(last) and mine["Tier"] is last["Tier"]
    assert issubclass(mine["Hierarchy"], last["Hierarchy"])
    assert mine["Hierarchy"].retrieve.__code__ is u.impl["Hierarchy"].retrieve.__code__
    assert mine["Hierarchy"].__name__ == "RetrieveWithoutPromotion"
    assert len(CARRIED) > 30  # the slips of the early steps, in every topic that has them


@pytest.mark.parametrize("u", CARRIED, ids=[f"{u.topic}/{u.name}" for u in CARRIED])
def test_an_unlisted_mistake_carried_through_the_last_step_fails_the_grade_of_every_step(
    u: Unlisted,
) -> None:
    assert _failure(carried(u), topic=u.topic)


def test_the_promotion_slip_fails_every_step_as_its_own_step_reports_it() -> None:
    # The last machine checks step 3's rules among the cost model's, in fewer programs: alone it
    # let a retrieve that never promotes a disk hit pass. The grade of every step runs step 3's
    # checks too (its probe of a release after a promotion now meets it before its machine),
    # so it fails there, with step 3's own report.
    u = _promotion_slip()
    everything = _failure(carried(u))
    assert everything[0] == "  ✗ step 3 · a release drops its own pins"
    assert "promotes a chunk found below" in everything[-2]
    assert everything == _failure(u.impl, step=3)


def test_a_tier_slip_of_step_1_fails_every_step_at_a_step_1_probe() -> None:
    # no rule of the last machine drives a tier alone: a wrong count returned passed it; step 1's
    # machine met it by chance, step 1's probe of the counts past one meets it every time
    u = next(x for x in unlisted() if x.name == "ref returns the transfers only")
    assert _failure(carried(u))[0] == "  ✗ step 1 · each count call returns the count"


def test_the_grade_of_every_step_runs_the_earlier_machines_and_a_step_grade_does_not() -> None:
    correct = correct_impl(TOPIC)
    every = grade(TOPIC, correct, out=io.StringIO(), quiet=True).lines
    machines = [line.split(":")[0].strip() for line in every if "state machine:" in line]
    assert machines == [f"✓ step {n} · state machine" for n in (4, 1, 2, 3)]  # the last first
    assert sum("invariants:" in line for line in every) == 1  # the last machine's rules only
    last = grade(TOPIC, correct, 4, out=io.StringIO(), quiet=True).lines
    # the last step alone runs step 3's machine too: every rule of it is one the last lists
    assert [line for line in last if "state machine:" in line] == [
        line for line in every if any(f"step {n} · state machine:" in line for n in (4, 3))
    ]
    third = grade(TOPIC, correct, 3, out=io.StringIO(), quiet=True).lines
    assert [line.split(":")[0].strip() for line in third if "state machine:" in line] == [
        "✓ step 3 · state machine"  # steps 1 and 2 have rules step 3's machine does not list
    ]


def test_the_promotion_slip_carried_to_the_last_step_fails_the_last_steps_grade() -> None:
    # the last machine lists step 3's rules, but checks them in programs shared with the cost
    # model's calls: alone it passed a retrieve that never promotes
    u = _promotion_slip()
    assert _failure(carried(u), step=4) == _failure(u.impl, step=3)


@pytest.mark.parametrize("topic", topics())
def test_an_earlier_machine_with_rules_the_last_does_not_check_runs_in_the_grade_of_every_step(
    topic: str,
) -> None:
    machines = [s.machine for s in load_topic(topic).steps if s.machine is not None]
    for machine in machines[:-1]:
        if not set(machine.invariants) <= set(machines[-1].invariants):
            assert machine.in_final_grade, (topic, machine.name)
