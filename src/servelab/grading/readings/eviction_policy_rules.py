"""Readings of a policy's first diverging call that say what yours did where the call's own
fields show it: a pin or unpin that moved its key in SIEVE's queue, a hand left where it
was or set to the oldest key, a put that cleared other keys' bits, a len() below the
candidates (what it leaves out proven on a copy with the visited bits cleared), and an order
listed oldest first (proven on a copy whose sweep would list it reversed)."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import SAME, VALUE, Difference, WrittenFor
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

QUEUE_MOVED = WrittenFor((SAME,), ("queue", "visited", "pinned"))
"""A pin, unpin or hit that moved keys in SIEVE's queue (beside what it changes as it should)."""
HAND_KEPT = WrittenFor((SAME,), ("hand", "eviction order", "visited"))
"""The right victim, and the hand left where it was."""
HAND_AT_OLDEST = WrittenFor((SAME,), ("hand",))
"""A removal under the hand at the newest key that set the hand to the oldest key."""
COUNTED_FEWER = WrittenFor((VALUE,), ("len", "eviction order"))
"""len() below the reference's (the order a SIEVE trials follows len())."""


def queue_moved(d: Difference) -> str | None:
    """update_on_pin, update_on_unpin or update_on_hit changed SIEVE's queue, which the
    reference's leaves as it was: seen in the call's own fields (the queue itself, where a
    second localisation reads it). Where the call's key alone moved, to one end, that end is
    said; otherwise the queue before and after."""
    if d.method not in ("update_on_pin", "update_on_unpin", "update_on_hit"):
        return None
    if "queue" not in d.differ:
        return None
    key = d.args[0] if d.args else None
    before, mine = d.before.get("queue"), d.mine.get("queue")
    if not isinstance(before, list) or not isinstance(mine, list):
        return None
    if d.theirs.get("queue") != before or sorted(map(repr, mine)) != sorted(map(repr, before)):
        return None
    rest = [k for k in before if k != key]
    if key in before and mine == [*rest, key]:
        moved = f"yours moved {key!r} to the newest end of the queue ({before!r} -> {mine!r})"
    elif key in before and mine == [key, *rest]:
        moved = f"yours moved {key!r} to the oldest end of the queue ({before!r} -> {mine!r})"
    else:
        moved = f"yours moved keys in the queue on {d.method}({key!r}) ({before!r} -> {mine!r})"
    if d.method == "update_on_hit":
        rule = (
            "a hit only sets the visited bit and moves nothing: the key keeps its arrival "
            "place, and the bit is what spares it when the hand comes"
        )
    else:
        rule = (
            "a pin and an unpin move nothing, so the key keeps its place (and its bit) in the "
            "queue and is swept there once it is a candidate again"
        )
    return QUEUE_MOVED.show(d, f"{moved} on {d.method}({key!r}): {rule}")


def survivors_requeued(d: Difference) -> str | None:
    """A sweep of yours that moves the keys it passes to the newest end, CLOCK's way: proven
    on a new policy of your class (put 'a', 'b', 'c', hit 'a', pop_victim()) whose victim is
    the reference's, 'b', and whose queue is ['c', 'a'] where the reference's keeps ['a', 'c']."""
    try:
        with line_budget(4 * LINES_PER_CALL):
            p = type(d.subject)()
            for key in ("a", "b", "c"):
                p.update_on_put(key, 1)
            p.update_on_hit("a")
            victim = p.pop_victim()
            queue = list(p.queue)
    except (Exception, OutOfLines):
        return None
    if victim != "b" or queue != ["c", "a"]:
        return None
    return (
        f"yours evicted the right key, {d.returned('mine')}, but moves each key the sweep "
        "passes to the newest end: a new policy of yours given put 'a', 'b', 'c', hit 'a', "
        "pop_victim() evicts 'b' and leaves the queue ['c', 'a'], the reference ['a', 'c']. "
        "SIEVE clears the bit of a key it passes and leaves the key in place; the hand, set "
        "to the victim before its removal, keeps where the next sweep starts (moving keys "
        "is CLOCK's way)"
    )


