"""The grading engine itself: what a grade cell shows, whatever the learner's code does.

The learner's code here is notebook 01's own cells
(``solutions/01_weight_cache_solution.ipynb``, found by cell id), run in a module that stands in
for the notebook's ``__main__``, plus small edits of them that make one mistake each.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib.util
import io
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import nbformat
import pytest

from servelab.grading import (
    GradeFailure,
    GradeInterrupted,
    MachineCheck,
    Probe,
    Step,
    StepNotWritten,
    Topic,
    grade,
    load_topic,
)
from servelab.grading.core import PROBE_TIMEOUT_S
from servelab.testing.bounded import bounded_str
from servelab.testing.core import ImplementationHung, hang_guard

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "weight-cache"
STEP_CELLS = {1: "c07", 2: "c11", 3: "c18", 4: "c22", 5: "c31"}  # cell ids of the step classes
SKELETON_CELLS = ("c01", "c03")
STEP_CLASS = {1: "SizedCache", 2: "EvictingCache", 3: "PinningCache", 4: "CheckedCache"}
STEP_CLASS[5] = "WeightCache"


def _clear_solution_regions(source: str) -> str:
    """The exercise's version of a cell, exactly as ``tools/notebooks.py`` writes it."""
    name = "servelab_tools_notebooks"
    tool = sys.modules.get(name)
    if tool is None:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "notebooks.py")
        assert spec is not None and spec.loader is not None
        tool = importlib.util.module_from_spec(spec)
        sys.modules[name] = tool
        spec.loader.exec_module(tool)
    cleared: str = tool.clear_solution_regions(source)
    return cleared


def _cells() -> dict[str, str]:
    notebook = nbformat.read(ROOT / "solutions" / "01_weight_cache_solution.ipynb", as_version=4)
    return {cell.id: cell.source for cell in notebook.cells}


CELLS = _cells()


