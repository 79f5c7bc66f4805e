"""Readings of an LFU or SIEVE policy's first diverging call."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any

from servelab.grading.readings.difference import (
    MINE_RAISED,
    RESULT,
    SAME,
    VALUE,
    Difference,
    WrittenFor,
    other_error,
    read_on_one_side,
)
from servelab.grading.readings.eviction_policy_dry import dry_heap
from servelab.grading.readings.eviction_policy_hand import hand_passed, sweep_start
from servelab.grading.readings.eviction_policy_heap import front_taken, lfu_kept, stale_taken
from servelab.grading.readings.eviction_policy_kept import count_resumed, unpin_pushed_stale
from servelab.grading.readings.eviction_policy_order import order_watched
from servelab.grading.readings.eviction_policy_removed import returned_not_removed, taken
from servelab.grading.readings.eviction_policy_rules import (
    hand_at_oldest,
    hand_kept,
    len_fewer,
    lists_queue_order,
    put_cleared_bits,
    queue_moved,
    tick_not_fresh,
)
from servelab.grading.readings.eviction_policy_sweep import hand_key_unlooked, wrap_cleared
from servelab.grading.readings.eviction_policy_twice import order_twice
from servelab.grading.readings.kinds import count_moved
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

# The difference each reading below was written for (see WrittenFor): a reading is shown only
# when the first diverging call differs that way and in nothing else.
ORDERED = WrittenFor((VALUE,), ("eviction order",))
"""Another order answered by a call that only reads (the field shows what it answers)."""
COUNTED_MORE = WrittenFor((VALUE,), ("eviction order",), above=(RESULT, "len"))
"""len() above the reference's: more candidates than there are (SIEVE's order trials as many
pops as len() says)."""
POPPED = WrittenFor((VALUE,), ("eviction order", "counts", "len", "visited", "hand"))
"""Another victim, and what popping it changed."""
KEPT = WrittenFor((SAME,), ("eviction order", "counts", "len", "visited", "hand"))
SWEPT = WrittenFor((SAME,), ("visited", "hand", "eviction order"))
"""The right victim, the bits or the hand left otherwise."""
REORDERED = WrittenFor((SAME,), ("eviction order",))
UNPINNED = WrittenFor((SAME,), ("visited", "eviction order", "hand"))
"""A key unpinned somewhere else than where it was (the hand follows the keys it passes)."""
HAND_MOVED = WrittenFor((SAME,), ("hand", "eviction order"))
FORGOTTEN = WrittenFor((SAME,), ("visited", "pinned", "eviction order", "len", "counts"))
PIN_IGNORED = WrittenFor((SAME,), ("eviction order", "pinned"), above=("len",))
VISITED = WrittenFor((SAME,), ("visited", "eviction order"))
HIT_COUNTED = WrittenFor((SAME,), ("counts", "eviction order"))
HIT_UNDERCOUNTED = WrittenFor((SAME,), ("eviction order",), below=("counts",))
BACK_AS_CANDIDATE = WrittenFor((SAME,), ("eviction order",), below=("len",))
RAISED_EARLY = WrittenFor((MINE_RAISED,), ("eviction order", "counts", "len", "visited", "hand"))
"""A pop that raised where the reference evicts: nothing popped, what the victim's going
changes on the reference's side."""
UNPIN_COUNTED = WrittenFor((SAME,), ("counts", "eviction order"))
"""An unpin that changed the key's count (the order follows the count)."""
OTHERS_UNPINNED = WrittenFor((SAME,), ("eviction order", "pinned", "len"))
"""A pin that took other keys out of `pinned` (the key itself may be in it as it should)."""
LEFT_PINNED = WrittenFor((SAME,), ("eviction order", "pinned"), below=("len",))
"""An unpin that left its key among the pinned ones: no candidate again."""


