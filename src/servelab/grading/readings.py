"""Reading a difference as the rule it breaks: the hint for a mistake nobody listed.

Localisation (:mod:`servelab.grading.localise`) finds the first call into the learner's method
whose outcome differs from the checkpoint's, from the same state and arguments. What differs
(which fields, which way, what was returned or raised) says which rule of that method broke,
whatever the code behind it: ``_evict`` leaving ``used`` where the reference lowers it breaks
"subtract the victim's size", in any implementation. A reading states what yours did there and
the rule, in the notebook's words. It is written for one method and one kind of difference and
shown only when that method differs that way, never as a guess from which check failed.

A reading describes the observed call and states a rule; it claims no cause ("behaves exactly
like one that ..." stays the catalogue's, and only when earned). Where no reading fits, the
report keeps pointing at the place (:func:`servelab.grading.localise.place_hint`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from servelab.grading.localise import Divergence
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["READERS", "Difference", "reading"]


@dataclass(frozen=True)
class Difference:
    """The first diverging call, as a reading sees it."""

    method: str
    """The method's own name (``pop_victim``), without a policy prefix."""
    policy: str
    """``"LFU"`` or ``"SIEVE"`` for a policy; empty otherwise."""
    args: tuple[Any, ...]
    before: Mapping[str, Any]
    mine: Mapping[str, Any]
    theirs: Mapping[str, Any]
    my_outcome: str
    their_outcome: str
    subject: Any
    program: str = ""
    """The failing program, for a fact about what came before the call (a key pinned once)."""

    def probe(self, method: str, *args: Any) -> tuple[str, Any]:
        """Your ``method`` called on a fresh copy of the object as it was before the call:
        ("returned", value) or ("raised", error name); ("failed", None) when it cannot run."""
        try:
            obj = copy.deepcopy(self.subject)
            with line_budget(LINES_PER_CALL):
                return ("returned", getattr(obj, method)(*args))
        except Exception as exc:
            return ("raised", type(exc).__name__)
        except OutOfLines:
            return ("failed", None)

    @property
    def differ(self) -> frozenset[str]:
        """The fields whose value after the call differs between yours and the reference."""
        names = set(self.mine) | set(self.theirs)
        return frozenset(n for n in names if self.mine.get(n) != self.theirs.get(n))

    @property
    def i_raised(self) -> bool:
        return self.my_outcome.startswith("raised")

    @property
    def they_raised(self) -> bool:
        return self.their_outcome.startswith("raised")

    @property
    def same_outcome(self) -> bool:
        return self.my_outcome == self.their_outcome

    def returned(self, side: str) -> Any:
        """The value a side returned, as shown (``"'a'"``), or None when it raised."""
        outcome = self.my_outcome if side == "mine" else self.their_outcome
        return outcome[len("returned ") :] if outcome.startswith("returned ") else None

    def error(self, side: str) -> str:
        outcome = self.my_outcome if side == "mine" else self.their_outcome
        return outcome[len("raised ") :] if outcome.startswith("raised ") else ""

    def grew(self, name: str) -> bool:
        """Whether yours left field ``name`` (a number) above the reference's."""
        a, b = self.mine.get(name), self.theirs.get(name)
        return isinstance(a, int) and isinstance(b, int) and a > b

    def shrank(self, name: str) -> bool:
        a, b = self.mine.get(name), self.theirs.get(name)
        return isinstance(a, int) and isinstance(b, int) and a < b


def _call(subject: Any, name: str, *args: Any) -> Any:
    """``subject.name(*args)`` on a copy's skeleton API, or None when that fails."""
    try:
        return getattr(subject, name)(*args)
    except Exception:
        return None


Reader = Callable[[Difference], "str | None"]


# ----------------------------------------------------------------------------- weight-cache