def hand_kept(d: Difference) -> str | None:
    """pop_victim returned the reference's victim but left the hand where it was before the
    call, where the reference moves it: the call's own fields show both. A sweep that moves
    the keys it passes is said as that (:func:`survivors_requeued`)."""
    if "hand" not in d.differ or "hand" not in d.before:
        return None
    before, mine, theirs = d.before.get("hand"), d.mine.get("hand"), d.theirs.get("hand")
    on_victim = _hand_on_victim(d) if d.method == "pop_victim" else None
    if on_victim:
        return on_victim
    if mine != before or theirs == before:
        return None
    if d.method == "pop_victim":
        moved = HAND_KEPT.show(d, survivors_requeued(d))
        if moved:
            return moved
    return HAND_KEPT.show(
        d,
        f"yours evicted the right key, {d.returned('mine')}, but left the hand at {before!r}, "
        f"where the sweep began; the reference moves it to {theirs!r}, just after the victim: "
        "set the hand to the victim before removing it (the removal moves it on), so the next "
        "sweep starts where this one stopped",
    )


def _hand_on_victim(d: Difference) -> str | None:
    """pop_victim returned the reference's victim but left the hand on that victim, a key no
    longer in the queue: read on a copy of yours after the same call."""
    victim, mine = d.returned("mine"), d.mine.get("hand")
    if victim is None or victim != d.returned("theirs") or repr(mine) != victim:
        return None
    after = d.after()
    queue = getattr(after, "queue", None)
    if not isinstance(queue, list) or mine in queue or getattr(after, "hand", None) != mine:
        return None
    return (
        f"yours evicted the right key, {victim}, but left the hand on {victim} itself, no "
        f"longer in the queue; the reference's hand is {d.theirs.get('hand')!r}. The hand rests "
        "just after the victim: set it to the victim before update_on_remove, which moves it "
        "on as it removes the key under it; a hand on a key that is gone leaves the next sweep "
        "no place to start"
    )


def hand_at_oldest(d: Difference) -> str | None:
    """update_on_remove of the newest key under the hand that set the hand to the oldest key
    where the reference sets None: yours wrapped to a key, seen in the call's own fields."""
    key = d.args[0] if d.args else None
    queue = list(getattr(d.subject, "queue", []))
    if len(queue) < 2 or key != queue[-1] or getattr(d.subject, "hand", None) != key:
        return None
    if d.theirs.get("hand") is not None or d.mine.get("hand") != queue[0]:
        return None
    return HAND_AT_OLDEST.show(
        d,
        f"yours set the hand to {queue[0]!r}, the oldest key, after removing {key!r}, the "
        "newest key under it; past the newest the hand rests at None, which means 'start at "
        "the oldest', whichever key that is when the next sweep comes (the oldest key may be "
        "removed before then)",
    )


def len_fewer(d: Difference) -> str | None:
    """len() below the number of candidates. "Leaves out the visited keys" only where your
    len() on a copy with every visited bit cleared answers the reference's number; one short
    with no such proof is left to the kind reading (off by one)."""
    mine, theirs = d.returned("mine"), d.returned("theirs")
    if not (mine or "").isdigit() or not (theirs or "").isdigit() or int(mine) >= int(theirs):
        return None
    p = d.subject
    queue, pinned = getattr(p, "queue", None), set(getattr(p, "pinned", ()))
    visited = getattr(p, "visited", None)
    said = f"yours returned {mine}, the reference {theirs}: len() is the number of candidates"
    if isinstance(queue, list):
        said += (
            f", every resident key that is not pinned "
            f"({', '.join(repr(k) for k in queue if k not in pinned)} here)"
        )
    some = isinstance(visited, dict) and any(visited.get(k) for k in queue or ())
    if some and _len_unvisited(p) == int(theirs):
        said += (
            "; yours leaves out the visited ones (with their bits cleared, a copy of "
            f"yours counts {theirs}): a visited key is still a candidate, only spared once"
        )
    elif int(theirs) - int(mine) == 1:
        return None  # one short, no other cause proven: the kind reading says off by one
    return COUNTED_FEWER.show(d, said)


