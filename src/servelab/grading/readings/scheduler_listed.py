"""A scheduler's step output checked against the state before a reading leans on it.

``out.decodes`` says whom a step decoded; the block manager's lengths say whose slot was taken.
A sequence listed twice while its KV grew by one slot, as the reference's did, was listed
twice, not decoded twice: the reading says so instead of a story about the decode loop. A
decode listed with a slot its append_slot did not return is told from a re-run that records
what append_slot returned.
"""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.scheduler import StepOutput


def listed_not_decoded(d: Difference) -> str | None:
    """A sequence in out.decodes more often than in the reference's, where yours took the
    reference's slots (lengths and tables as the reference leaves them)."""
    mine, theirs = d.mine.get("out.decodes"), d.theirs.get("out.decodes")
    if not isinstance(mine, list) or not isinstance(theirs, list):
        return None
    more = [s for s in dict.fromkeys(mine) if mine.count(s) > max(1, theirs.count(s))]
    if not more or not all(_same(d, name) for name in ("lengths", "tables")):
        return None
    sid: Any = more[0]
    return (
        f"yours listed sequence {sid} {mine.count(sid)} times in out.decodes, yet its KV grew "
        "by one slot, as the reference's did: out.decodes lists each decode once, the "
        "Decode(seq, slot) of the one append_slot each running sequence gets per step"
    )


def _same(d: Difference, name: str) -> bool:
    mine, theirs = d.mine.get(name), d.theirs.get(name)
    return mine is not None and mine == theirs


def slot_not_appended(d: Difference) -> str | None:
    """Yours, run again on a copy with each ``bm.append_slot`` recorded, lists a Decode whose
    slot is not the one that sequence's append_slot returned in the call."""
    if "out.decodes" not in d.differ:
        return None
    try:
        obj = copy.deepcopy(d.subject)
        bm = obj.bm
        given: dict[Any, list[Any]] = {}
        append = bm.append_slot

        def recorded(seq_id: Any, *rest: Any) -> Any:
            slot = append(seq_id, *rest)
            given.setdefault(seq_id, []).append(slot)
            return slot

        bm.append_slot = recorded
        out = StepOutput()
        with line_budget(LINES_PER_CALL):
            obj.decode(out)
        decodes = list(out.decodes)
    except (Exception, OutOfLines):
        return None
    for entry in decodes:
        sid = getattr(getattr(entry, "seq", None), "seq_id", None)
        slot = getattr(entry, "slot", None)
        got = given.get(sid, [])
        if len(got) == 1 and slot != got[0]:
            return (
                f"yours listed sequence {sid}'s decode with slot {slot!r}, where its "
                f"bm.append_slot returned {got[0]!r} in this call: a Decode carries the Slot "
                "that append_slot returns for it"
            )
    return None