def _cache_room(d: Difference) -> tuple[int, int] | None:
    """(capacity, bytes of pinned entries, each counted once) before the call, or None."""
    cache = d.subject
    capacity = getattr(cache, "capacity", None)
    if not isinstance(capacity, int):
        return None
    pinned = 0
    for key in d.before.get("pins", {}):
        size = _call(cache, "size_of", key)
        if isinstance(size, int) and key in d.before.get("resident", ()):
            pinned += size
    return capacity, pinned


def _weight_cache_victim(d: Difference) -> str | None:
    mine, theirs = d.returned("mine"), d.returned("theirs")
    resident = list(d.before.get("resident", ()))
    pins = d.before.get("pins", {})
    chosen = next((k for k in resident if repr(k) == mine), None)
    skipped = next((k for k in resident if repr(k) == theirs), None)
    if chosen is None:
        return None
    rule = "the victim is the least recently used unpinned entry: the first key of `keys()` "
    rule += f"that is not pinned ({theirs} here)"
    if chosen in pins:
        return f"yours chose {mine}, a pinned entry: skip pinned entries; {rule}"
    if skipped is not None and f"pin({skipped!r})" in d.program:
        return (
            f"yours skipped {theirs}, whose pins were all released: an entry is evictable "
            f"again after its last unpin; {rule}"
        )
    what = []
    if resident and chosen == resident[-1]:
        what.append("the most recently used")
    sizes = {k: _call(d.subject, "size_of", k) for k in resident if k not in pins}
    numbers = [s for s in sizes.values() if isinstance(s, int)]
    if numbers and sizes.get(chosen) == max(numbers) and len(numbers) > 1:
        what.append("the largest")
    if what:
        return f"yours chose {mine}, {' and '.join(what)} entry; {rule}"
    return f"yours chose {mine}; {rule}"


def _weight_cache_admit(d: Difference) -> str | None:
    room = _cache_room(d)
    size = d.args[1] if len(d.args) > 1 and isinstance(d.args[1], int) else None
    key = d.args[0] if d.args else None
    if d.i_raised and not d.they_raised and room is not None and size is not None:
        capacity, pinned = room
        smaller = d.probe("_check_can_admit", key, size - 1)[0] if size > 1 else "failed"
        if size == capacity - pinned and smaller == "returned":
            return (
                f"yours refused {size} bytes where exactly {capacity - pinned} can be made free: "
                "an entry that fits exactly fits"
            )
        if pinned and any(n > 1 for n in d.before.get("pins", {}).values()):
            return (
                "yours refused an entry that fits beside the pinned ones: count each pinned "
                "entry's bytes once, however many pins it has (not once per pin)"
            )
        return (
            f"yours refused {size} bytes that fit after evicting unpinned entries: only the "
            f"pinned bytes ({pinned} of {capacity}) cannot be made free"
        )
    if d.they_raised and not d.i_raised:
        error = d.error("theirs")
        if size is not None and room is not None and size > room[0]:
            return f"an entry larger than the capacity never fits: raise {error} at once"
        if key in d.before.get("pins", {}):
            return (
                f"you cannot replace a pinned key (its weights are in use): raise {error} "
                "and change nothing"
            )
        return (
            f"an entry that cannot fit beside the pinned ones must raise {error} before "
            "evicting anything, so a failed put changes nothing"
        )
    if d.i_raised and d.they_raised:
        return (
            f"yours raised {d.error('mine')} where the reference raises {d.error('theirs')}: "
            "an entry larger than the capacity is a ValueError; one that only the pinned "
            "entries keep out is a PinnedCapacityExceeded (a MemoryError) naming the pinned keys"
        )
    return None


def _weight_cache_counters(d: Difference) -> str | None:
    if {"hits", "misses"} & d.differ and d.method == "put":
        return "a put counts no hit and no miss (not even a failed one): only get counts them"
    if "misses" in d.differ:
        return "a get of an absent key counts one miss (and no hit)"
    if "hits" in d.differ:
        return "a get of a resident key counts one hit (and no miss)"
    return None