def _names(shown: str | None) -> list[str]:
    """``"['a', 'b']"`` as ``['a', 'b']`` (keys the programs use are plain strings)."""
    if not shown or not shown.startswith("["):
        return []
    return [part.strip().strip("'\"") for part in shown.strip("[]").split(",") if part.strip()]


def _lfu_order(d: Difference) -> str | None:
    mine, theirs = _names(d.returned("mine")), _names(d.returned("theirs"))
    first = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b), None)
    count = getattr(d.subject, "count", None)
    rule = (
        "among equal counts, the key that reached its count first leaves first (tie-break: "
        "first in, first out)"
    )
    if first is None or not isinstance(count, dict):
        return None
    a, b = mine[first], theirs[first]
    if count.get(a) != count.get(b):
        return (
            f"yours puts {a!r} before {b!r}, which has a smaller count: the least used key "
            "leaves first"
        )
    if sorted(mine[first:]) == mine[first:] and mine[first:] != theirs[first:] and _ties_by_key(d):
        return f"yours orders keys of equal count by key; {rule}"
    return f"yours puts {a!r} before {b!r}, both with count {count.get(a)}; {rule}"


def _trial(make: Callable[[], Any], run: Callable[[Any], Any]) -> Any:
    """``run(make())`` under the line budget of one call; None when it raises or runs long."""
    try:
        with line_budget(LINES_PER_CALL):
            return run(make())
    except Exception:
        return None
    except OutOfLines:
        return None


def _ties_by_key(d: Difference) -> bool:
    """Your class, new, given 'b' then 'a' (equal counts): ordered by key it lists 'a' first,
    where first in, first out lists 'b' first. (Keys put in key order tie the same either way:
    only this order tells a key sort from another tie-break, such as the order of the puts.)"""

    def run(p: Any) -> Any:
        p.update_on_put("b", 1)
        p.update_on_put("a", 1)
        return list(p.eviction_order())

    return bool(_trial(type(d.subject), run) == ["a", "b"])


def _sweeps_newest_first(d: Difference) -> bool:
    """Your pop_victim on a copy with every bit clear and the hand at rest (None): sweeping
    from the oldest it evicts the oldest candidate; it evicted the newest instead."""
    queue, pinned = list(getattr(d.subject, "queue", [])), set(getattr(d.subject, "pinned", ()))
    candidates = [k for k in queue if k not in pinned]
    if len(candidates) < 2:
        return False

    def make() -> Any:
        p = copy.deepcopy(d.subject)
        p.visited = {k: False for k in p.visited}
        p.hand = None
        return p

    return bool(_trial(make, lambda p: p.pop_victim()) == candidates[-1])


def _starts_at_newest(d: Difference) -> bool:
    """With the hand at rest (None) yours began at the newest key: on copies with every bit
    clear, yours evicts the newest candidate with the hand at None and the oldest with the
    hand set on the oldest key; with the oldest visited too, the next older one (its sweep
    goes towards newer keys once it has a start)."""
    queue, pinned = list(getattr(d.subject, "queue", [])), set(getattr(d.subject, "pinned", ()))
    candidates = [k for k in queue if k not in pinned]
    if len(candidates) < 3 or getattr(d.subject, "hand", 0) is not None:
        return False

    def make(hand: Any, seen: Any = None) -> Callable[[], Any]:
        def fresh() -> Any:
            p = copy.deepcopy(d.subject)
            p.visited = {k: k == seen for k in p.visited}
            p.hand = hand
            return p

        return fresh

    def pop(p: Any) -> Any:
        return p.pop_victim()

    return bool(
        _trial(make(None), pop) == candidates[-1]
        and _trial(make(candidates[0]), pop) == candidates[0]
        and _trial(make(candidates[0], candidates[0]), pop) == candidates[1]
    )


