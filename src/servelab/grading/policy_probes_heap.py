"""Step 1 probes of ``eviction-policy`` that read what LFU keeps for step 2: the heap.

Step 1 grades the order the given ``eviction_order`` sorts out of ``count`` and ``reached``;
step 2's ``pop_victim`` reads neither, only ``heap``. A put or a hit that pushes no current
entry, or takes no fresh tick, leaves that order right and the victims of step 2 wrong, so
the first probe reads the skeleton's ``heap`` and ``reached`` after each call, as step 3
reads SIEVE's fields (a class of another design is judged by its behaviour alone). The last
two probes run past a thousand ticks: the order compares the pair (count, tick), and a single
number made of both, or a tick cut to its last digits, holds only while the ticks stay small.
One probe of step 2 reads the heap the same way, through the victims: a key hit while pinned
is found after its unpin only by the entry that unpin pushes.
"""

from __future__ import annotations

from typing import Any

from servelab.grading.about import About, Hint
from servelab.grading.policy_probes import PolicyScript, _out_of_heap_order
from servelab.weights.policies import NoVictim

__all__ = [
    "FRESH_ENTRY",
    "PAIR_ORDER",
    "UNPIN_PUSH",
    "lfu_fresh_entries",
    "lfu_fresh_entries_past_many_ticks",
    "lfu_order_past_many_ticks",
    "lfu_ties_past_many_ticks",
    "lfu_unpinned_key_found",
]

FRESH_ENTRY = Hint(
    "update_on_put and update_on_hit each take a fresh tick (later than every tick before "
    "it) and push the key's entry (count, reached, key) as the call leaves them (a hit on a "
    "pinned key pushes none): step 2's pop_victim finds a key only by that entry, and entries "
    "that tie on (count, tick) are ordered by key",
    About(("LFU.update_on_put", "LFU.update_on_hit")),
)

UNPIN_PUSH = Hint(
    "update_on_unpin makes the key a candidate again: push it back onto the heap with its "
    "count and the tick it reached it. While it was pinned its entries may have gone stale "
    "(a hit pushes none) or been popped and skipped, so that push may be the only entry "
    "pop_victim can find it by",
    About(("LFU.update_on_unpin",), (), ("pinned",)),
)

PAIR_ORDER = Hint(
    "eviction_order sorts by the pair (count, reached): the count first, the tick only "
    "among equal counts, however large the ticks grow",
    About(("LFU.eviction_order",)),
)


def _entries(heap: Any) -> list[tuple[Any, ...]]:
    try:
        return [tuple(entry) for entry in heap]
    except TypeError:
        return []


def _after(s: PolicyScript, call: str, key: str, *, long: bool = False) -> None:
    """The call just made on ``key`` left it a tick no other key of its count shares, and every
    key's current entry in the heap (extra fields between the tick and the key allowed). A
    ``long`` heap is shown by the entries of the key at its current count alone."""
    p = s.policy
    line = s.lines[-1]
    shown = f"p.count, p.reached, p.heap  # {(dict(p.count), dict(p.reached), list(p.heap))!r}"
    pair = (p.count.get(key), p.reached.get(key))
    tied = [k for k in p.count if k != key and (p.count[k], p.reached.get(k)) == pair]
    if tied:
        s.note(shown)
        raise s.fail(
            f"after {line}, {key!r} has count {pair[0]!r} at tick {pair[1]!r}, as {tied[0]!r} "
            f"does: their heap entries tie, and heapq then orders them by key, not by when "
            f"they reached their count; a {call} takes a fresh tick"
        )
    entries = [e for e in _entries(p.heap) if len(e) >= 3]
    for k in sorted(p.count, key=lambda k: (k != key, repr(k))):
        now = (p.count[k], p.reached.get(k))
        if not any(e[:2] == now and e[-1] == k for e in entries):
            if long:
                mine = [e for e in entries if e[-1] == k and e[0] == now[0]]
                s.note(f"p.count, p.reached  # {(dict(p.count), dict(p.reached))!r}")
                s.note(f"[e for e in p.heap if e[0] == {now[0]!r} and e[-1] == {k!r}]  # {mine!r}")
            else:
                s.note(shown)
            raise s.fail(
                f"after {line}, p.heap holds no entry {(*now, k)!r}, {k!r}'s count and tick "
                "now: step 2's pop_victim finds a key only by that entry and skips every "
                "other entry of the key as stale"
            )
    if _out_of_heap_order(p.heap):
        s.note(shown)
        raise s.fail(
            f"after {line}, p.heap is out of heap order (an entry sits below a larger one): "
            "step 2's heappop returns the smallest entry only while the list keeps heap order"
        )