def _len_unvisited(p: Any) -> Any:
    """Your len() on a copy of the policy with every visited bit cleared."""
    try:
        with line_budget(LINES_PER_CALL):
            twin = copy.deepcopy(p)
            twin.visited = dict.fromkeys(twin.visited, False)
            return len(twin)
    except Exception:
        return None
    except OutOfLines:
        return None


def put_cleared_bits(d: Difference) -> str | None:
    """update_on_put that cleared the visited bits of keys already queued, which the
    reference's put leaves: the call's own fields show which."""
    key = d.args[0] if d.args else None
    before, mine = d.before.get("visited", []), d.mine.get("visited", [])
    if not isinstance(before, list) or not isinstance(mine, list):
        return None
    cleared = [k for k in before if k != key and k not in mine]
    if not cleared or d.theirs.get("visited", before) != before:
        return None
    return (
        f"yours cleared the visited bit of {', '.join(map(repr, cleared))} on "
        f"update_on_put({key!r}): a put appends the new key, unvisited, and leaves every "
        "other key's bit as it was (only a hit sets a bit, only the hand clears one)"
    )


def lists_queue_order(d: Difference) -> bool:
    """Your eviction_order on a copy with the hand at rest and every bit clear answers the
    candidates oldest first again: a sweep listed newest first (reversed) answers them
    reversed there, so one call's order that happens to be the queue's proves nothing."""
    p = d.subject
    queue, pinned = getattr(p, "queue", None), set(getattr(p, "pinned", ()))
    if not isinstance(queue, list):
        return False
    candidates = [k for k in queue if k not in pinned]
    try:
        with line_budget(LINES_PER_CALL):
            twin = copy.deepcopy(p)
            twin.hand = None
            twin.visited = dict.fromkeys(twin.visited, False)
            return bool(list(twin.eviction_order()) == candidates)
    except Exception:
        return False
    except OutOfLines:
        return False


def tick_not_fresh(d: Difference) -> str | None:
    """An LFU put or hit that recorded a tick no later than one a key already holds: read on
    copies of yours before and after the call (its own `reached`), only where the call
    differs in nothing but the order and the ticks. A tick equal to the key's own before a
    hit is the tick left where it was; equal to another key's, the clock not advanced;
    below one, the clock gone back (with the reference's tick beside it where a second
    localisation reads the ticks)."""
    if _policy_of(d) != "LFU" or d.method not in ("update_on_put", "update_on_hit"):
        return None
    if d.outcome_pair != SAME or not d.differ <= {"ticks", "eviction order"} or not d.args:
        return None
    key = d.args[0]
    before = getattr(d.subject, "reached", None)
    after = getattr(d.after(), "reached", None)
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    ticks = [t for t in [*before.values(), after.get(key)] if not isinstance(t, int | float)]
    if ticks or isinstance(after.get(key), bool) or not before:
        return None
    new = after[key]
    what = "put" if d.method == "update_on_put" else "hit"
    if what == "hit" and before.get(key) == new:
        return (
            f"yours left the tick of {key!r} at {new!r}, where it reached its old count, "
            f"though this hit raised its count: `reached` records when the key reached its "
            "current count, so a hit records the fresh tick it takes"
        )
    top_key = max(before, key=lambda k: (before[k], repr(k)))
    top = before[top_key]
    if new > top:
        return None
    fresh = (
        "each put and each hit takes a fresh tick, later than every tick before it, so among "
        "equal counts the key that reached its count first leaves first"
    )
    if new == top:
        return (
            f"yours recorded tick {new!r} for {key!r} on this {what}, the tick {top_key!r} "
            f"already has: advance the clock before recording it; {fresh}"
        )
    theirs = d.theirs.get("ticks", {})
    ref = theirs.get(key) if isinstance(theirs, dict) else None
    beside = f" (the reference records {ref!r})" if isinstance(ref, int) and ref > top else ""
    return (
        f"yours recorded tick {new!r} for {key!r} on this {what}{beside}, below tick {top!r} "
        f"that {top_key!r} reached its count at before it: your tick went back. A tick only "
        f"grows, however many calls come: {fresh}"
    )


def _policy_of(d: Difference) -> str:
    """The call's own prefix (``SIEVE``), or LFU where a step grades one class alone."""
    return d.policy or "LFU"