def _sieve_victim(d: Difference) -> str | None:
    p = d.subject
    queue, visited = list(getattr(p, "queue", [])), getattr(p, "visited", {})
    pinned = set(getattr(p, "pinned", ()))
    mine, theirs = d.returned("mine"), d.returned("theirs")
    candidates = [k for k in queue if k not in pinned]
    swept, took = wrap_cleared(d) or hand_key_unlooked(d), taken(d)
    if swept:
        return swept
    if candidates and all(visited.get(k) for k in candidates):
        # "not simply the oldest" only where yours took the oldest: another victim says less
        oldest = ", not simply the oldest" if repr(candidates[0]) == mine else ""
        return (
            f"every key was visited: the hand makes a full lap, clearing each bit, and evicts "
            f"the first key it comes back to ({theirs} here){oldest}"
        )
    chosen = next((k for k in candidates if repr(k) == mine), None)
    spared = next((k for k in candidates if repr(k) == theirs), None)
    if (
        chosen is not None
        and spared is not None
        and visited.get(chosen)
        and not visited.get(spared)
    ):
        return (
            f"yours {took} {mine}, whose visited bit was set, where {theirs} had none: the "
            "hand clears a visited key's bit and moves on to the next newer key, so a hit "
            "protects a key once; it evicts the first unvisited key it reaches"
        )
    if _starts_at_newest(d):
        return (
            f"yours {took} {mine}, the reference {theirs}: with the hand at rest (None) yours "
            "starts its sweep at the newest key; on copies with every bit clear it evicts the "
            "newest key then, and the oldest once the hand is set on the oldest. None means "
            "'start at the oldest key'; from there the hand moves to newer keys"
        )
    # the direction is stated only where yours, asked again from the oldest with no bit set,
    # evicts the newest key: a sweep that goes the right way one key too far takes a newer
    # key here as well
    way = " (the wrong way is newest first)" if _sweeps_newest_first(d) else ""
    return (
        f"yours {took} {mine}, the reference {theirs}: the hand moves from older to newer keys"
        f"{way}, clears each visited bit it passes and evicts the first unvisited key; the "
        "next sweep starts where it stopped"
    )


def _owner(who: str, name: str) -> str:
    """``"LFU's len()"``: a method named with its policy, or alone where there is none."""
    return f"{who}'s {name}" if who else name


def _policy(d: Difference) -> str:
    """The policy the call is on: its prefix (``SIEVE.pop_victim``), or LFU where the step
    grades one class alone (steps 1 and 2 build LFU before SIEVE joins it)."""
    return d.policy or "LFU"


def _len(d: Difference) -> str | None:
    """len() is the number of candidates: one per resident key that is not pinned. (Worded
    for both policies: "count" is LFU's word for a key's hits.)"""
    owner = _owner(_policy(d), "len()")
    mine = d.returned("mine")
    counts = d.before.get("counts")  # LFU's field: a SIEVE state has none
    resident = len(counts) if isinstance(counts, dict) else None
    if mine is not None and mine.isdigit() and resident is not None and int(mine) > resident:
        return (
            f"yours returned {mine}, more than the {resident} keys resident: {owner} is the "
            "number of candidates, one per key; does yours return the size of a structure "
            "that keeps stale copies (a heap keeps the old entry of a key after each hit or "
            "pin)?"
        )
    pinned = d.before.get("pinned")
    if not pinned or not isinstance(pinned, list):
        return None  # nothing pinned: the rule about pins is not the one broken
    theirs = d.returned("theirs")
    if not (mine or "").isdigit() or not (theirs or "").isdigit():
        return None
    if int(mine) != int(theirs) + len(pinned):
        return None  # not one more per pinned key: the pins are not what yours counted
    return (
        f"yours returned {mine}: {owner} is the number of candidates only, and a pinned key "
        "is not one until update_on_unpin"
    )


def _lost_pinned_bits(d: Difference) -> list[str]:
    """Pinned keys visited before the call that only the reference keeps visited after it."""
    pinned = list(d.before.get("pinned", []))
    before, mine = d.before.get("visited", []), d.mine.get("visited", [])
    theirs = d.theirs.get("visited", before)
    return [k for k in pinned if k in before and k in theirs and k not in mine]


