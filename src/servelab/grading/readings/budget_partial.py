"""A chunk's slots reserved one token at a time: a refusal midway leaves the first ones taken.

The skeleton's ``extend`` reserves a running request's new slots all or none (it asks for the
blocks before it appends). A ``schedule_running`` that calls ``bm.append_slot`` per token and
catches the ``OutOfBlocks`` of one of them keeps the slots appended before it: the request
holds more than it computed, a block may fill (and the prefix cache hash it), and a retry
appends again. Run again on a copy that counts the block manager's appends, that is a fact.
"""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import BudgetStep

__all__ = ["kept_partial"]


class _Counted:
    """The copy's ``bm.append_slot``, counting per request what went in before a refusal."""

    def __init__(self, bm: Any) -> None:
        self.bm = bm
        self.append = bm.append_slot
        self.first: dict[Any, int] = {}
        self.went: dict[Any, int] = {}
        self.found: tuple[Any, int, int, int] | None = None

    def __call__(self, seq: Any, *args: Any, **kwargs: Any) -> Any:
        if seq not in self.first:
            self.first[seq] = self.bm.seq_len(seq)
        try:
            slot = self.append(seq, *args, **kwargs)
        except OutOfBlocks:
            now = self.bm.seq_len(seq)
            if self.found is None and self.went.get(seq) and now > self.first[seq]:
                self.found = (seq, self.went[seq], self.first[seq], now)
            raise
        self.went[seq] = self.went.get(seq, 0) + 1
        return slot


def kept_partial(d: Difference) -> str | None:
    """``schedule_running`` run again on a copy whose ``bm.append_slot`` is counted: a request
    whose appends went in and then one raised, its length still grown at the raise."""
    if d.method != "schedule_running" or len(d.args) != 2 or not isinstance(d.args[1], int):
        return None
    try:
        obj = copy.deepcopy(d.subject)
        bm = obj.bm
        counted = _Counted(bm)
        bm.append_slot = counted
        with line_budget(LINES_PER_CALL):
            getattr(obj, d.method)(BudgetStep(), d.args[1])
    except (Exception, OutOfLines):
        return None
    if counted.found is None:
        return None
    sid, went, before, now = counted.found
    return (
        f"replayed on a copy, yours appended request {sid}'s tokens one by one "
        f"(bm.append_slot): {went} went in, the next raised OutOfBlocks, and "
        f"{'that one' if went == 1 else f'those {went}'} stayed (its length {before} -> {now} "
        "as the error was raised). A chunk's slots are "
        "reserved all or none: self.extend(seq, start, n) asks for the blocks first and "
        "appends nothing when they are not free"
    )
