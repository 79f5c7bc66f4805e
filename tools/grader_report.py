"""Print, per topic, how the graders do against the catalogue of known mistakes.

For every mistake in :mod:`servelab.grading.mistakes`: is it caught by a full grade; is it
caught by the final step's state machine alone (no probes, derandomized seed); does the
report's hint contain the mistake's keyword, without and with diagnosis by matching behaviour.

The diagnosis knows every mistake of the catalogue, so its column is an upper bound. The last
column diagnoses each mistake with itself left out of the catalogue, as for a mistake nobody
listed: the report then keeps the check's hint (right or not), or, worse, names another
mistake; ``misnamed`` counts those whose named mistake lacks the keyword.

    PYTHONPATH=src python tools/grader_report.py [topic ...] [--details]
"""

from __future__ import annotations

import argparse
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servelab.grading import GradeFailure, Step, Topic, grade, load_topic
from servelab.grading.diagnose import Diagnoser, for_topic
from servelab.grading.mistakes import CORRECT, Mistake, mistakes

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from buggy_impls import failing_report


@dataclass
class Outcome:
    mistake: Mistake
    caught: bool
    machine: bool
    named: bool
    named_diagnosed: bool
    hint: str
    diagnosis: str | None
    unknown_named: bool = False
    misnamed: bool = False


def _fails(topic: str | Topic, impl: Any) -> GradeFailure | None:
    try:
        grade(topic, impl, out=io.StringIO(), quiet=True)
    except GradeFailure as failure:
        return failure
    return None


def machine_only(topic: str) -> Topic:
    """The final step with its probes taken away: only its state machine runs."""
    final = load_topic(topic).steps[-1]
    return Topic(topic, "machine only", [Step(final.number, final.title, (), final.machine)])


def evaluate(m: Mistake) -> Outcome:
    machine = _fails(machine_only(m.topic), m.impl) is not None
    try:
        report, program = failing_report(m.topic, m.impl)
    except AssertionError:  # the full grade passed
        return Outcome(m, False, machine, False, False, "", None)
    hook = for_topic(m.topic)
    said = hook(program, m.impl) if hook else None
    key = m.hint.lower()
    named = key in report.hint.lower()
    others = [x for x in mistakes(m.topic) if x.name != m.name]
    unknown = hook(program, m.impl, others) if isinstance(hook, Diagnoser) else None
    return Outcome(
        m,
        True,
        machine,
        named,
        key in (said or report.hint).lower(),
        report.hint,
        said,
        key in (unknown or report.hint).lower(),
        unknown is not None and key not in unknown.lower(),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topics", nargs="*", default=list(CORRECT))
    parser.add_argument(
        "--details",
        action="store_true",
        help="one line per mistake; flags: Caught, Machine alone, Named by the hint, "
        "named with Diagnosis, named when Left out, X: misnamed when left out",
    )
    args = parser.parse_args(argv)
    rows = []
    total = [0, 0, 0, 0, 0, 0, 0]
    for topic in args.topics:
        outcomes = [evaluate(m) for m in mistakes(topic)]
        counts = [
            len(outcomes),
            sum(o.caught for o in outcomes),
            sum(o.machine for o in outcomes),
            sum(o.named for o in outcomes),
            sum(o.named_diagnosed for o in outcomes),
            sum(o.unknown_named for o in outcomes),
            sum(o.misnamed for o in outcomes),
        ]
        total = [a + b for a, b in zip(total, counts, strict=True)]
        rows.append((topic, *counts))
        if args.details:
            for o in outcomes:
                seen = (o.caught, o.machine, o.named, o.named_diagnosed, o.unknown_named)
                flags = "".join(c if ok else "." for c, ok in zip("CMNDL", seen, strict=True))
                flags += "X" if o.misnamed else " "
                print(f"{topic:16} {o.mistake.name:32} {flags}  {o.diagnosis or o.hint[:60]}")
    rows.append(("total", *total))
    head = (
        "topic",
        "mistakes",
        "caught",
        "machine alone",
        "keyword: hint",
        "keyword: diagnosed",
        "keyword: left out",
        "misnamed: left out",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