def _sweep_past_hand(d: Difference) -> str | None:
    """Queue, bits and hand as the reference leaves them, yet the next victim yours would
    choose (your eviction order's first) is not the unvisited key under the hand."""
    if d.differ != {"eviction order"}:
        return None
    hand = d.mine.get("hand")
    mine, theirs = _names(shown_order(d.mine)), _names(shown_order(d.theirs))
    visited = d.mine.get("visited", [])
    if not mine or not theirs or hand is None or theirs[0] != hand or mine[0] == hand:
        return None
    if not isinstance(visited, list) or hand in visited:
        return None
    return (
        f"yours evicted the right key and left every field but the eviction order as the "
        f"reference does, the hand on {hand!r}, yet your next sweep would evict {mine[0]!r}, not "
        f"{hand!r}, the unvisited key under the hand: a sweep starts at the hand, where it stopped "
        f"last time (the key under it is the next candidate){sweep_start(d, hand, mine[0])}"
    )


def _hit_while_pinned(program: str) -> str | None:
    """The first key ``program`` hits while it is pinned (None: no such hit), read from its
    lines in order."""
    pinned: set[str] = set()
    for verb, key in re.findall(r"\.update_on_(pin|unpin|hit|remove)\(\s*'([^']*)'", program):
        if verb == "hit" and key in pinned:
            return str(key)
        if verb == "pin":
            pinned.add(key)
        elif verb in ("unpin", "remove"):
            pinned.discard(key)
    return None


