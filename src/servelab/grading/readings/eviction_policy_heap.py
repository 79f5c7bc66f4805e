"""Readings of an LFU call whose difference no field shows (``Difference.hidden``: the graft
of the reference's method fixes the program, and only the program is known), where the
program ends in what step 1's heap probes read (:mod:`servelab.grading.policy_probes_heap`):
``reached`` with a tick that is not fresh, ``heap`` without the key's current entry, or an
order read after a thousand ticks. Each states what that last line shows and the rule it
breaks, not a guess at how the code came to it."""

from __future__ import annotations

import ast
import heapq
import re
from typing import Any

from servelab.grading.policy_probes import _out_of_heap_order
from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["front_taken", "lfu_kept", "stale_taken"]

#: Calls that leave a heap whose list order is not its sorted order: the smallest entry
#: first, ('b', 1, 4) next, then a's newer entries, then c's. Heap order gives 'b' then 'c';
#: taking the list's first live entry each time gives 'b' then 'a' (count 3).
_FRONT = (("put", "a"), ("hit", "a"), ("hit", "a"), ("put", "b"), ("put", "c"))


def front_taken(d: Difference) -> str | None:
    """An LFU pop_victim that took the heap list's first live entry though it is not the
    smallest: shown only where yours does so again on a fresh policy of your class, after
    calls that leave a heap in heap order but not sorted (it evicts 'b' then 'a', count 3,
    where the least used is 'c'), and where its victim here is the list's first live entry."""
    heap = getattr(d.subject, "heap", None)
    count, reached = getattr(d.subject, "count", None), getattr(d.subject, "reached", None)
    pinned: Any = getattr(d.subject, "pinned", set())
    if not (isinstance(heap, list) and isinstance(count, dict) and isinstance(reached, dict)):
        return None
    live = [
        e[-1]
        for e in heap
        if isinstance(e, tuple)
        and len(e) == 3
        and e[-1] not in pinned
        and (count.get(e[-1]), reached.get(e[-1])) == tuple(e[:2])
    ]
    if not live or d.returned("mine") != repr(live[0]):
        return None
    try:
        fresh = type(d.subject)()
        for what, key in _FRONT:
            with line_budget(LINES_PER_CALL):
                fresh.update_on_put(key, 1) if what == "put" else fresh.update_on_hit(key)
        popped = []
        for _ in range(2):
            with line_budget(LINES_PER_CALL):
                popped.append(fresh.pop_victim())
    except (Exception, OutOfLines):
        return None
    if popped != ["b", "a"]:
        return None
    return (
        f"yours popped {d.returned('mine')}, the first live entry in the heap list's order, "
        f"where the reference pops {d.returned('theirs')}: a heap keeps only its "
        "smallest entry at index 0, and only while entries leave through heapq.heappop. "
        "Yours does the same on a fresh LFU after put 'a', two hits of 'a', put 'b', put "
        "'c': it evicts 'b', then 'a' (count 3) where 'c' (count 1) is the least used. Take "
        "each entry with heapq.heappop(self.heap) (list.pop(0) leaves the rest out of heap "
        "order), skipping stale and pinned ones as yours does"
    )


_CALL = re.compile(r"p\.(update_on_put|update_on_hit)\(('[^']*')(?:, \d+)?\)")
_NOTE = re.compile(r"p\.(count, p\.reached, p\.heap|eviction_order\(\))  # (.*)")


