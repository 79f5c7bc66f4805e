"""The scheduler probes' output lists checked against the queues before a message leans on them.

``out.prefills`` says whom a step admitted; running and waiting say whom it did. A message that
reads one list as proof of the other tells a story the state contradicts: so where the two
disagree, the message says that, and which of them is the reference's.
"""

from __future__ import annotations

from servelab.grading.about import About, Hint

LISTED = Hint(
    "`admit` lists each request it admits in out.prefills (Prefill(seq, n), appended as it "
    "moves the request to running): the requests admitted, once each, in the order admitted, "
    "and none that still waits",
    About(("admit",), ("out.prefills",)),
)
"""The hint where yours admitted the reference's requests and listed others."""

UNSURE = Hint("the requests admitted differ from the reference's", About())
"""The hint where the listing and the queues disagree and neither is the reference's."""


def listed_not_queued(
    admitted: list[int], running: list[int], waiting: list[int], want: list[int]
) -> tuple[str, Hint] | None:
    """Where a step that began with nothing running listed ``admitted`` in out.prefills while
    running holds others: what yours did, told from both (``want`` the reference's running),
    and its hint; None where the list and the queues agree."""
    if admitted == running:
        return None
    queues = f"running {running}, waiting {waiting}"
    if running == want:
        return (
            f"yours admitted {want}, as the reference does ({queues}), yet lists {admitted} in "
            "out.prefills",
            LISTED,
        )
    return f"out.prefills lists {admitted}, yet yours left {queues}", UNSURE


PREEMPTED = Hint(
    "a victim listed in out.preempted is preempted: it leaves running, gives back its blocks "
    "(bm.free_seq) and waits at the front of waiting; `preempt(victim, out)` does all three",
    About(("decode", "preempt"), ("running", "waiting", "out.preempted")),
)
"""The hint where out.preempted names the victim and the queues say it was not preempted."""


def preempted_not_queued(victim: int, running: list[int], waiting: list[int]) -> str | None:
    """Where out.preempted names ``victim`` while the queues say it still runs or does not
    wait: what the state shows; None where the queues agree with the list."""
    if victim not in running and victim in waiting:
        return None
    return (
        f"out.preempted lists sequence {victim}, as the reference's does, yet yours left "
        f"running {running}, waiting {waiting}"
    )