def eviction_policy_reading(d: Difference) -> str | None:
    """The rule an LFU or SIEVE policy's first diverging call breaks."""
    m, who = d.method, _policy(d)
    if d.hidden:
        if m == "update_on_unpin" and who == "LFU":
            stale = unpin_pushed_stale(d.program, d.impl) if d.impl is not None else None
            return stale or (
                "yours leaves every field a call shows as the reference's does, yet it differs "
                "in what it keeps for pop_victim: update_on_unpin makes the key a candidate "
                "again, so push it back onto the heap with its count and the time it reached it"
            )
        hit_pinned = _hit_while_pinned(d.program)
        if m == "update_on_hit" and who == "LFU" and hit_pinned is not None:
            return (
                "yours leaves every field a call shows (the counts) as the reference's does, "
                "yet with the reference's update_on_hit in its place the program behaves: "
                "what differs is what it keeps for later. On every hit the reference advances "
                "the clock and records that new tick as the time the key reached its count "
                "(`reached`); it pushes the key's entry (count, reached, key) only for a key "
                f"that is not pinned. {hit_pinned!r} was hit while pinned here: no entry then, "
                "and update_on_unpin pushes it with that tick"
            )
        kept = lfu_kept(d) if who == "LFU" else None
        if kept:
            return kept
        if m in ("update_on_hit", "update_on_put") and who == "LFU":
            count = "its count after the hit" if m == "update_on_hit" else "count 1"
            return (
                f"yours leaves every field a call shows (the counts) as the reference's does, "
                f"yet with the reference's {m} in its place the program behaves: what differs "
                "is what it keeps for later, the tick it records (`reached`) or the heap "
                "entry it pushes for pop_victim. Push the key's current entry, "
                f"({count}, the time it reached it, key), after updating count and reached: "
                "an entry that no longer matches them is stale and pop_victim skips it. Does "
                "yours push before it updates them, or with another count or tick than theirs?"
            )
        unlooked = hand_key_unlooked(d) if who == "SIEVE" else None
        if unlooked:
            return unlooked
        if m == "eviction_order" and who == "SIEVE":  # a fact a replay proves, or nothing
            return order_watched(d.program, d.impl) if d.impl is not None else None
        if m == "__len__":
            return (
                "yours leaves every field a call shows as the reference's does, yet with the "
                f"reference's len() in its place the program behaves: {_owner(who, 'len()')} is "
                "the number of candidates now, one per resident key that is not pinned; a key "
                "evicted or removed is no longer one"
            )
        if m == "eviction_order":  # LFU's sorts its candidates; it pops nothing
            return (
                "yours leaves every field a call shows as the reference's does, yet with the "
                "reference's eviction_order in its place the program behaves: eviction_order "
                "only reads, so it must leave the policy as it was, and it lists the candidates "
                "alone (resident keys that are not pinned), by count, then by the time each "
                "reached it, a number: does yours list a pinned key, break ties another way, "
                "or pop from the policy's heap as it reads?"
            )
        return None
    gone = returned_not_removed(d) if m == "pop_victim" else None
    if gone:  # the key removed is not the key returned: read before any "yours evicted"
        return (KEPT if d.same_outcome else POPPED).show(d, gone)
    tick = tick_not_fresh(d) or (count_resumed(d) if who == "LFU" else None)
    if tick:
        return tick
    other = dry_heap(d) or other_error(d)
    if other:
        return other
    if m == "__len__" and d.outcome_pair == MINE_RAISED:
        return (
            f"yours raised {d.error('mine')} where the reference returns "
            f"{d.returned('theirs')}: {_owner(who, 'len()')} is the number of candidates, one "
            "per resident key that is not pinned, and it only reads"
        )
    if m == "__len__" and not d.same_outcome:
        return COUNTED_MORE.show(d, _len(d)) or len_fewer(d)
    twice = order_twice(d, who, _names) if m == "eviction_order" and not d.same_outcome else None
    if twice:
        return ORDERED.show(d, twice)
    short = _order_short(d) if m == "eviction_order" and not d.same_outcome else None
    if short:
        return ORDERED.show(d, short)
    if m == "pop_victim" and d.outcome_pair == MINE_RAISED:
        return RAISED_EARLY.show(d, _raised_with_candidates(d, who))
    if m == "eviction_order" and who == "LFU" and not d.same_outcome:
        return ORDERED.show(d, _lfu_order(d))
    if m == "eviction_order" and who == "SIEVE" and not d.same_outcome:
        return ORDERED.show(d, _sieve_queue_order(d))
    if m == "pop_victim" and who == "LFU" and not d.same_outcome:
        order = _names(shown_order(d.before))
        if order and d.returned("mine") != repr(order[0]):
            return POPPED.show(
                d,
                front_taken(d)
                or stale_taken(d)
                or f"yours popped {d.returned('mine')} though eviction_order() starts with "
                f"{order[0]!r}: pop the least used key, and skip each stale heap entry (one "
                "whose count or tick is no longer the key's)",
            )
    if m == "pop_victim" and who == "SIEVE" and not d.same_outcome:
        return POPPED.show(d, _sieve_victim(d))
    victim = d.returned("mine")
    if m == "pop_victim" and d.same_outcome and d.differ:
        if victim in map(repr, _names(shown_order(d.mine))):
            return KEPT.show(
                d,
                f"yours returned the right victim, {victim}, but kept it: pop_victim removes "
                "the victim, which leaves the candidates and is forgotten",
            )
        lost = _lost_pinned_bits(d)
        if who == "SIEVE" and lost:
            return SWEPT.show(
                d,
                f"yours evicted the right key, {victim}, but cleared the visited bit of pinned "
                f"{', '.join(map(repr, lost))}: the hand passes a pinned key without touching "
                "its bit, so it keeps the hit it took before the pin",
            )
        past = (hand_kept(d) or _sweep_past_hand(d)) if who == "SIEVE" else None
        if past:
            return past
        unread = any(read_on_one_side(d, name) for name in d.differ)
        if who == "SIEVE" and not unread:  # name what differs: the queue may be the same
            left = " and ".join(f"`{name}`" for name in sorted(d.differ))
            return SWEPT.show(
                d,
                f"yours evicted the right key, {victim}, but left {left} unlike the "
                "reference's: the sweep starts where the hand rests (at the oldest key while "
                "it is None), clears the visited bit of each key it passes, and rests just "
                "after the victim, where the next sweep starts",
            )
    key = d.args[0] if d.args else None
    in_queue = queue_moved(d)
    if in_queue:
        return in_queue
    if m == "update_on_unpin" and who == "LFU" and "counts" in d.differ:
        counts = d.mine.get("counts", {})
        return UNPIN_COUNTED.show(
            d,
            f"yours changed the count of {key!r} to {counts.get(key)} on update_on_unpin: a pin "
            "and an unpin are not uses, so the key comes back with the count and the tick it "
            "had, to its old place",
        )
    if m == "update_on_unpin" and key in _pinned(d.mine) and key not in _pinned(d.theirs):
        return LEFT_PINNED.show(
            d,
            f"yours left {key!r} in `pinned` after update_on_unpin({key!r}): an unpin takes the "
            "key out of the pinned ones, so it is a candidate again"
            + (" (and pushes its entry back onto the heap)" if who == "LFU" else ""),
        )
    if m == "update_on_unpin" and "eviction order" in d.differ:
        kept = "its count and the time it reached it" if who == "LFU" else "its visited bit"
        return (UNPINNED if who == "SIEVE" else REORDERED).show(
            d,
            f"on update_on_unpin a key comes back with its history ({kept}), so it returns "
            "to its old place",
        )
    if m == "update_on_put" and who == "SIEVE" and "eviction order" in d.differ:
        clock = " (inserting at the hand is CLOCK, not SIEVE)" if _put_at_hand(d) else ""
        return REORDERED.show(
            d,
            "a new key joins the newest end of SIEVE's queue, unvisited, whatever the hand's "
            f"position{clock}",
        )
    if m == "update_on_remove" and who == "SIEVE" and "hand" in d.differ:
        hand = getattr(d.subject, "hand", None)
        queue = list(getattr(d.subject, "queue", []))
        if key != hand:
            return HAND_MOVED.show(
                d,
                f"yours moved the hand, but {key!r} was not under it: the hand moves only when "
                "the cache removes the key under it",
            )
        if queue and key == queue[-1]:
            return hand_at_oldest(d) or HAND_MOVED.show(
                d,
                f"{key!r} was under the hand and the newest key: the hand moves past the "
                "newest, so it must wrap around to the oldest (hand None)",
            )
    under = d.args[:1] == (getattr(d.subject, "hand", None),)
    moved = d.differ & {"eviction order", "hand"}
    if m == "update_on_remove" and who == "SIEVE" and under and moved:
        return hand_passed(d) or HAND_MOVED.show(
            d,
            "when the cache removes the key under the hand, the hand moves on to the next "
            "newer key (not the next older key, nor back to the oldest), exactly as after an "
            "eviction",
        )
    if m == "update_on_remove" and d.differ:
        history = "its visited bit, its place in the queue" if who == "SIEVE" else "its count, tick"
        return FORGOTTEN.show(
            d,
            f"a removed key is forgotten: {history} and pin all go with it, so a key put "
            "again never comes back pinned",
        )
    if m == "update_on_pin" and who == "SIEVE" and "visited" in d.differ:
        bit = _pin_moved_bit(d)
        if bit:
            return bit
    if m == "update_on_pin" and d.differ:
        key = d.args[0] if d.args else None
        dropped = [k for k in _pinned(d.before) if k != key and k not in _pinned(d.mine)]
        if dropped and all(k in _pinned(d.theirs) for k in dropped):
            return OTHERS_UNPINNED.show(
                d,
                f"yours took {', '.join(map(repr, dropped))} out of `pinned` on "
                f"update_on_pin({key!r}), though no update_on_unpin came for it: a pin adds its "
                "key to the pinned ones, and the keys pinned before stay pinned",
            )
        if key in _names(shown_order(d.mine)):
            return PIN_IGNORED.show(
                d,
                f"yours ignores the pin: {key!r} is still in the eviction order after "
                f"update_on_pin({key!r}), as if candidates ignore pins; a pinned key is not a "
                "candidate until update_on_unpin",
            )
        was_in = key in _names(shown_order(d.before))
        if was_in and not d.differ & {"eviction order", "len"}:  # the order right, no pin kept
            return PIN_IGNORED.show(
                d,
                f"yours took {key!r} out of the order as the reference does, but did not add "
                "it to `pinned`: update_on_pin records the pin there, where len() and "
                "update_on_unpin read it",
            )
        return PIN_IGNORED.show(
            d,
            f"a pinned key is not a candidate: update_on_pin takes it out of "
            f"{_owner(who, 'eviction order')}",
        )
    if m == "update_on_put" and who == "SIEVE" and "visited" in d.differ:
        new = "new entries arrive unvisited: only a hit sets the visited bit"
        return VISITED.show(d, put_cleared_bits(d) or new)
    if m == "update_on_hit" and d.differ:
        if who == "SIEVE":
            key = d.args[0] if d.args else None
            unmarked = key in d.theirs.get("visited", ()) and key not in d.mine.get("visited", ())
            if key in getattr(d.subject, "pinned", ()) and unmarked:
                return VISITED.show(
                    d,
                    f"yours did not mark {key!r} visited while pinned: a hit on a pinned key "
                    "sets its visited bit too, and it keeps it on update_on_unpin",
                )
            return VISITED.show(d, "on a hit, set the key's visited bit (and move nothing)")
        if "counts" in d.differ:
            key = d.args[0] if d.args else None
            mine = d.mine.get("counts", {}).get(key)
            theirs = d.theirs.get("counts", {}).get(key)
            if key in getattr(d.subject, "pinned", ()):
                return HIT_UNDERCOUNTED.show(
                    d,
                    f"yours did not count a hit on {key!r} while pinned: a hit counts while "
                    "pinned too, and the key returns with that count on update_on_unpin",
                )
            hits = _count_after_hits(d, key, 3)
            if mine == 1 and hits == 1:
                return HIT_UNDERCOUNTED.show(
                    d,
                    f"yours left {key!r} at count 1 after a hit, as if it never counts hits: "
                    "every hit adds 1",
                )
            capped = isinstance(mine, int) and isinstance(theirs, int) and mine < theirs
            if capped and hits == mine:  # three hits more leave it there too: a cap
                return HIT_UNDERCOUNTED.show(
                    d,
                    f"yours left {key!r} at count {mine} where the reference counts {theirs}: "
                    "a count is not capped, every hit adds 1",
                )
        rule = "a hit adds 1 to the key's count and records when it reached it"
        hit_moved = count_moved(d, "counts", d.args[0]) if d.args else None
        return HIT_COUNTED.show(d, f"{hit_moved}: {rule}" if hit_moved else rule)
    if m == "update_on_unpin" and who == "SIEVE" and d.differ:
        return UNPINNED.show(
            d,
            "a pinned key keeps its history: on update_on_unpin its visited bit and its place "
            "in the queue are as they were",
        )
    if m == "update_on_unpin" and d.differ:
        return BACK_AS_CANDIDATE.show(
            d,
            "update_on_unpin makes the key a candidate again: push it back onto the heap with "
            "its count and the time it reached it",
        )
    return None


