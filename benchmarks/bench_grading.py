"""Grade-cell cost: CPU seconds per grade for the reference and for known-buggy implementations.

A learner waits for every grade cell, so the grader has a budget: a correct implementation
grades in at most 3 s of CPU per step, and a failing one answers in at most 5 s. CPU time
(``time.process_time``) rather than wall time, so other load on the machine does not count.

Rows, per topic:

* ``reference step N``: the package's own implementation graded at step N (probes of steps
  1..N, then the step-N state machine: exactly what a grade cell runs);
* ``failing``: every known-buggy implementation (the topic's catalogue of mistakes, or
  ``tests/buggy/<topic>/``) graded on all
  steps; the slowest and the median are shown, and the slowest file is named. Most are caught
  by a probe within milliseconds;
* ``failing, machine alone``: the same implementations graded by the last step's state
  machine only, so each failure is found by generation and then shrunk. This is the cost of
  a mistake no probe names, the worst case a learner waits for.

The peer for each row is the budget it must stay under (the ``of budget`` column). Run:
``python benchmarks/bench_grading.py [--quick] [--topic NAME]`` (``--quick``: reference only
at the last step, and at most three buggy files per topic). The engine's grade has its own
figures (docs/GRADING.md): it runs a model, and its mistakes corrupt KV only then.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from servelab import checkpoint
from servelab.grading import GradeFailure, Step, Topic, grade, load_topic, topics
from servelab.grading.mistakes import correct_impl
from servelab.kv.blocks import BlockManager
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import Scheduler
from servelab.testing.block_manager import check_block_manager_invariants
from servelab.weights import WeightCache

PASSING_BUDGET_S = 3.0
FAILING_BUDGET_S = 5.0
ROOT = Path(__file__).resolve().parent.parent

REFERENCES: dict[str, Any] = {
    "weight-cache": WeightCache,
    # the learner-style classes: steps 4 and 5 read the notebook skeleton's SIEVE attributes
    "eviction-policy": correct_impl("eviction-policy"),
    "block-manager": BlockManager,
    "scheduler": Scheduler,
    "prefix-cache": PrefixCachingBlockManager,
    "invariant-checker": check_block_manager_invariants,
    # the notebook's classes: the package's tiers speak another API (PutResult, Wait)
    "kv-offload": correct_impl("kv-offload"),
    # the notebook's class of each step (its steps change the scheduler's API): see STEPWISE
    "token-budget": None,
    # notebook 08's Triton kernel (the interpreter without a GPU): imported when benchmarked
    "paged-kernel": lambda: correct_impl("paged-kernel"),
}


STEPWISE = {"token-budget"}
"""Topics graded at each step with that step's checkpoint, as the notebook's grade cells are."""


def machine_alone(topic: str) -> Topic:
    """The topic reduced to its last step's state machine, with no probes in front of it."""
    final = load_topic(topic).steps[-1]
    return Topic(topic, "machine alone", [Step(final.number, final.title, (), final.machine)])


def timed_grade(topic: str | Topic, impl: Any, step: int | None) -> tuple[float, bool]:
    """CPU seconds of one grade, and whether it passed."""
    start = time.process_time()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # a buggy checker may print
            passed = grade(topic, impl, step=step, out=io.StringIO()).passed
    except GradeFailure:
        passed = False
    return time.process_time() - start, passed


def buggy_implementations(topic: str) -> list[tuple[str, Any]]:
    folder = ROOT / "tests" / "buggy" / topic.replace("-", "_")
    if folder.is_dir():  # a topic whose mistakes are test files, not a diagnosis catalogue
        found = []
        for path in sorted(folder.glob("*.py")):
            if path.stem == "correct":
                continue
            spec = importlib.util.spec_from_file_location(f"buggy_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            found.append((path.stem, module.Buggy))
        return found
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from buggy_impls import mistakes
    finally:
        sys.path.remove(str(ROOT / "tests"))
    return [(m.name, m.impl) for m in mistakes(topic)]


def row(label: str, seconds: float, budget: float, note: str = "") -> str:
    flag = "ok" if seconds <= budget else "OVER"
    return f"  {label:<34}{seconds:>8.2f} s {seconds / budget:>9.0%}  {flag:<4} {note}"


def bench_topic(topic: str, quick: bool) -> list[str]:
    lines = [f"{topic}"]
    reference = REFERENCES[topic]
    if topic == "paged-kernel":
        reference = reference()
    numbers = [s.number for s in load_topic(topic).steps]
    for number in numbers[-1:] if quick else numbers:
        graded = checkpoint(topic, number) if topic in STEPWISE else reference
        seconds, passed = timed_grade(topic, graded, number)
        note = "" if passed else "(did not pass!)"
        lines.append(row(f"reference step {number}", seconds, PASSING_BUDGET_S, note))
    buggy = buggy_implementations(topic)
    if quick:
        buggy = buggy[:3]
    runs: list[tuple[str, str | Topic]] = [("failing", topic)]
    if load_topic(topic).steps[-1].machine is not None:  # the checker topic has probes only
        runs.append(("failing, machine alone", machine_alone(topic)))
    for label, graded in runs:
        timings: list[tuple[float, str]] = []
        for name, impl in buggy:
            seconds, passed = timed_grade(graded, impl, None)
            timings.append((seconds, f"{name} (passed!)" if passed else name))
        if timings:
            slowest, name = max(timings)
            median = statistics.median(t for t, _ in timings)
            lines.append(row(f"{label}, median", median, FAILING_BUDGET_S))
            lines.append(row(f"{label}, slowest", slowest, FAILING_BUDGET_S, name))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and buggy files")
    parser.add_argument("--topic", choices=topics(), action="append", help="only these topics")
    args = parser.parse_args(argv)
    print(f"{'':<36}{'CPU':>8}   {'of budget':>9}")
    for topic in args.topic or [t for t in topics() if t in REFERENCES]:
        print("\n".join(bench_topic(topic, args.quick)), flush=True)
    print(
        f"budgets: {PASSING_BUDGET_S:g} s of CPU per passing step, "
        f"{FAILING_BUDGET_S:g} s per failing grade"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
