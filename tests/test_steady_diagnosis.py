"""A diagnosis reads the same on a loaded machine as on an idle one.

The hang guard counts a body's CPU time and its own wall time: time it spent ready to run
while the machine ran other work is not its own. Only a last-resort cap of wall-clock time
ends it regardless, and a report whose diagnosis that cap cut says so.

A loaded machine is simulated: the kernel's count of time spent waiting for a CPU is replaced
by one that says every second of wall time so far was spent waiting (a machine so busy the
grade never got a CPU), and the wall-time limits are made tiny, so that without the waiting
left out they would fire at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from servelab.grading import GradeFailure, grade, steady
from servelab.grading.mistakes import mistakes
from servelab.testing import core
from servelab.testing.core import ImplementationHung, WallClockCapped, hang_guard

#: A catalogued mistake whose report claims certainty, proved by replaying programs.
CERTAIN = next(m for m in mistakes("weight-cache") if m.name == "count_based")


def _report() -> str:
    with pytest.raises(GradeFailure) as failed:
        grade("weight-cache", CERTAIN.impl, quiet=True)
    return str(failed.value)


@pytest.fixture
def starved(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every second of wall time, from now on, was spent waiting for a CPU."""
    monkeypatch.setattr(core, "waiting_s", time.perf_counter)
    yield


def _nap(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        time.sleep(0.01)


def test_a_sleeping_body_is_still_stopped_by_its_own_wall_time() -> None:
    with pytest.raises(ImplementationHung) as hung, hang_guard("nap()", 0.02, wall_cap=5.0):
        _nap(2.0)
    assert not isinstance(hung.value, WallClockCapped)


def test_time_spent_waiting_for_a_cpu_is_not_the_bodys(starved: None) -> None:
    with hang_guard("nap()", 0.02, wall_cap=5.0):  # 0.1 s of its own wall time
        _nap(0.4)


def test_the_wall_clock_cap_stops_a_starved_body_and_says_so(starved: None) -> None:
    with pytest.raises(WallClockCapped) as capped, hang_guard("nap()", 0.02, wall_cap=0.2):
        _nap(5.0)
    assert "0.2 s of wall-clock time" in str(capped.value)
    assert "too busy" in str(capped.value)


def test_a_certainty_claim_reads_the_same_when_the_wall_clock_races(
    starved: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.undo()  # the idle machine first
    idle = _report()
    assert "behaves exactly like" in idle
    monkeypatch.setattr(core, "waiting_s", time.perf_counter)
    monkeypatch.setattr(core, "WALL_FACTOR", 1e-4)  # each wall limit fires within a millisecond
    assert _report() == idle


def test_a_diagnosis_cut_by_the_wall_clock_cap_says_so_plainly(
    starved: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(steady, "DIAGNOSE_WALL_CAP_S", 1e-3)
    report = _report()
    assert "behaves exactly like" not in report
    assert "too busy to finish diagnosing this failure within 0.001 s of wall-clock time" in report
    assert "grade again when the machine is less busy" in report


class _Slow(CERTAIN.impl):  # type: ignore[misc, name-defined]
    def put(self, *args: Any) -> Any:
        time.sleep(0.01)  # on a starved machine: all of it spent waiting for a CPU
        return super().put(*args)


def test_a_check_stopped_by_the_cap_is_no_hang_of_the_learners(
    starved: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core, "WALL_CAP_MIN_S", 0.0)
    monkeypatch.setattr(core, "WALL_CAP_FACTOR", 1e-3)  # a check's cap: 3 ms
    with pytest.raises(GradeFailure) as failed:
        grade("weight-cache", _Slow, quiet=True)
    lines = str(failed.value).splitlines()
    assert lines[2] == (
        "      `cache.put('a', '<a weights>', 10)` was stopped after 0.003 s of wall-clock time, "
        "its own time not spent: the machine was too busy to finish it"
    )
    assert lines[-2] == f"    hint: {steady.BUSY_HINT}"
    assert "did not return" not in "\n".join(lines) and "never returned" not in "\n".join(lines)