def _order_short(d: Difference) -> str | None:
    """An order that stops short: the reference's first keys, as many as yours, and fewer
    than len() says there are candidates."""
    mine, theirs = _names(d.returned("mine")), _names(d.returned("theirs"))
    n = d.before.get("len")
    if not isinstance(n, int) or len(theirs) != n or not len(mine) < n:
        return None
    if mine != theirs[: len(mine)] or d.returned("mine") == "None":
        return None
    return (
        f"yours listed {len(mine)} of the {n} candidates (len() is {n}), in the right order "
        f"as far as it goes: the order lists every candidate, next victim first; does yours "
        f"stop a key short?"
    )


def _raised_with_candidates(d: Difference, who: str) -> str | None:
    """pop_victim raised NoVictim though len() counts candidates and the reference evicts
    one (another error is the learner's own slip: its line says more than this rule)."""
    n = d.before.get("len")
    if not isinstance(n, int) or n <= 0 or not d.error("mine").startswith("NoVictim"):
        return None
    go_on = (
        "a popped heap entry that is stale or pinned is skipped and the pop goes on"
        if who == "LFU"
        else "the sweep passes pinned and visited keys and goes on"
    )
    return (
        f"yours raised {d.error('mine')} with {n} candidate(s) left (len() is {n}); the "
        f"reference evicts {d.returned('theirs')}: NoVictim is only for when every resident "
        f"key is pinned; {go_on}"
    )


