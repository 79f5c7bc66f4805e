"""Print, per topic, how the graders do against the catalogue of known mistakes.

For every mistake in :mod:`servelab.grading.mistakes`: is it caught by a full grade; is it
caught by the final step's state machine alone (no probes, derandomized seed); is the method
the report points at one the mistake changes (``method found``); and, with the mistake left
out of the catalogue as for a mistake nobody listed, does the report still name it (its
keyword in the hint) and does it claim certainty about another mistake (``wrong certainty``:
"behaves exactly like one that ..." naming a mistake without this one's keyword).

    PYTHONPATH=src python tools/grader_report.py [topic ...] [--details]
"""

from __future__ import annotations

import argparse
import io
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from servelab.grading import GradeFailure, Step, Topic, grade, load_topic
from servelab.grading.diagnose import explained
from servelab.grading.localise import changed_methods
from servelab.grading.mistakes import CORRECT, Mistake, correct_impl, mistakes

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from buggy_impls import failing_check, shown_hint


@dataclass
class Outcome:
    mistake: Mistake
    caught: bool
    machine: bool
    located: bool = False
    named_left_out: bool = False
    wrong_certainty: bool = False
    said: str = ""
    methods: tuple[str, ...] = ()
    where: tuple[str, ...] = ()


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
    undiagnosed = replace(load_topic(m.topic), diagnose=lambda program, impl: None)
    try:  # the check's own hint: a topic hook that answers None keeps it
        report, program, exc = failing_check(undiagnosed, m.impl)
    except AssertionError:  # the full grade passed
        return Outcome(m, False, machine)
    others = [x for x in mistakes(m.topic) if x.name != m.name]
    # the grader's own call (its read and raised arguments), with the mistake left out
    finding = explained(m.topic, program, exc, m.impl, None, others)
    changed = changed_methods(m.impl, correct_impl(m.topic))
    key = m.hint.lower()
    said = shown_hint(finding, report)
    return Outcome(
        m,
        True,
        machine,
        located=bool(set(finding.methods) & changed),
        named_left_out=key in said.lower(),
        wrong_certainty=finding.certain and key not in said.lower(),
        said=said,
        methods=finding.methods,
        where=finding.where,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topics", nargs="*", default=list(CORRECT))
    parser.add_argument(
        "--details",
        action="store_true",
        help="one line per mistake; flags: Caught, Machine alone, Localised to a changed "
        "method, Named when left out, X: a wrong certainty claim; then the methods found",
    )
    args = parser.parse_args(argv)
    rows = []
    total = [0] * 6
    for topic in args.topics:
        outcomes = [evaluate(m) for m in mistakes(topic)]
        counts = [
            len(outcomes),
            sum(o.caught for o in outcomes),
            sum(o.machine for o in outcomes),
            sum(o.located for o in outcomes),
            sum(o.named_left_out for o in outcomes),
            sum(o.wrong_certainty for o in outcomes),
        ]
        total = [a + b for a, b in zip(total, counts, strict=True)]
        rows.append((topic, *counts))
        if args.details:
            for o in outcomes:
                seen = (o.caught, o.machine, o.located, o.named_left_out)
                flags = "".join(c if ok else "." for c, ok in zip("CMLN", seen, strict=True))
                flags += "X" if o.wrong_certainty else " "
                where = ",".join(o.methods) or "-"
                print(f"{topic:16} {o.mistake.name:32} {flags} {where:24} {o.said[:70]}")
    rows.append(("total", *total))
    head = (
        "topic",
        "mistakes",
        "caught",
        "caught by the machine alone",
        "method found",
        "named, left out",
        "wrong certainty",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