def weight_cache_reading(d: Difference) -> str | None:
    """The rule a weight cache's first diverging call breaks."""
    m, differ = d.method, d.differ
    if m == "_next_victim" and not d.same_outcome:
        return _weight_cache_victim(d)
    if m == "_check_can_admit" and not d.same_outcome:
        return _weight_cache_admit(d)
    if m == "get" and d.i_raised and not d.they_raised:
        return "a get of an absent key returns None (and counts a miss); it does not raise"
    if m == "pin" and d.they_raised and not d.i_raised:
        return f"a pin of an absent key raises {d.error('theirs')} (a KeyError) and records nothing"
    if m == "unpin" and d.they_raised and not d.i_raised:
        return (
            "an unpin of a key with no pin left raises and changes nothing: a pin count never "
            "goes below zero"
        )
    if (
        m in ("_evict", "put")
        and differ & {"evictions", "evicted_bytes"}
        and "resident" not in differ
    ):
        if m == "put" and "used" not in differ:
            return (
                "a replacement is not an eviction: replacing a key frees its old bytes without "
                "counting an eviction"
            )
        return "count every eviction in `evictions` and the victim's size in `evicted_bytes`"
    if m == "_evict" and "used" in differ:
        return "evicting an entry must subtract its size from `used`"
    if m == "put" and "resident" in differ:
        mine, theirs = d.mine.get("resident", []), d.theirs.get("resident", [])
        if set(mine) == set(theirs):
            return "put refreshes the key: a new or replaced key becomes the most recently used"
        capacity = getattr(d.subject, "capacity", None)
        size = d.args[2] if len(d.args) > 2 else None
        used = d.before.get("used")
        if (
            len(mine) < len(theirs)
            and isinstance(capacity, int)
            and isinstance(used, int)
            and isinstance(size, int)
        ):
            if used + size == capacity:
                return (
                    f"yours evicted though the {size} bytes fill the budget exactly: stop "
                    "evicting as soon as the new entry fits (used + size > capacity, not >=)"
                )
            if used + size < capacity:
                return (
                    f"yours evicted though {size} bytes fit in the {capacity - used} free: the "
                    "budget counts bytes, not entries; evict only while used + size > capacity"
                )
        if len(mine) < len(theirs):
            return "yours evicted more than needed: stop evicting as soon as the new entry fits"
        if isinstance(d.mine.get("used"), int) and d.grew("used"):
            return (
                "evict in a loop until the new entry fits: one large entry can need the room of "
                "several small ones"
            )
    if m == "put" and "used" in differ:
        return "replacing a key must release its old size before adding the new one"
    if m in ("get", "put") and {"hits", "misses"} & differ:
        return _weight_cache_counters(d)
    if m == "get" and "resident" in differ:
        return "a hit refreshes the key: get moves it to the most recently used end"
    if m in ("pin", "unpin") and "resident" in differ and "pins" not in differ:
        return f"recency does not change on {m}: the LRU order moves only on get and put"
    if m in ("pin", "unpin") and "pins" in differ:
        mine, theirs = d.mine.get("pins", {}), d.theirs.get("pins", {})
        key = d.args[0] if d.args else None
        if m == "pin" and theirs.get(key, 0) > 1 and mine.get(key, 0) == 1:
            return "pins are counted: two replicas pin twice, so a set of pinned keys is not enough"
        return "each pin adds 1 to the key's pin count and each unpin takes 1 away"
    return None


# ----------------------------------------------------------------------------- eviction-policy


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
    if sorted(mine[first:]) == mine[first:] and mine[first:] != theirs[first:]:
        return f"yours orders keys of equal count by key; {rule}"
    return f"yours puts {a!r} before {b!r}, both with count {count.get(a)}; {rule}"