def _count_after_hits(d: Difference, key: Any, n: int) -> Any:
    """The count of ``key`` on a copy of your policy after ``n`` calls of your update_on_hit
    (None when it cannot run): one that never counts hits leaves it at 1, a cap at the cap."""

    def run(p: Any) -> Any:
        for _ in range(n):
            p.update_on_hit(key)
        return dict(p.count).get(key)

    return _trial(lambda: copy.deepcopy(d.subject), run)


def _put_at_hand(d: Difference) -> bool:
    """Whether yours, after this put, holds the new key just before the hand's key (CLOCK's
    place for it), read from a copy of the policy as yours leaves it."""
    hand, key = getattr(d.subject, "hand", None), d.args[0] if d.args else None
    after = d.after()
    queue = list(getattr(after, "queue", []))
    if hand is None or key not in queue or hand not in queue:
        return False
    return queue.index(key) + 1 == queue.index(hand)


def _pinned(fields: Mapping[str, Any]) -> list[Any]:
    pinned = fields.get("pinned", [])
    return list(pinned) if isinstance(pinned, list) else []


def _sieve_queue_order(d: Difference) -> str | None:
    """Yours answered the unpinned keys in queue order, oldest first, where the hand or the
    visited bits order them otherwise."""
    p = d.subject
    queue, pinned = list(getattr(p, "queue", [])), set(getattr(p, "pinned", ()))
    mine = _names(d.returned("mine"))
    if not mine or mine != [k for k in queue if k not in pinned] or not lists_queue_order(d):
        return None
    return (
        f"yours listed the candidates in queue order, oldest first ({d.returned('mine')}); "
        "SIEVE's order is the order its sweeps would evict them: from the hand, passing (and "
        "clearing) visited keys once, wrapping past the newest. Trial pop_victim on a deep copy"
    )


