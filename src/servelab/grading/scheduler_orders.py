"""Scheduler probes of the orders a random program seldom checks: the order ``running`` holds
the sequences one step admits, and the order ``out.preempted`` lists several victims of one
step. A fixed program reaches each, whatever the state machine draws."""

from __future__ import annotations

from functools import partial
from typing import Any

from servelab.grading.about import About, Hint
from servelab.grading.topic import Probe

__all__ = ["ORDER_HINTS", "order_probes"]

ORDER_HINTS: dict[str, Hint] = {
    "running-order": Hint(
        "admit appends each admitted sequence to the end of running (running.append), so "
        "running holds them oldest first: decode walks that order and preempts its last",
        About(("admit",), ("running",)),
    ),
    "preempted-order": Hint(
        "preempt appends each victim to out.preempted in the order it is preempted: the "
        "newest running first, then the next newest",
        About(("preempt",), ("out.preempted",)),
    ),
}


def running_in_admission_order(script: Any, impl: Any) -> None:
    """Three sequences that all fit are admitted in one step: running lists them as added."""
    s = script(impl, num_blocks=8, block_size=4, watermark=0)
    for sid in (0, 1, 2):
        s.add(sid, 4, 2)
    s.step(emit=False)
    s.expect(s.running(), [0, 1, 2], "running after the step", "added in that order, all fit")


def victims_in_preemption_order(script: Any, impl: Any) -> None:
    """Three one-block sequences fill a 3-block pool; the oldest's decode needs a block: the
    newest (2) is preempted, then the next newest (1), in that order."""
    s = script(impl, num_blocks=3, block_size=1, watermark=0)
    for sid in (0, 1, 2):
        s.add(sid, 1, 2)
    s.step()
    out = s.step()
    victims = [getattr(x, "seq", x) for x in out.preempted]
    if not all(hasattr(v, "seq_id") for v in victims):
        raise s.fail(
            f"out.preempted is {out.preempted!r}; expected the preempted Sequence objects",
            hint="out.preempted lists the preempted Sequence objects, in the order preempted",
        )
    s.expect(
        [v.seq_id for v in victims],
        [2, 1],
        "preempted",
        "in the reference sequence 0's append finds no free block, so 2, the newest, is "
        "preempted and 0 takes its block; then 1's append finds none, and 1, now the newest, "
        "is preempted",
    )


def order_probes(script: Any, step: int) -> list[Probe]:
    """The probes of ``step`` (1 or 3), each a script of ``script``'s class."""
    if step == 1:
        run, name, hint = (
            running_in_admission_order,
            "running keeps admission order",
            "running-order",
        )
    else:
        run, name, hint = (
            victims_in_preemption_order,
            "several victims, in order",
            "preempted-order",
        )
    return [Probe(name, ORDER_HINTS[hint], partial(run, script))]