def lfu_kept(d: Difference) -> str | None:
    """The rule a put, hit or order broke, read off the last line of a step-1 heap probe."""
    lines = [line.strip() for line in d.program.splitlines() if line.strip()]
    note = _NOTE.fullmatch(lines[-1]) if lines else None
    if note is None:
        return None
    try:
        shown = ast.literal_eval(note.group(2))
    except (ValueError, SyntaxError):
        return None
    head = (
        "yours leaves every field a call shows as the reference's does, yet with the "
        f"reference's {d.method} in its place the program behaves"
    )
    if note.group(1) == "eviction_order()":
        return _order(d, head, lines, shown)
    call = _CALL.fullmatch(lines[-2]) if len(lines) > 1 else None
    if call is None or call.group(1) != d.method:
        return None
    key = ast.literal_eval(call.group(2))
    what = "put" if d.method == "update_on_put" else "hit"
    if not (isinstance(shown, tuple) and len(shown) == 3):
        return None
    count, reached, heap = shown
    if not (isinstance(count, dict) and isinstance(reached, dict) and isinstance(heap, list)):
        return None
    if key not in count or any("pin" in line or "pop_victim" in line for line in lines):
        return None  # one entry per put and hit holds only where nothing pins or pops
    pair = (count[key], reached.get(key))
    tied = sorted((k for k in count if k != key and (count[k], reached.get(k)) == pair), key=repr)
    if tied:
        return (
            f"{head}: what differs is the tick it records (`reached`, the last line): on this "
            f"{what} {key!r} reaches count {pair[0]!r} at tick {pair[1]!r}, the count and tick "
            f"{tied[0]!r} has. Each put and each hit takes a fresh tick, later than every tick "
            "before it: entries that tie on (count, tick) in step 2's heap are ordered by key, "
            "not by when their keys reached their count"
        )
    entries = [e for e in heap if isinstance(e, tuple) and len(e) >= 3]

    def current(k: Any) -> bool:
        return any(e[:2] == (count[k], reached.get(k)) and e[-1] == k for e in entries)

    if current(key):
        gone = sorted((k for k in count if not current(k)), key=repr)
        if not gone:
            return _out_of_order(head, what, key, heap)
        k = gone[0]
        return (
            f"{head}: what differs is the heap (the last line): this {what} of {key!r} took "
            f"{k!r}'s current entry {(count[k], reached.get(k), k)!r} out of it, which was "
            "there before the call. A put or a hit pushes its own key's entry and takes "
            "nothing out: a stale entry stays until step 2's pop_victim meets it"
        )
    calls = sum(1 for line in lines if (m := _CALL.fullmatch(line)) and m.group(2) == repr(key))
    held = sum(1 for e in heap if isinstance(e, tuple) and e and e[-1] == key)
    if held < calls and "remove" not in " ".join(lines):
        return (
            f"{head}: what differs is the heap (the last line): yours holds {held} "
            f"entr{'y' if held == 1 else 'ies'} for {key!r} after {calls} "
            f"update_on_put/update_on_hit call{'s' if calls != 1 else ''} on it, the "
            f"reference {calls}. A put or a hit of a key that is not pinned pushes "
            "one entry, (count, reached, key) as the call leaves them: step 2's pop_victim "
            "finds a key only by its current entry and skips every other as stale"
        )
    return (
        f"{head}: what differs is the heap entry it pushes (the heap on the last line holds "
        f"no entry for {key!r} that is (count, reached, key) as this {what} leaves them, "
        f"{(count[key], reached.get(key), key)!r}). Push that tuple, after updating count and "
        "reached: an entry of another shape or other values is stale to step 2's pop_victim, "
        "which skips it"
    )


def _out_of_order(head: str, what: str, key: Any, heap: list[Any]) -> str | None:
    if not _out_of_heap_order(heap):
        return None
    return (
        f"{head}: what differs is the heap's order (the last line): after this {what} of "
        f"{key!r} an entry sits below a larger one, and step 2's heappop returns the smallest "
        "entry only while the list keeps heap order. Change the heap with heapq.heappush "
        "alone; an entry taken out of the list (list.remove) needs heapq.heapify after it, "
        "or leave it there: pop_victim skips a stale entry"
    )


def _order(d: Difference, head: str, lines: list[str], shown: Any) -> str | None:
    if d.method != "eviction_order" or not any("range(999)" in line for line in lines):
        return None
    if not isinstance(shown, list) or sorted(map(repr, shown)) != ["'a'", "'b'", "'c'"]:
        return None  # a key left out or added: not an order of the same keys
    return (
        f"{head}: yours orders the keys by count on the checks before this one, whose ticks "
        "stay small, and here, past 1000 ticks, puts a key of a higher count first. The "
        "count decides, the tick only among equal counts, however large the ticks grow: "
        "sort by the pair (count, reached); a single number made of both holds only while "
        "the ticks stay small"
    )


def stale_taken(d: Difference) -> str | None:
    """An LFU pop_victim that took an entry whose count is its key's but whose tick is not:
    read off a copy of your heap, popped in heap order, where that entry comes before every
    live one (the pinned keys' and the other stale entries skipped) and names your victim."""
    heap = getattr(d.subject, "heap", None)
    count, reached = getattr(d.subject, "count", None), getattr(d.subject, "reached", None)
    pinned: Any = getattr(d.subject, "pinned", set())
    if not (isinstance(heap, list) and isinstance(count, dict) and isinstance(reached, dict)):
        return None
    trial = list(heap)
    try:
        while trial:
            entry = heapq.heappop(trial)
            if not isinstance(entry, tuple) or len(entry) != 3:
                return None
            c, t, key = entry
            if key in pinned or key not in count or count[key] != c:
                continue
            if reached.get(key) == t:
                return None  # a live entry comes first
            break
        else:
            return None
    except TypeError:
        return None
    if repr(key) != d.returned("mine"):
        return None
    return (
        f"yours popped {key!r} through a stale heap entry, {entry!r}: {key!r} has count "
        f"{c!r}, but reached it at tick {reached[key]!r}, not {t!r}. An entry is live only "
        "while both its count and its tick are the key's own; the reference skips this one "
        "for its tick and takes the first live entry"
    )
