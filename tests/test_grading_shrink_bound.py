"""The grader bounds shrinking by a count of programs, on the Hypothesis installed here.

``servelab.grading._programs`` swaps two private names of Hypothesis's engine for the length
of a state-machine check: the ``time`` module it reads ``perf_counter`` from, and
``MAX_SHRINKING_SECONDS``. Its clock then counts programs instead of seconds. If a Hypothesis
release renames either, the swap is skipped with a logged warning and shrinking falls back to
five minutes of wall time; these tests are what notices.
"""

from __future__ import annotations

import time
import types
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import engine
from hypothesis.stateful import invariant, rule, run_state_machine_as_test

from servelab.grading._programs import shrinking_bounded_by_count as _shrinking_bounded_by_count
from servelab.testing.core import RecordingMachine, without_local_constants


def _names_read(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names_read(const)


def test_the_engine_names_it_patches_exist_and_are_read() -> None:
    assert engine.time is time
    assert type(engine.MAX_SHRINKING_SECONDS) is int
    read: set[str] = set()
    for member in vars(engine.ConjectureRunner).values():
        if isinstance(member, types.FunctionType):
            read.update(_names_read(member.__code__))
    # the deadline is set from MAX_SHRINKING_SECONDS and compared with time.perf_counter()
    assert {"MAX_SHRINKING_SECONDS", "time", "perf_counter", "finish_shrinking_deadline"} <= read


def test_the_patch_is_applied_inside_and_undone_after() -> None:
    with _shrinking_bounded_by_count(7):
        assert engine.MAX_SHRINKING_SECONDS == 7
        assert engine.time is not time
        before = engine.time.perf_counter()
        _LongShrink()  # one more program started: one more tick of the clock
        assert engine.time.perf_counter() == before + 1
        assert engine.time.monotonic is time.monotonic  # the rest of ``time`` is the real one
    assert engine.time is time
    assert engine.MAX_SHRINKING_SECONDS != 7


class _LongShrink(RecordingMachine):
    """Fails once six values add up to more than 2,500: shrinking that takes ~300 programs."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[int] = []

    @rule(x=st.integers(0, 1000))
    def add(self, x: int) -> None:
        self.values.append(x)

    @invariant()
    def small(self) -> None:
        assert not (len(self.values) >= 6 and sum(self.values) > 2500)


def _programs_run(phases: tuple[Phase, ...], bound: int | None = None) -> int:
    """Programs a derandomized check of ``_LongShrink`` runs (it must fail)."""
    chosen = settings(
        max_examples=200,
        stateful_step_count=30,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        phases=phases,
        suppress_health_check=list(HealthCheck),
    )
    before = RecordingMachine.programs_started
    try:
        with without_local_constants():
            if bound is None:
                run_state_machine_as_test(_LongShrink, settings=chosen)
            else:
                with _shrinking_bounded_by_count(bound):
                    run_state_machine_as_test(_LongShrink, settings=chosen)
    except AssertionError:
        return RecordingMachine.programs_started - before
    raise AssertionError("the check was meant to fail")


def test_shrinking_runs_at_most_the_bound_and_more_when_it_is_raised() -> None:
    generate = (Phase.explicit, Phase.generate)
    found = _programs_run(generate)  # derandomized: the shrink phase starts from the same place
    small, large = 20, 100
    shrunk_small = _programs_run((*generate, Phase.shrink), small) - found
    shrunk_large = _programs_run((*generate, Phase.shrink), large) - found
    # the bound, plus the program Hypothesis replays to report the failure
    assert small <= shrunk_small <= small + 2
    # a raised bound lets shrinking go on: the small one was what stopped it
    assert large <= shrunk_large <= large + 2


def test_a_hypothesis_without_those_names_is_left_alone_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delattr(engine, "MAX_SHRINKING_SECONDS")
    logged = caplog.at_level("WARNING", logger="servelab.grading._programs")
    with logged, _shrinking_bounded_by_count(7):
        assert engine.time is time
    assert "has no MAX_SHRINKING_SECONDS" in caplog.text
    assert engine.time is time