def _sieve_victim(d: Difference) -> str | None:
    p = d.subject
    queue, visited = list(getattr(p, "queue", [])), getattr(p, "visited", {})
    pinned = set(getattr(p, "pinned", ()))
    mine, theirs = d.returned("mine"), d.returned("theirs")
    candidates = [k for k in queue if k not in pinned]
    if candidates and all(visited.get(k) for k in candidates):
        return (
            f"every key was visited: the hand makes a full lap, clearing each bit, and evicts "
            f"the first key it comes back to ({theirs} here), not simply the oldest"
        )
    return (
        f"yours evicted {mine}, the reference {theirs}: the hand moves from older to newer keys "
        "(the wrong way is newest first), clears each visited bit it passes and evicts the "
        "first unvisited key; the next sweep starts where it stopped"
    )


def eviction_policy_reading(d: Difference) -> str | None:
    """The rule an LFU or SIEVE policy's first diverging call breaks."""
    m, who = d.method, d.policy
    if m == "__len__" and not d.same_outcome:
        return (
            f"yours returned {d.returned('mine')}: {who}'s len() counts the candidates only, "
            "and a pinned key is not one until update_on_unpin"
        )
    if m == "eviction_order" and who == "LFU" and not d.same_outcome:
        return _lfu_order(d)
    if m == "pop_victim" and who == "LFU" and not d.same_outcome:
        order = _names(shown_order(d.before))
        if order and d.returned("mine") != repr(order[0]):
            return (
                f"yours popped {d.returned('mine')} though eviction_order() starts with "
                f"{order[0]!r}: pop the least used key, and skip each stale heap entry (one "
                "whose count or tick is no longer the key's)"
            )
    if m == "pop_victim" and who == "SIEVE" and not d.same_outcome:
        return _sieve_victim(d)
    if m == "update_on_unpin" and "eviction order" in d.differ:
        kept = "its count and the time it reached it" if who == "LFU" else "its visited bit"
        return (
            f"on update_on_unpin a key comes back with its history ({kept}), so it returns "
            "to its old place"
        )
    if m == "update_on_put" and who == "SIEVE" and "eviction order" in d.differ:
        return (
            "a new key joins the newest end of SIEVE's queue, unvisited, whatever the hand's "
            "position (inserting at the hand is CLOCK, not SIEVE)"
        )
    if m == "update_on_remove" and who == "SIEVE" and "hand" in d.differ:
        key = d.args[0] if d.args else None
        hand = getattr(d.subject, "hand", None)
        queue = list(getattr(d.subject, "queue", []))
        if key != hand:
            return (
                f"yours moved the hand, but {key!r} was not under it: the hand moves only when "
                "the cache removes the key under it"
            )
        if queue and key == queue[-1]:
            return (
                f"{key!r} was under the hand and the newest key: the hand moves past the "
                "newest, so it must wrap around to the oldest (hand None)"
            )
    if m == "update_on_remove" and who == "SIEVE" and d.differ & {"eviction order", "hand"}:
        return (
            "when the key under the hand is removed, the hand moves on to the next newer key "
            "(not the next older key, nor back to the oldest), exactly as after an eviction"
        )
    if m == "update_on_remove" and d.differ:
        return (
            "a removed key is forgotten: its count, tick, visited bit and pin all go with it, "
            "so a key put again never comes back pinned"
        )
    if m == "update_on_pin" and d.differ:
        key = d.args[0] if d.args else None
        if key in _names(shown_order(d.mine)):
            return (
                f"yours ignores the pin: {key!r} is still in the eviction order; a pinned key "
                "is not a candidate until update_on_unpin"
            )
        return f"a pinned key is not a candidate: update_on_pin takes it out of {who}'s order"
    if m == "update_on_put" and who == "SIEVE" and "visited" in d.differ:
        return "new entries arrive unvisited: only a hit sets the visited bit"
    if m == "update_on_hit" and d.differ:
        if who == "SIEVE":
            return "on a hit, set the key's visited bit (and move nothing)"
        if "counts" in d.differ:
            key = d.args[0] if d.args else None
            mine = d.mine.get("counts", {}).get(key)
            theirs = d.theirs.get("counts", {}).get(key)
            if key in getattr(d.subject, "pinned", ()):
                return (
                    f"yours did not count a hit on {key!r} while pinned: a hit counts while "
                    "pinned too, and the key returns with that count on update_on_unpin"
                )
            if mine == 1:
                return (
                    f"yours left {key!r} at count 1 after a hit, as if it never counts hits: "
                    "every hit adds 1"
                )
            if isinstance(mine, int) and isinstance(theirs, int) and mine < theirs:
                return (
                    f"yours left {key!r} at count {mine} where the reference counts {theirs}: "
                    "a count is not capped, every hit adds 1"
                )
        return "a hit adds 1 to the key's count and records when it reached it"
    if m == "update_on_unpin" and who == "SIEVE" and d.differ:
        return (
            "a pinned key keeps its history: on update_on_unpin its visited bit and its place "
            "in the queue are as they were"
        )
    if m == "update_on_unpin" and d.differ:
        return (
            "update_on_unpin makes the key a candidate again: push it back onto the heap with "
            "its count and the time it reached it"
        )
    return None


