"""A scheduler's step output checked against the state before a reading leans on it.

``out.decodes`` says whom a step decoded; the block manager's lengths say whose slot was taken.
A sequence listed twice while its KV grew by one slot, as the reference's did, was listed
twice, not decoded twice: the reading says so instead of a story about the decode loop.
"""

from __future__ import annotations

from typing import Any

from servelab.grading.readings.difference import Difference


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