def shown_order(fields: Mapping[str, Any]) -> str | None:
    order = fields.get("eviction order")
    return repr(list(order)) if isinstance(order, list) else None


PIN_BIT = WrittenFor((SAME,), ("visited", "pinned", "eviction order", "len"))
"""A pin that changed a visited bit (beside what a pin changes)."""


def _pin_moved_bit(d: Difference) -> str | None:
    """update_on_pin changed the visited bits, which the reference's pin never touches: a pin
    leaves every bit as it was, whatever made yours change one."""
    key = d.args[0] if d.args else None
    before, mine = d.before.get("visited", []), d.mine.get("visited", [])
    if not isinstance(before, list) or not isinstance(mine, list):
        return None
    if d.theirs.get("visited", before) != before:
        return None
    cleared = [k for k in before if k not in mine]
    what = (
        f"cleared the visited bit of {', '.join(map(repr, cleared))}"
        if cleared
        else f"set the visited bit of {', '.join(repr(k) for k in mine if k not in before)}"
    )
    return PIN_BIT.show(
        d,
        f"yours {what} on update_on_pin({key!r}): a pin leaves the visited bits alone, so the "
        "key keeps the hit it took before the pin, through the pin and the unpin; "
        "update_on_pin only adds the key to the pinned ones",
    )