def shown_order(fields: Mapping[str, Any]) -> str | None:
    order = fields.get("eviction order")
    return repr(list(order)) if isinstance(order, list) else None


# ----------------------------------------------------------------------------- block-manager


def _blocks_taken(d: Difference, side: Mapping[str, Any]) -> int:
    before, after = d.before.get("num_free"), side.get("num_free")
    return before - after if isinstance(before, int) and isinstance(after, int) else 0


def _cow_reading(d: Difference) -> str | None:
    mine, theirs = _blocks_taken(d, d.mine), _blocks_taken(d, d.theirs)
    source = re.search(r"cow_src=(\d+)", d.returned("mine") or "")
    if source and "cow_src=None" in (d.returned("theirs") or ""):
        block = int(source.group(1))
        seq = d.args[0] if d.args else None
        length = d.before.get("lengths", {}).get(seq)
        size = getattr(d.subject, "block_size", 0)
        if isinstance(length, int) and size and length % size == 0:
            return (
                f"yours copied block {block}, which is full: the next token goes into a new "
                "block, and copy-on-write is only for a shared partial last block"
            )
        if d.before.get("refcounts", {}).get(block) == 1:
            return (
                f"yours copied block {block}, which only this sequence still holds: "
                "copy-on-write is for the first writer of a shared block; the last holder "
                "(refcount 1) writes in place"
            )
    if mine > theirs:
        return (
            "yours copied a block the reference does not: copy-on-write copies only a shared "
            "partial last block (a full block is never written again), and only for the first "
            "writer; the last holder writes in place"
        )
    if "refcounts" in d.differ and mine == theirs:
        return (
            "after copying, drop the writer's reference to the shared block: its refcount "
            "falls by one"
        )
    return None


