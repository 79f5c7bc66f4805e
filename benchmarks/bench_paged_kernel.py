"""What Triton's interpreter costs a paged-kernel grade, against the torch oracle it is checked by.

Without a GPU, notebook 08's kernel runs in Triton's interpreter (``TRITON_INTERPRET=1``): each
program of the grid runs in Python and each ``tl`` operation is a NumPy call on a tile. Rows:

* ``grade step N``: CPU seconds of the notebook's solution graded at step N (what a grade cell
  costs when it passes), and how many kernel launches it made;
* ``failing, <mistake>``: CPU seconds of a full grade of each catalogued mistake;
* ``one launch``: one decode batch of the grader's size (3 sequences of up to 3 blocks of 8,
  4 query heads), through the interpreter and through the gather + SDPA oracle in the same run:
  the ratio is the interpreter's cost per launch relative to torch on the CPU.

Run: ``python benchmarks/bench_paged_kernel.py`` (needs torch and triton; ``make triton``).
"""

from __future__ import annotations

import io
import os
import time

if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.mistakes import mistakes
from servelab.testing import paged_kernel as pk

TOPIC = "paged-kernel"


def counted_grade(impl: object, step: int | None) -> tuple[float, int, bool]:
    """CPU seconds, kernel launches and whether it passed."""
    launches = [0]
    original = pk._launch

    def counting(*args: object, **kwargs: object) -> object:
        launches[0] += 1
        return original(*args, **kwargs)  # type: ignore[arg-type]

    pk._launch = counting  # type: ignore[assignment]
    start = time.process_time()
    try:
        passed = grade(TOPIC, impl, step=step, out=io.StringIO()).passed
    except GradeFailure:
        passed = False
    finally:
        pk._launch = original
    return time.process_time() - start, launches[0], passed


def per_launch(repeat: int = 20) -> tuple[float, float]:
    case = pk.Case(8, ((5, 1, 7), (5, 2), (3,)), (20, 13, 6), 9, kv_heads=2, group=2, head_dim=16)
    t = pk.tensors(case)
    kernel = checkpoint(TOPIC, step=3)
    pk._launch(3, kernel, case, t)  # the interpreter rewrites each function once
    start = time.process_time()
    for _ in range(repeat):
        pk._launch(3, kernel, case, t)
    interpreted = (time.process_time() - start) / repeat
    start = time.process_time()
    for _ in range(repeat):
        pk.expected(3, case, t)
    oracle = (time.process_time() - start) / repeat
    return interpreted, oracle


def main() -> int:
    print(f"{'':<34}{'CPU':>8}  launches")
    counted_grade(checkpoint(TOPIC, step=1), 1)  # warm: imports, first rewrites
    for step in (1, 2, 3):
        seconds, launches, passed = counted_grade(checkpoint(TOPIC, step=step), step)
        note = "" if passed else "  (did not pass!)"
        print(f"  {'grade step ' + str(step):<32}{seconds:>8.2f} s {launches:>6}{note}")
    for m in mistakes(TOPIC):
        seconds, launches, passed = counted_grade(m.impl, None)
        note = "  (passed!)" if passed else ""
        print(f"  {'failing, ' + m.name:<32}{seconds:>8.2f} s {launches:>6}{note}")
    interpreted, oracle = per_launch()
    print(
        f"  one launch: interpreter {interpreted * 1e3:.1f} ms, gather + SDPA "
        f"{oracle * 1e3:.2f} ms: {interpreted / oracle:.0f}x the oracle"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