def _skeleton(p: Any) -> bool:
    """The notebook's layout: ``count`` and ``reached`` dicts and a ``heap`` list. A policy of
    another design (the package's LFU) is judged by its behaviour alone."""
    fields = [getattr(p, name, None) for name in ("count", "reached", "heap")]
    return (
        isinstance(fields[0], dict) and isinstance(fields[1], dict) and isinstance(fields[2], list)
    )


def lfu_fresh_entries(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    calls = ("put b", "put a", "put c", "hit c", "hit b", "hit a", "hit b", "put d", "hit d")
    for call, key in (c.split() for c in calls):
        getattr(s, call)(key)
        if not _skeleton(s.policy):
            return
        _after(s, call, key)


def lfu_fresh_entries_past_many_ticks(impl: Any) -> None:
    """The entries of a put and a hit past tick 4096 (past 1000, 1024, 2048 and 4096): an
    entry whose tick is cut to its last digits or bits while ``reached`` keeps growing is
    stale the moment it is pushed, and that key is never popped again."""
    s = PolicyScript(impl, "LFU")
    s.put("a")
    if not _skeleton(s.policy):
        return
    s("for _ in range(4099): p.update_on_hit('a')")
    _after(s, "hit", "a", long=True)
    for call in ("put", "hit"):
        getattr(s, call)("b")
        _after(s, call, "b", long=True)


def lfu_order_past_many_ticks(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a")
    s.hit("a")  # 'a' reaches count 2 at tick 2
    s.put("c")
    s("for _ in range(999): p.update_on_hit('c')")
    s.put("b")  # count 1, at tick 1003
    want = ["b", "a", "c"]
    got = list(s.policy.eviction_order())
    if got == want:
        return
    s.note(f"p.eviction_order()  # {got}")
    why = (
        f"eviction_order() is {got}, expected {want}: in the reference 'b' has count 1, "
        "'a' 2 and 'c' 1000, whatever their ticks (here past 1000)"
    )
    raise s.fail(why)


def lfu_ties_past_many_ticks(impl: Any) -> None:
    """Equal counts on both sides of tick 1000 ('b' early, 'c' and 'd' at ticks 1000 and
    1001, one of them a multiple of 1000 whether the clock starts at 0 or 1): a tick cut to
    its last three digits puts a late key before 'b'."""
    s = PolicyScript(impl, "LFU")
    s.put("b")
    s.put("a")
    s("for _ in range(997): p.update_on_hit('a')")
    s.put("c")
    s.put("d")
    want = ["b", "c", "d", "a"]
    got = list(s.policy.eviction_order())
    if got == want:
        return
    s.note(f"p.eviction_order()  # {got}")
    raise s.fail(
        f"eviction_order() is {got}, expected {want}: in the reference 'b', 'c' and 'd' have "
        "count 1 and reached it in that order, 'b' first and the others past 1000 ticks; "
        "'a' has count 998"
    )


def lfu_unpinned_key_found(impl: Any) -> None:
    """A key hit while pinned has only a stale entry on the heap (the hit pushes none), so
    after its unpin only the entry the unpin pushes lets pop_victim find it. The order, read
    from ``count`` and ``reached``, is right either way: only the victims show it."""
    s = PolicyScript(impl, "LFU")
    s.put("a", "b")
    s.pin("a")
    s.hit("a")
    s.put("c")  # the clock moves on: the unpin's entry must carry the tick 'a' reached, not now
    s.unpin("a")
    s.expect_victim("b", "in the reference 'b' and 'c' have count 1, 'a' 2; 'b' came first")
    s.expect_victim("c", "in the reference 'c' has count 1, 'a' 2")
    try:
        s.expect_victim("a", "'a' is unpinned and the only key left")
    except NoVictim:
        s.lines[-1] += "  # raised NoVictim"
        raise s.fail(
            "pop_victim() raised NoVictim, expected 'a': 'a' was unpinned and is the only "
            "key left, but the heap holds no current entry for it (its hit while pinned "
            "pushed none, so only the entry update_on_unpin pushes can be current)"
        ) from None