def block_manager_reading(d: Difference) -> str | None:
    """The rule a block manager's first diverging call breaks."""
    m, differ = d.method, d.differ
    failed = d.i_raised and d.they_raised
    if failed and differ:
        if m == "append_slot" and "lengths" in differ and "tables" not in differ:
            return (
                "yours raised the length before allocating: a failed append_slot changes "
                "nothing, so raise the length only once the block is in hand"
            )
        if m == "append_slot":
            return (
                "a failed append_slot changes nothing: allocate the copy before releasing the "
                "shared block"
            )
        if m == "allocate" and "tables" in differ and _blocks_taken(d, d.mine) == 0:
            return (
                "yours records the sequence before finding that it does not fit: a failed "
                "allocate changes nothing (check first, then record)"
            )
        if m == "allocate":
            return (
                "a failed allocate changes nothing: check that every block it needs is free "
                "before taking any (all or nothing)"
            )
    if m == "allocate" and d.args and len(d.args) > 1 and d.args[1] == 0 and "tables" in differ:
        return "a sequence of zero tokens holds no block: ceil(0 / block_size) is 0"
    if m == "allocate" and "tables" in differ:
        return "a table holds ceil(len / block_size) blocks: -(-n // block_size), not n // size"
    if m == "append_slot" and _blocks_taken(d, d.mine) > _blocks_taken(d, d.theirs) == 0:
        return (
            "append_slot takes a new block only on the boundary (when len % block_size == 0); "
            "otherwise the token goes into the last block"
        )
    if m == "append_slot":
        return _cow_reading(d)
    if m == "fork" and "lengths" in differ:
        child = d.args[1] if len(d.args) > 1 else None
        got = d.mine.get("lengths", {}).get(child)
        return f"the child starts with the parent's length, not length zero (yours: {got})"
    if m == "fork" and _blocks_taken(d, d.mine) > 0:
        return "yours copied the blocks instead of sharing them: fork shares the parent's blocks"
    if m == "fork" and "refcounts" in differ:
        return "fork shares each block: raise its refcount by one for the child's table"
    if m == "free_seq" and "tables" in differ:
        return (
            "free_seq forgets the sequence (table and length) as it releases its blocks; a "
            "table left behind gets its blocks freed twice"
        )
    free = d.mine.get("free")
    if isinstance(free, list) and len(free) != len(set(free)):
        twice = next(b for b in free if free.count(b) > 1)
        return (
            f"yours put block {twice} on the free list twice: a block is released once, when "
            "its refcount reaches 0"
        )
    if m in ("free_seq", "_release") and differ & {"refcounts", "free", "num_free"}:
        return (
            "release one reference per table entry: a block goes back to the free list when its "
            "refcount reaches 0, and only then (do not ignore the refcount)"
        )
    return None


# ----------------------------------------------------------------------------- prefix-cache


def prefix_cache_reading(d: Difference) -> str | None:
    """The rule a prefix-caching block manager's first diverging call breaks."""
    m, differ = d.method, d.differ
    if m == "allocate" and d.i_raised and d.they_raised and differ:
        return (
            "a failed allocate changes nothing: check that the request fits before claiming "
            "hits or taking blocks (an evictable hit is claimed, no longer free)"
        )
    if m == "append_slot" and differ & {"hashed", "cached"}:
        return (
            "when decoding fills a block, cache it: hash it on the chain and register it, as a "
            "full prompt block is"
        )
    if m == "_release" and "reclaim order" in differ:
        return (
            "a cached block freed by its last holder goes on the evictable LRU (still hashed, "
            "reclaimable), not the plain free list"
        )
    if m == "allocate" and "reclaim order" in differ and "tables" not in differ:
        return (
            "a hit on an evictable block takes it off the evictable list: it is held again, "
            "with refcount 1"
        )
    if m == "_lookup" and not d.same_outcome:
        mine, theirs = d.returned("mine") or "", d.returned("theirs") or ""
        tokens = d.args[0] if d.args else []
        size = getattr(d.subject, "block_size", 0)
        hits = mine.count(",") + 1 if mine.strip("[]") else 0
        if len(mine) > len(theirs) and size and hits * size >= len(tokens):
            return (
                f"yours hit every block of the prompt ({mine}): the hit stops short of the last "
                "prompt token, which is always recomputed"
            )
        if len(mine) > len(theirs):
            return (
                f"yours found hits the reference does not ({mine}, not {theirs}): a hit is a "
                "full block whose chained hash maps to a block verified to hold the same "
                "tokens; the lookup stops at the first miss; a reused block's stale hash is gone"
            )
        return (
            f"yours missed hits the reference finds ({mine}, not {theirs}): hash each full "
            "block chained on the previous block's hash, and look every block up in turn"
        )
    if m in ("_alloc",) and differ:
        return (
            "take a plain free block first, and reclaim a cached one only when none is left, "
            "the least recently freed first (and forget its hash)"
        )
    return block_manager_reading(d)


# ----------------------------------------------------------------------------- scheduler


def _ids(queue: Any) -> list[Any]:
    return [entry[0] for entry in queue] if isinstance(queue, list) else []