@pytest.fixture
def main(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A fresh ``__main__`` (a notebook kernel) with the skeleton cells run."""
    module = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", module)
    for cell in SKELETON_CELLS:
        run_cell(module, CELLS[cell])
    return module


def run_cell(main: types.ModuleType, source: str) -> None:
    exec(compile(source, f"<cell {abs(hash(source))}>", "exec"), main.__dict__)


def run_steps(main: types.ModuleType, upto: int) -> None:
    for number in range(1, upto + 1):
        run_cell(main, CELLS[STEP_CELLS[number]])


def failure_of(topic: str | Topic, impl: Any, step: int | None = None) -> GradeFailure:
    with pytest.raises(GradeFailure) as failure:
        grade(topic, impl, step=step, out=io.StringIO())
    return failure.value


# --- §1: re-running a cell never changes a grade -------------------------------------------


def test_every_step_cell_run_twice_still_passes(main: types.ModuleType) -> None:
    for number in STEP_CELLS:
        run_cell(main, CELLS[STEP_CELLS[number]])
        run_cell(main, CELLS[STEP_CELLS[number]])
    report = grade(TOPIC, main.WeightCache, step=5, out=io.StringIO())
    assert report.passed


def test_a_stub_cell_then_its_filled_version_passes(main: types.ModuleType) -> None:
    run_steps(main, 1)
    stub = _clear_solution_regions(CELLS[STEP_CELLS[2]])
    assert "raise NotImplementedError()" in stub
    run_cell(main, stub)
    with pytest.raises(StepNotWritten):
        grade(TOPIC, main.EvictingCache, step=2, out=io.StringIO())
    run_cell(main, CELLS[STEP_CELLS[2]])
    assert grade(TOPIC, main.EvictingCache, step=2, out=io.StringIO()).passed


def test_a_class_naming_itself_as_parent_asks_for_the_previous_steps_class(
    main: types.ModuleType,
) -> None:
    run_steps(main, 5)
    wrong_parent = CELLS[STEP_CELLS[5]].replace(
        "class WeightCache(CheckedCache):", "class WeightCache(WeightCache):"
    )
    run_cell(main, wrong_parent)  # once: the learner named the class itself as its parent
    text = failure_of(TOPIC, main.WeightCache, step=5).report.text
    assert (
        "`WeightCache` names its own class as its parent (`class WeightCache(WeightCache)`):"
        in (text)
    )
    assert "hint: each step's class extends the previous step's: write `class WeightCache(" in text
    assert "write `class WeightCache(CheckedCache):` and run that cell again" in text
    assert "ran" not in text and "restart" not in text  # neither a re-run nor a restart
    assert "✓" not in text and "reproduce:" not in text  # not diagnosed as a mistake
    run_cell(main, CELLS[STEP_CELLS[5]])  # the advice, followed as written
    assert grade(TOPIC, main.WeightCache, step=5, out=io.StringIO()).passed


def test_a_class_naming_itself_as_parent_run_twice_says_so(main: types.ModuleType) -> None:
    run_steps(main, 2)
    wrong_parent = CELLS[STEP_CELLS[2]].replace(
        "class EvictingCache(SizedCache):", "class EvictingCache(EvictingCache):"
    )
    run_cell(main, wrong_parent)
    run_cell(main, wrong_parent)
    text = failure_of(TOPIC, main.EvictingCache, step=2).report.text
    assert "(`class EvictingCache(EvictingCache)`), and that cell ran 2 times:" in text
    assert "(EvictingCache → EvictingCache → EvictingCache → SizedCache → CacheSkeleton)" in text
    assert "write `class EvictingCache(SizedCache):` and run that cell again" in text
    run_cell(main, CELLS[STEP_CELLS[2]])
    assert grade(TOPIC, main.EvictingCache, step=2, out=io.StringIO()).passed


def test_a_parent_run_again_after_its_child_asks_to_run_the_cells_again(
    main: types.ModuleType,
) -> None:
    run_steps(main, 5)
    run_cell(main, CELLS[STEP_CELLS[4]])  # CheckedCache again; WeightCache extends the old one
    text = failure_of(TOPIC, main.WeightCache, step=5).report.text
    assert "extends an older `CheckedCache`" in text
    assert "run the cells from `CheckedCache` down to this grade cell again" in text
    run_cell(main, CELLS[STEP_CELLS[5]])
    assert grade(TOPIC, main.WeightCache, step=5, out=io.StringIO()).passed


# --- §2: a step not yet written says so, once ----------------------------------------------


def test_an_unwritten_step_says_so_in_one_line(main: types.ModuleType) -> None:
    run_steps(main, 2)
    run_cell(
        main,
        "class PinningCache(EvictingCache):\n"
        "    def pin(self, key):\n"
        "        # YOUR CODE HERE\n"
        "        raise NotImplementedError()\n",
    )
    out = io.StringIO()
    with pytest.raises(StepNotWritten) as failure:
        grade(TOPIC, main.PinningCache, step=3, out=out)
    assert isinstance(failure.value, NotImplementedError)
    assert out.getvalue().splitlines() == [
        "weight-cache · step 3 of 5: pinning, then refcounted pins for two replicas",
        "  ✓ step 1 · bytes, not a count (5 checks)",
        "  ✓ step 2 · the eviction loop (4 checks)",
        "  ✗ step 3: `pin` is not written yet",
        "NOT FINISHED",
    ]
    assert failure.value._render_traceback_() == [
        "StepNotWritten: weight-cache step 3 is not finished (see the report above)"
    ]


def test_a_method_left_as_a_stub_is_named_under_the_step_graded(main: types.ModuleType) -> None:
    run_steps(main, 2)
    run_cell(main, _clear_solution_regions(CELLS[STEP_CELLS[3]]))  # the whole step-3 stub
    with pytest.raises(StepNotWritten) as failure:
        grade(TOPIC, main.PinningCache, step=3, out=io.StringIO())
    # The stub's _next_victim breaks step 2's checks, but it is step 3's cell to write.
    assert failure.value.report.text.splitlines()[-2:] == [
        "  ✗ step 3: `_next_victim` is not written yet",
        "NOT FINISHED",
    ]


@pytest.fixture
def shell(main: types.ModuleType) -> Iterator[Any]:
    """An IPython shell whose user namespace is the notebook's ``__main__``."""
    interactive = pytest.importorskip("IPython.core.interactiveshell")
    instance = interactive.InteractiveShell.instance()
    saved = dict(instance.user_ns)
    instance.user_ns.update(main.__dict__)
    instance.user_ns["grade"] = grade
    yield instance
    instance.user_ns.clear()
    instance.user_ns.update(saved)


def test_in_ipython_a_failure_shows_the_report_once_and_no_grader_frames(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_cell(CELLS[STEP_CELLS[1]])
    shell.run_cell(
        "class EvictingCache(SizedCache):\n"
        "    def put(self, key, value, size):\n"
        "        super().put(key, value, size)  # never evicts\n"
    )
    capsys.readouterr()
    result = shell.run_cell('grade("weight-cache", EvictingCache, step=2)')
    shown = capsys.readouterr()
    assert isinstance(result.error_in_exec, GradeFailure)
    everything = shown.out + shown.err
    assert everything.count("✗ step 2") == 1
    assert everything.count("hint:") == 1
    assert "grading/" not in everything and "Traceback" not in everything
    assert "GradeFailure: weight-cache step 2 failed (see the report above)" in everything


def test_in_ipython_a_passing_cell_shows_the_report_and_nothing_else(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_cell(CELLS[STEP_CELLS[1]])
    capsys.readouterr()
    result = shell.run_cell('report = grade("weight-cache", SizedCache, step=1)')
    shown = capsys.readouterr()
    assert result.success
    assert shown.out.endswith("PASSED\n") and shown.out.count("PASSED") == 1
    # What a kernel's display hook sends as the cell's Out: nothing at all.
    assert shell.display_formatter.format(shell.user_ns["report"]) == ({}, {})


def test_a_report_graded_quietly_displays_its_text(
    main: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    run_steps(main, 1)
    report = grade(TOPIC, main.SizedCache, step=1, quiet=True)
    assert capsys.readouterr().out == ""
    report._ipython_display_()
    assert capsys.readouterr().out == report.text + "\n"


# --- §3: the learner's exceptions are named, with the call in progress ---------------------

NO_SUBTRACT = textwrap.dedent(
    """
    class EvictingCache(SizedCache):
        def put(self, key, value, size):
            if key in self._entries:
                old_size, _ = self._entries.pop(key)
                self._used -= old_size
            while self._used + size > self.capacity:
                self._evict(self._next_victim())
            self._entries[key] = (size, value)
            self._used += size

        def _next_victim(self):
            return next(iter(self._entries))

        def _evict(self, key):
            size, _ = self._entries.pop(key)  # forgot: self._used -= size
    """
)


def test_stop_iteration_names_the_method_the_call_and_the_exception(
    main: types.ModuleType,
) -> None:
    run_steps(main, 1)
    run_cell(main, NO_SUBTRACT)
    report = failure_of(TOPIC, main.EvictingCache, step=2).report
    lines = report.text.splitlines()
    assert "      StopIteration" in lines
    assert "      raised in your _next_victim(), line 13" in lines
    assert "      while running: cache.put('big', '<big weights>', 70)" in lines
    assert report.code.splitlines()[0] == "cache = EvictingCache(100)"  # the graded class
    assert report.code.splitlines()[-1] == "cache.put('big', '<big weights>', 70)"
    assert "next() found nothing left" in report.hint
    assert "evict in a loop" not in report.hint


def test_an_off_by_one_fit_test_is_pointed_at_by_the_failing_check(
    main: types.ModuleType,
) -> None:
    """``>=`` where ``>`` belongs: the StopIteration's usual cause would blame the removals;
    the report says where it was raised and on which call, and the failing check's own hint
    follows, as it is declared about that call (an exact fit fits)."""
    run_steps(main, 1)
    fit = "while self._used + size > self.capacity:"
    assert fit in CELLS[STEP_CELLS[2]]
    run_cell(main, CELLS[STEP_CELLS[2]].replace(fit, fit.replace(" > ", " >= ")))
    report = failure_of(TOPIC, main.EvictingCache, step=2).report
    assert "      StopIteration" in report.text.splitlines()
    assert "start at your `put`: on the call under where:, it raised StopIteration" in report.hint
    assert "This check was written for: an entry exactly the size of the budget fits" in (
        report.hint
    )
    assert "removal" not in report.hint


@pytest.mark.parametrize(
    ("edit", "broken", "exception", "hint"),
    [
        (
            "self._entries.move_to_end(key)",
            "self._entrys.move_to_end(key)",
            "AttributeError",
            "an attribute that does not exist",
        ),
        (
            "return self._entries[key][1]",
            "return self._entries[key, 0][1]",
            "KeyError",
            "a lookup of a key that is not there",
        ),
    ],
)
def test_other_learner_exceptions_get_their_own_hint(
    main: types.ModuleType, edit: str, broken: str, exception: str, hint: str
) -> None:
    source = CELLS[STEP_CELLS[1]]
    assert edit in source
    run_cell(main, source.replace(edit, broken))
    report = failure_of(TOPIC, main.SizedCache, step=1).report
    assert f"      {exception}: " in report.text
    assert "      raised in your get(), line" in report.text
    assert "      while running: cache.get('a')" in report.text
    assert hint in report.hint


def test_diagnose_hook_replaces_the_hint_and_sees_the_reproduction(
    main: types.ModuleType,
) -> None:
    run_steps(main, 1)
    run_cell(main, NO_SUBTRACT)
    calls: list[tuple[list[str], Any]] = []

    def diagnose(program: Sequence[str], impl: Any) -> str | None:
        calls.append((list(program), impl))
        return "behaves like a cache that never gives an evicted entry's bytes back"

    topic = dataclasses.replace(load_topic(TOPIC), diagnose=diagnose)
    report = failure_of(topic, main.EvictingCache, step=2).report
    assert report.hint == "behaves like a cache that never gives an evicted entry's bytes back"
    assert calls == [(report.code.splitlines(), main.EvictingCache)]


@pytest.mark.parametrize("outcome", ["none", "raises", "not a string"])
def test_diagnose_hook_that_finds_nothing_or_breaks_keeps_the_checks_hint(
    main: types.ModuleType, outcome: str
) -> None:
    run_steps(main, 1)
    run_cell(main, NO_SUBTRACT)
    # the check's own report: undiagnosed (the default report adds where the difference starts)
    undiagnosed = dataclasses.replace(load_topic(TOPIC), diagnose=lambda p, i: "")
    plain = failure_of(undiagnosed, main.EvictingCache, step=2).report
    assert "where:" not in plain.text

    def diagnose(program: Sequence[str], impl: Any) -> Any:
        if outcome == "raises":
            raise RuntimeError("a catalogue bug")
        return None if outcome == "none" else 42

    topic = dataclasses.replace(load_topic(TOPIC), diagnose=diagnose)
    assert failure_of(topic, main.EvictingCache, step=2).report.text == plain.text


def test_a_failure_inside_diagnosis_is_logged_and_raised_under_servelab_debug(
    main: types.ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    run_steps(main, 1)
    run_cell(main, NO_SUBTRACT)

    def diagnose(program: Sequence[str], impl: Any) -> Any:
        raise RuntimeError("a catalogue bug")

    topic = dataclasses.replace(load_topic(TOPIC), diagnose=diagnose)
    monkeypatch.delenv("SERVELAB_DEBUG", raising=False)
    with caplog.at_level("WARNING", logger="servelab.grading.core"):
        failure_of(topic, main.EvictingCache, step=2)
    assert "a catalogue bug" in caplog.text
    monkeypatch.setenv("SERVELAB_DEBUG", "1")
    with pytest.raises(RuntimeError, match="a catalogue bug"):
        grade(topic, main.EvictingCache, step=2, out=io.StringIO())


def test_the_default_report_shows_where_the_difference_starts(main: types.ModuleType) -> None:
    run_steps(main, 1)
    run_cell(main, NO_SUBTRACT)
    text = failure_of(TOPIC, main.EvictingCache, step=2).report.text
    assert "    where: the difference starts in your `_evict`" in text
    assert "used 100 -> 80" in text  # the reference gives the victim's bytes back


def test_diagnose_hook_is_not_asked_about_an_unwritten_step_or_a_stale_class(
    main: types.ModuleType,
) -> None:
    calls: list[Any] = []
    topic = dataclasses.replace(load_topic(TOPIC), diagnose=lambda p, i: calls.append(p))
    run_steps(main, 2)
    run_cell(main, _clear_solution_regions(CELLS[STEP_CELLS[3]]))
    with pytest.raises(StepNotWritten):
        grade(topic, main.PinningCache, step=3, out=io.StringIO())
    run_cell(main, "class PinningCache(PinningCache):\n    pass\n")
    with pytest.raises(GradeFailure, match="names its own class as its parent"):
        grade(topic, main.PinningCache, step=3, out=io.StringIO())
    assert calls == []


# --- §4: the same report under load ---------------------------------------------------------

REPLACE_WITHOUT_RELEASE = textwrap.dedent(
    """
    class LeakyCache(EvictingCache):
        def put(self, key, value, size):
            self._entries.pop(key, None)  # forgot: give the old size back
            while self._used + size > self.capacity:
                self._evict(self._next_victim())
            self._entries[key] = (size, value)
            self._used += size
    """
)


def _machine_only(step: int) -> Topic:
    """The topic reduced to one step's state machine: a failure that needs shrinking."""
    topic = load_topic(TOPIC)
    final = topic.step(step)
    return Topic(TOPIC, "machine only", [Step(step, final.title, (), final.machine)])


def test_shrinking_is_bounded_by_a_count_not_by_the_clock(
    main: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_steps(main, 2)
    run_cell(main, REPLACE_WITHOUT_RELEASE)
    quiet = failure_of(_machine_only(2), main.LeakyCache).report.text
    real = time.perf_counter
    ticks = iter(range(10**9))
    monkeypatch.setattr(time, "perf_counter", lambda: real() + 1000.0 * next(ticks))
    assert failure_of(_machine_only(2), main.LeakyCache).report.text == quiet


@pytest.mark.slow
def test_the_report_is_byte_identical_while_the_cpus_are_busy(main: types.ModuleType) -> None:
    run_steps(main, 2)
    run_cell(main, REPLACE_WITHOUT_RELEASE)
    quiet = failure_of(_machine_only(2), main.LeakyCache).report.text
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        busy = failure_of(_machine_only(2), main.LeakyCache).report.text
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert busy == quiet


# --- §5: hangs and escapes -----------------------------------------------------------------


def test_a_hang_guard_still_fires_when_the_body_swallows_it() -> None:
    def stubborn() -> None:
        for _ in range(3):
            try:
                while True:
                    pass
            except BaseException:
                pass

    with pytest.raises(ImplementationHung), hang_guard("stubborn()", 0.2):
        stubborn()


def test_a_hang_guard_never_raises_inside_a_finalizer() -> None:
    # An exception raised in __del__ cannot reach the grader: Python would print "Exception
    # ignored in ..." and go on. The guard lets the finalizer end and raises on the next line.
    class SlowToDie:
        def __del__(self) -> None:
            end = time.process_time() + 0.4
            while time.process_time() < end:
                pass

    def spin() -> None:
        while True:
            pass

    lost: list[Any] = []
    previous, sys.unraisablehook = sys.unraisablehook, lost.append
    try:
        with pytest.raises(ImplementationHung), hang_guard("SlowToDie()", 0.1):
            SlowToDie()  # dropped at once: the alarm fires inside its __del__
            spin()
    finally:
        sys.unraisablehook = previous
    assert lost == []


def _slow_gc_callback(calls: list[str]) -> Callable[[str, dict[str, int]], None]:
    def slow_gc_timer(phase: str, info: dict[str, int]) -> None:
        calls.append(phase)
        if phase == "start" and len(calls) == 1:
            end = time.process_time() + 0.4
            while time.process_time() < end:
                pass

    return slow_gc_timer


def _slow_garbage(calls: list[str]) -> None:
    def slow_to_close(box: list[Any]) -> Iterator[None]:
        try:
            yield
        finally:  # run by the collector: the generator is only reachable from itself
            calls.append("closed")
            end = time.process_time() + 0.4
            while time.process_time() < end:
                pass

    box: list[Any] = []
    box.append(slow_to_close(box))
    next(box[0])


@pytest.mark.parametrize("where", ["gc callback", "generator the collector closes"])
def test_a_hang_guard_never_raises_while_the_collector_runs(where: str) -> None:
    # Hypothesis times the garbage collector through gc.callbacks, and the collector closes
    # unreachable generators: an alarm raised in either is lost like one raised in __del__
    # (and Hypothesis would then report a FlakyStrategyDefinition). The guard waits for the
    # collection to end, then raises on the next line.
    calls: list[str] = []
    callback = _slow_gc_callback(calls) if where == "gc callback" else None
    if callback is None:
        _slow_garbage(calls)

    def spin() -> None:
        while True:
            pass

    lost: list[Any] = []
    previous, sys.unraisablehook = sys.unraisablehook, lost.append
    if callback is not None:
        gc.callbacks.append(callback)
    try:
        with pytest.raises(ImplementationHung), hang_guard("collect()", 0.1):
            gc.collect()  # the alarm fires while the collector runs
            spin()
    finally:
        if callback is not None:
            gc.callbacks.remove(callback)
        sys.unraisablehook = previous
    assert calls[:2] == (["start", "stop"] if callback is not None else ["closed"])
    assert lost == []


def test_a_hang_guard_does_not_count_the_collectors_time() -> None:
    # A full collection walks every object the process holds, so its length depends on what
    # ran before (a grader's kernel after a day of grading): a call that is quick by itself
    # must not be reported hung because a collection landed in it.
    calls: list[str] = []
    callback = _slow_gc_callback(calls)  # the collection takes 0.4 s of CPU, 4 times the limit
    gc.callbacks.append(callback)
    try:
        with hang_guard("collect()", 0.1):
            gc.collect()
            total = sum(range(100))
    finally:
        gc.callbacks.remove(callback)
    assert calls[:2] == ["start", "stop"] and total == 4950


def test_a_loop_that_catches_everything_is_reported() -> None:
    # In a child process, so the old guard (which fired once) shows as a timeout, not a hang
    # of the test run.
    script = textwrap.dedent(
        """
        import io, time
        from servelab.grading import GradeFailure, grade

        class Stubborn:
            def __init__(self, capacity):
                self.capacity, self._entries, self.used = capacity, {}, 0
            def keys(self):
                return list(self._entries)
            def get(self, key):
                return None
            def put(self, key, value, size):
                while True:
                    try:
                        while True:
                            pass
                    except:
                        pass

        try:
            grade("weight-cache", Stubborn, step=1, out=io.StringIO())
        except GradeFailure as failure:
            print(failure.report.text)
        print(f"cpu {time.process_time():.1f}")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert "`cache.put('a', '<a weights>', 10)` did not return within 3 s" in done.stdout, (
        done.stdout + done.stderr
    )
    assert "looping in your put(), line" in done.stdout


@pytest.mark.parametrize("escape", ["raise SystemExit(0)", "raise KeyboardInterrupt"])
def test_system_exit_and_keyboard_interrupt_from_learner_code_fail_the_grade(
    main: types.ModuleType, escape: str
) -> None:
    run_steps(main, 2)
    run_cell(
        main, f"class PinningCache(EvictingCache):\n    def pin(self, key):\n        {escape}\n"
    )
    report = failure_of(TOPIC, main.PinningCache, step=3).report
    name = escape.split()[1].split("(")[0]
    assert not report.passed
    assert f"      {name}" in report.text
    assert "while running: cache.pin('a')" in report.text
    assert name in report.hint


def test_a_real_ctrl_c_interrupts_the_grade(main: types.ModuleType) -> None:
    run_steps(main, 2)
    main.os, main.signal = os, signal
    run_cell(
        main,
        "class PinningCache(EvictingCache):\n"
        "    def pin(self, key):\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        while True:\n"
        "            pass\n",
    )
    out = io.StringIO()
    with pytest.raises(GradeInterrupted) as interrupted:
        grade(TOPIC, main.PinningCache, step=3, out=out)
    assert str(interrupted.value) == "weight-cache step 3: grade interrupted; nothing was graded"
    assert out.getvalue() == ""


def _cli(tmp_path: Path, source: str, *extra: str) -> subprocess.CompletedProcess[str]:
    file = tmp_path / "learner.py"
    file.write_text(textwrap.dedent(source), encoding="utf-8")
    command = [sys.executable, "-m", "servelab", "grade", TOPIC, "--impl", f"{file}:Cache"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [*command, "--step", "1", *extra], capture_output=True, text=True, timeout=120, env=env
    )


CLI_CACHE = """
    class Cache:
        def __init__(self, capacity):
            self.capacity, self._entries, self.used = capacity, {}, 0
        def keys(self):
            return list(self._entries)
        def get(self, key):
            return None
        def put(self, key, value, size):
            %s
"""


def test_cli_fails_a_method_that_raises_system_exit(tmp_path: Path) -> None:
    done = _cli(tmp_path, CLI_CACHE % "raise SystemExit(0)")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "SystemExit" in done.stdout and done.stdout.rstrip().endswith("FAILED")


def test_cli_fails_a_method_that_ends_the_process(tmp_path: Path) -> None:
    done = _cli(tmp_path, CLI_CACHE % "__import__('os')._exit(0)")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "grading ended early: the process exited with code 0" in done.stdout


def test_cli_stops_a_loop_inside_one_c_call(tmp_path: Path) -> None:
    done = _cli(tmp_path, CLI_CACHE % "sum(range(10**12))", "--timeout", "3")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "grading did not finish within 3 s" in done.stdout


# --- §6: whatever the learner's code raises, the report says what ran -----------------------

ESCAPES = [
    ("hypothesis.reject()", "UnsatisfiedAssumption"),
    ("hypothesis.assume(False)", "UnsatisfiedAssumption"),
    ("raise hypothesis.errors.StopTest(0)", "StopTest"),
    ("raise hypothesis.errors.Frozen('frozen')", "Frozen"),
    ("raise hypothesis.errors.Flaky('flaky')", "Flaky"),
    ("raise hypothesis.errors.FailedHealthCheck('unhealthy')", "FailedHealthCheck"),
    ("raise unittest.SkipTest('skipped')", "SkipTest"),
    ("raise Oops('derived from BaseException')", "Oops"),
]


def _escaping_cell(parent: str, method: str, condition: str, statement: str) -> str:
    """A cell whose ``method`` runs ``statement`` when ``condition`` holds (line 8)."""
    call = "super().put(key, value, size)" if method == "put" else "return super().get(key)"
    args = "key, value, size" if method == "put" else "key"
    return (
        "import hypothesis, hypothesis.errors, unittest\n"
        "class Oops(BaseException):\n"
        "    pass\n"
        f"class Escaping({parent}):\n"
        f"    def {method}(self, {args}):\n"
        f"        if {condition}:\n"
        "            pass\n"
        f"            {statement}\n"
        f"        {call}\n"
    )


@pytest.mark.parametrize(("statement", "name"), ESCAPES)
def test_hypothesis_control_exceptions_from_learner_code_fail_the_grade(
    main: types.ModuleType, statement: str, name: str
) -> None:
    run_steps(main, 2)
    run_cell(main, REPLACE_WITHOUT_RELEASE)  # a mistake that only the state machine finds
    run_cell(main, _escaping_cell("LeakyCache", "put", "key in self._entries", statement))
    report = failure_of(_machine_only(2), main.Escaping).report
    lines = report.text.splitlines()
    assert "agree with the model" not in report.text
    assert any(line.startswith(f"      {name}") for line in lines), report.text
    assert "      raised in your put(), line 8" in lines
    running = [line for line in lines if line.startswith("      while running: ")]
    assert len(running) == 1 and running[0].startswith(
        "      while running: cache.put('a', '<a weights>', "
    ), report.text
    assert report.code.splitlines()[-1] == running[0].removeprefix("      while running: ")


@pytest.mark.parametrize(
    "statement", ["raise Oops('no')", "raise hypothesis.errors.StopTest(0)", "hypothesis.reject()"]
)
def test_a_base_exception_from_learner_code_in_a_probe_fails_the_grade(
    main: types.ModuleType, statement: str
) -> None:
    run_steps(main, 1)
    run_cell(main, _escaping_cell("SizedCache", "put", "True", statement))
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        report = failure_of(TOPIC, main.Escaping, step=1).report
    assert "      raised in your put(), line 8" in report.text.splitlines()
    assert [str(w.message) for w in shown] == []  # the report alone speaks to the learner
    assert "      while running: cache.put(" in report.text
    assert report.text.endswith("FAILED")


def test_a_base_exception_is_shrunk_like_an_exception(main: types.ModuleType) -> None:
    run_steps(main, 2)
    programs = {}
    for base in ("BaseException", "Exception"):
        cell = _escaping_cell("EvictingCache", "get", "len(self._entries) > 3", "raise Oops()")
        run_cell(main, cell.replace("class Oops(BaseException)", f"class Oops({base})"))
        programs[base] = failure_of(_machine_only(2), main.Escaping).report.code
    assert programs["BaseException"] == programs["Exception"]


def test_an_exception_whose_str_recurses_or_loops_gives_a_report() -> None:
    # In a child process: before, a looping __str__ hung the grade.
    script = textwrap.dedent(
        """
        import dataclasses, io
        from servelab import checkpoint
        from servelab.grading import GradeFailure, Step, grade, load_topic

        class Recursing(Exception):
            def __str__(self):
                return str(self)

        class Looping(Exception):
            def __str__(self):
                while True:
                    pass

        def raising(error, on_replace):
            class Cache(checkpoint("weight-cache", step=2)):
                def put(self, key, value, size):
                    if key in self._entries or not on_replace:
                        raise error()
                    super().put(key, value, size)
            return Cache

        # Without the catalogue's diagnosis, which reads messages too (under its own guard).
        topic = dataclasses.replace(load_topic("weight-cache"), diagnose=lambda p, i: None)
        step = topic.step(2)
        machine_only = dataclasses.replace(topic, steps=[Step(2, "", (), step.machine)])
        for graded, error, on_replace in [
            (topic, Recursing, False),
            (topic, Looping, False),
            (machine_only, Looping, True),
        ]:
            try:
                grade(graded, raising(error, on_replace), step=2, out=io.StringIO())
            except GradeFailure as failure:
                print(failure.report.text)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    lines = done.stdout.splitlines()
    assert "      Recursing (str() raised RecursionError)" in lines, done.stdout + done.stderr
    assert lines.count("      Looping (str() did not finish)") == 2
    # the machine's failing call (its size is whatever the shrunk program drew)
    call = "      while running: cache.put('a', '<a weights>', "
    assert any(line.startswith(call) for line in lines), done.stdout
    assert done.stdout.count("FAILED") == 3


def test_a_str_that_swallows_the_step_limit_is_still_bounded() -> None:
    class Swallowing(Exception):
        def __str__(self) -> str:
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    pass

    assert bounded_str(Swallowing()) == (False, "str() did not finish")
    assert bounded_str(KeyError("a")) == (True, "'a'")


PICKY_MACHINE = """
from hypothesis import assume, strategies as st
from hypothesis.stateful import rule
from servelab.testing.core import RecordingMachine

def build(impl):
    class Picky(RecordingMachine):
        @rule(n=st.integers(0, 99))
        def go(self, n):
            assume(n == 0)  # the grader's own assumption: most programs are discarded
            self.do(f"x.go({n})", lambda: impl(n))
    return Picky
"""


def test_a_passing_report_states_how_many_programs_ran() -> None:
    from hypothesis.statistics import collector

    machine: dict[str, Any] = {}
    exec(compile(PICKY_MACHINE, "<probe>", "exec"), machine)  # "<probe>": the grader's code
    check = MachineCheck("picky", machine["build"], ["none"], max_examples=150, step_count=3)
    topic = Topic("picky", "picky", [Step(1, "one", (), check)])
    statistics: list[dict[str, Any]] = []
    with collector.with_value(statistics.append):
        report = grade(topic, lambda n: None, step=1, out=io.StringIO())
    valid = sum(
        case["status"] == "valid"
        for phase in statistics[0].values()
        if isinstance(phase, dict)
        for case in phase.get("test-cases", ())
    )
    assert 0 < valid < 150
    assert f"  ✓ step 1 · picky: {valid} random programs of up to 3 calls agree" in report.text


# --- §7: the stop button ends a grade in one line -------------------------------------------

STOP_BUTTON = """
import os, signal, threading, time

class SlowCache(EvictingCache):
    pressed = False

    def get(self, key):
        if not SlowCache.pressed:  # the stop button, pressed while the grade runs
            SlowCache.pressed = True
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        time.sleep(0.01)  # a grade of many seconds
        return super().get(key)
"""
INTERRUPTED = "weight-cache step 2: grade interrupted; nothing was graded"


def test_a_real_sigint_during_a_long_grade_ends_it_in_one_line(main: types.ModuleType) -> None:
    run_steps(main, 2)
    run_cell(main, STOP_BUTTON)
    out = io.StringIO()
    with pytest.raises(GradeInterrupted) as interrupted:
        grade(TOPIC, main.SlowCache, step=2, out=out)
    assert out.getvalue() == ""
    assert interrupted.value._render_traceback_() == [f"GradeInterrupted: {INTERRUPTED}"]
    assert isinstance(interrupted.value, KeyboardInterrupt)  # whatever stops on Ctrl-C stops


def test_in_ipython_the_stop_button_shows_one_line_and_no_grader_frames(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_cell(CELLS[STEP_CELLS[1]])
    shell.run_cell(CELLS[STEP_CELLS[2]])
    shell.run_cell(STOP_BUTTON)
    capsys.readouterr()
    result = shell.run_cell('grade("weight-cache", SlowCache, step=2)')
    shown = capsys.readouterr()
    assert isinstance(result.error_in_exec, GradeInterrupted)
    assert (shown.out + shown.err).strip() == f"GradeInterrupted: {INTERRUPTED}"


def _as_a_terminal_starts_it() -> None:
    """Ctrl-C as a terminal's command gets it: delivered and not ignored, whatever an earlier
    test in this worker left ignored or blocked (both are inherited across exec)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("where", ["child process", "--in-process"])
def test_cli_ctrl_c_ends_the_grade_in_one_line(tmp_path: Path, where: str) -> None:
    started = tmp_path / "started"
    file = tmp_path / "learner.py"
    file.write_text(
        textwrap.dedent(
            f"""
            import time

            class Cache:
                def __init__(self, capacity):
                    self.capacity, self._entries, self.used = capacity, {{}}, 0
                def keys(self):
                    return list(self._entries)
                def get(self, key):
                    return None
                def put(self, key, value, size):
                    open({str(started)!r}, "w").close()
                    time.sleep(10)
            """
        ),
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "servelab", "grade", TOPIC, "--impl", f"{file}:Cache"]
    command += ["--step", "1"] + (["--in-process"] if where == "--in-process" else [])
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    # A session of its own, as a terminal gives a command: Ctrl-C signals the whole group.
    grading = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=_as_a_terminal_starts_it,
    )
    try:
        for _ in range(1200):  # until the learner's code runs (at most a minute)
            if started.exists() or grading.poll() is not None:
                break
            time.sleep(0.05)
        assert started.exists(), grading.communicate()
        os.killpg(grading.pid, signal.SIGINT)
        out, err = grading.communicate(timeout=60)
    finally:
        if grading.poll() is None:
            os.killpg(grading.pid, signal.SIGKILL)
            grading.wait()
    assert grading.returncode == 130, out + err
    assert (out + err).strip() == "weight-cache step 1: grade interrupted; nothing was graded"


def test_counting_programs_keeps_the_programs_hypothesis_generates() -> None:
    # A derandomized run draws its seed from the test function's digest: the wrapper that
    # counts programs and carries the learner's exceptions must not change which programs run.
    from hypothesis.internal.reflection import function_digest
    from hypothesis.stateful import get_state_machine_test

    from servelab.grading._programs import _counting

    check = load_topic(TOPIC).step(2).machine
    assert check is not None
    test: Any = get_state_machine_test(check.build(load_topic))
    inner = test.hypothesis.inner_test
    assert function_digest(_counting(inner, [0])) == function_digest(inner)


STOP_DURING_COLLECTION = """
import gc, os, signal

class CollectingCache(EvictingCache):
    pressed = False

    def get(self, key):
        if not CollectingCache.pressed:
            CollectingCache.pressed = True

            def press(phase, info):  # the stop button, pressed while the collector runs
                if phase == "start":
                    os.kill(os.getpid(), signal.SIGINT)
                else:
                    gc.callbacks.remove(press)

            gc.callbacks.append(press)
            gc.collect()
        return super().get(key)
"""


def test_a_ctrl_c_that_lands_in_a_gc_callback_is_not_lost(main: types.ModuleType) -> None:
    # Hypothesis times the collector through gc.callbacks; an interrupt raised inside one is
    # printed as "Exception ignored" and lost, and the grade ran on to its end.
    run_steps(main, 2)
    run_cell(main, STOP_DURING_COLLECTION)
    lost: list[Any] = []
    previous, sys.unraisablehook = sys.unraisablehook, lost.append
    try:
        with pytest.raises(GradeInterrupted):
            grade(TOPIC, main.CollectingCache, step=2, out=io.StringIO())
    finally:
        sys.unraisablehook = previous
    assert lost == []


def test_a_topic_of_one_step_graded_whole_is_headed_as_that_step() -> None:
    probe = Probe("adds", "add the two", lambda impl: None)
    one = Topic("adder", "adder", [Step(1, "add two numbers", (probe,))])
    two = Topic("adder", "adder", [Step(1, "add", (probe,)), Step(2, "add more", (probe,))])
    head = grade(one, None, out=io.StringIO()).text.splitlines()[0]
    assert head == grade(one, None, step=1, out=io.StringIO()).text.splitlines()[0]
    assert head == "adder · step 1 of 1: add two numbers"
    assert grade(two, None, out=io.StringIO()).text.splitlines()[0] == "adder · all 2 steps"


def test_a_probe_may_take_longer_than_the_default_when_it_says_so() -> None:
    # a probe that compiles (Triton on a GPU) spends seconds of CPU that are no hang
    def spin(impl: Any) -> None:
        end = time.process_time() + PROBE_TIMEOUT_S + 0.5
        while time.process_time() < end:
            pass

    slow = Probe("compiles", "compile it", spin, seconds=PROBE_TIMEOUT_S + 5)
    hasty = dataclasses.replace(slow, seconds=None)
    ok = Topic("slow", "slow", [Step(1, "compile", (slow,))])
    assert grade(ok, None, out=io.StringIO()).passed
    hung = Topic("slow", "slow", [Step(1, "compile", (hasty,))])
    with pytest.raises(GradeFailure) as info:
        grade(hung, None, out=io.StringIO())
    assert "did not return within" in info.value.report.text


def test_a_hang_is_placed_at_its_loop_the_same_on_every_run(tmp_path: Path) -> None:
    # the timer lands on whichever line of the loop is running: the report names the loop
    (tmp_path / "spinning_cache.py").write_text(
        textwrap.dedent(
            """
            class SpinningCache:
                def __init__(self, capacity):
                    self.capacity, self._entries, self.used = capacity, {}, 0
                def keys(self):
                    return list(self._entries)
                def get(self, key):
                    return None
                def _room(self):
                    total = 0
                    for size in self._entries.values():
                        total += size
                    return self.capacity - total
                def put(self, key, value, size):
                    while self._room() >= size:
                        spare = self._room()
                        spare += 1
                        spare -= 1
            """
        )
    )
    spec = importlib.util.spec_from_file_location("spinning_cache", tmp_path / "spinning_cache.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    texts = []
    for _ in range(2):
        with pytest.raises(GradeFailure) as info:
            grade("weight-cache", module.SpinningCache, step=1, out=io.StringIO())
        texts.append(info.value.report.text)
    assert texts[0] == texts[1]
    assert "looping in your put(), line 15: while self._room() >= size:" in texts[0], texts[0]