def _scheduler_decode(d: Difference) -> str | None:
    before = _ids(d.before.get("running"))
    mine, theirs = _ids(d.mine.get("running")), _ids(d.theirs.get("running"))
    gone_mine = [s for s in before if s not in mine]
    gone_theirs = [s for s in before if s not in theirs]
    if set(mine) == set(theirs) and mine != theirs:
        if mine == sorted(mine):
            return (
                "yours reorders running by id: decode in the order of running (arrival), not "
                "in the order of their ids"
            )
        return "decode keeps running in its order: the oldest first, newcomers at the back"
    if len(gone_mine) < len(gone_theirs):
        return (
            "when a retry after a preemption still finds no block, preempt again: a step can "
            "take several victims"
        )
    if gone_mine and gone_theirs and gone_mine != gone_theirs:
        victim = gone_mine[0]
        if before and victim == max(before) and before[-1] != victim:
            return (
                f"yours preempted sequence {victim}, the highest id; the victim is the newest "
                "running sequence, the last of running, whatever its id"
            )
        return (
            f"yours preempted sequence {victim}; the victim is the newest running sequence "
            f"(running[-1], {gone_theirs[0]} here), not the one whose append failed"
        )
    return None


def scheduler_reading(d: Difference) -> str | None:
    """The rule a scheduler's first diverging call breaks."""
    m, differ = d.method, d.differ
    if m == "add" and d.they_raised and not d.i_raised:
        return (
            "a request that can never fit (its prompt + max_new_tokens in blocks, above "
            "num_blocks - watermark) raises RequestTooLarge in add()"
        )
    if m == "fits" and not d.same_outcome:
        if d.returned("mine") == "False":
            return (
                "yours refused a request that leaves exactly the watermark free: admit while "
                "num_free - needed >= watermark"
            )
        return "admit only while num_free - needed >= watermark: the watermark stays free"
    if m == "retire" and differ:
        before = _ids(d.before.get("running"))
        mine, theirs = _ids(d.mine.get("running")), _ids(d.theirs.get("running"))
        if len(mine) < len(theirs):
            return (
                "yours retired a sequence a step early: it retires once finished (its last "
                "token emitted), at the start of the next step"
            )
        if len(mine) == len(before):
            return "retire frees every finished sequence (bm.free_seq) and drops it from running"
    if m == "decode":
        return _scheduler_decode(d)
    if m == "preempt" and differ & {"tables", "refcounts", "free"}:
        return "a preempted sequence must give back its blocks (bm.free_seq) before it waits"
    if m == "preempt" and "waiting" in differ:
        return (
            "a preempted sequence goes to the front of waiting; with several victims in a "
            "step, the older victim stands first"
        )
    if m == "step" and "lengths" in differ:
        return (
            "yours decoded the sequences it just admitted: admit after decoding, not before "
            "decoding (a prefill is the admitted sequence's work in this step)"
        )
    return None


READERS: dict[str, Reader] = {
    "weight-cache": weight_cache_reading,
    "eviction-policy": eviction_policy_reading,
    "block-manager": block_manager_reading,
    "prefix-cache": prefix_cache_reading,
    "scheduler": scheduler_reading,
}


def reading(topic: str, divergence: Divergence | None, program: str = "") -> str | None:
    """The rule ``divergence`` breaks, in words, or None when no reading of ``topic`` fits;
    ``program`` is the failing program the divergence was found in."""
    reader = READERS.get(topic)
    if reader is None or divergence is None:
        return None
    policy, _, method = divergence.method.rpartition(".")
    d = Difference(
        method,
        policy,
        divergence.args,
        divergence.before,
        divergence.mine[1],
        divergence.theirs[1],
        divergence.mine[0],
        divergence.theirs[0],
        divergence.subject,
        program,
    )
    try:
        return reader(d)
    except Exception:  # a learner's object read in an unexpected shape: no reading
        return None
