"""Readings of a weight cache's first diverging call that say what yours did only where the
call's own fields show it, or a second call on a copy proves it: which victim rule a choice
follows (the newest, the largest, the smallest, asked again on a copy with the keys in
another order), an eviction that left its victim resident, a get that answered the stored
pair, pin counts that started above 0 or all went at once, pins counted as bytes."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from servelab.grading.readings.difference import Difference, call
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget


def _victim_on(d: Difference, order: list[Any], sizes: dict[Any, int]) -> Any:
    """Your ``_next_victim`` on a new cache of your class holding ``order`` (oldest first)
    with ``sizes`` and the same pins; a sentinel when it cannot be built as asked."""
    cache, pins = d.subject, d.before.get("pins", {})
    failed = object()
    try:
        with line_budget(LINES_PER_CALL):
            twin = type(cache)(cache.capacity)
            for key in order:
                twin.put(key, f"<{key} weights>", sizes[key])
            for key, n in pins.items():
                for _ in range(n):
                    twin.pin(key)
            if call(twin, "keys") != order or getattr(twin, "used", None) != sum(sizes.values()):
                return failed
            return twin._next_victim()
    except Exception:
        return failed
    except OutOfLines:
        return failed


def victim_kinds(d: Difference, chosen: Any, skipped: Any) -> list[str]:
    """What yours chose, proven: "the most recently used" where, on a copy holding the keys
    in the reverse order, it chooses the newest unpinned key again; "the largest" or "the
    smallest" where, with the sizes moved one key along, it chooses the entry that is now
    the largest (smallest). One call's numbers alone fit other rules too (a key first by
    name can be the newest and the largest at once)."""
    resident = list(d.before.get("resident", ()))
    pins = d.before.get("pins", {})
    capacity = getattr(d.subject, "capacity", None)
    sizes = {k: call(d.subject, "size_of", k) for k in resident}
    free = [k for k in resident if k not in pins]
    if not isinstance(capacity, int) or len(free) < 2:
        return []
    if not all(isinstance(n, int) and n > 0 for n in sizes.values()):
        return []
    what = []
    if chosen == free[-1]:
        reverse = resident[::-1]
        newest = [k for k in reverse if k not in pins][-1]
        oldest = next(k for k in reverse if k not in pins)
        reversed_too = newest not in (chosen, oldest) and _victim_on(d, reverse, sizes) == newest
        if reversed_too and _newest_whatever_its_size(d, resident, free, sizes):
            what.append("the most recently used")
    numbers = [sizes[k] for k in free]
    if len(set(numbers)) == len(numbers):  # sizes all different: one largest, one smallest
        moved = dict(zip(free, numbers[1:] + numbers[:1], strict=True))
        moved.update({k: sizes[k] for k in pins if k in sizes})
        largest = max(free, key=lambda k: moved[k])
        smallest = min(free, key=lambda k: moved[k])
        top, bottom = sizes[chosen] == max(numbers), sizes[chosen] == min(numbers)
        if top and largest != chosen and _victim_on(d, resident, moved) == largest:
            what.append("the largest")
        if bottom and smallest != chosen and _victim_on(d, resident, moved) == smallest:
            what.append("the smallest")
    return what


def _newest_whatever_its_size(
    d: Difference, resident: list[Any], free: list[Any], sizes: dict[Any, int]
) -> bool:
    """Yours chooses the newest unpinned key again on copies where it is the only smallest
    (it keeps 1 byte, the others at least 2) and the only largest (the others keep 1 byte):
    a rule by size, whatever it does with ties, chooses another key on one of them."""
    newest, others = free[-1], free[:-1]
    if sizes[newest] < 2 or min(sizes[k] for k in others) < 2:
        return False
    small = {**sizes, newest: 1}
    large = {**sizes, **{k: 1 for k in others}}
    return bool(_victim_on(d, resident, small) == newest == _victim_on(d, resident, large))


def evict_kept_victim(d: Difference) -> str | None:
    """``_evict(key)`` that took the victim's bytes off ``used`` as the reference does but
    left the victim resident: the call's own fields show it."""
    victim = d.args[0] if d.args else None
    before, mine = list(d.before.get("resident", ())), list(d.mine.get("resident", ()))
    theirs = list(d.theirs.get("resident", ()))
    if victim not in before or victim not in mine or victim in theirs or mine != before:
        return None
    if d.mine.get("used") != d.theirs.get("used"):
        return None
    return (
        f"yours took the bytes of {victim!r} off `used` but left {victim!r} resident: _evict "
        "removes the entry from the cache too (pop it from `_entries`), or the loop that "
        "calls it frees bytes that are still held"
    )


def get_answered_pair(d: Difference) -> str | None:
    """A get that returned the stored (size, value) pair where the reference returns the
    value: the pair is in the result itself."""
    key = d.args[0] if d.args else None
    mine, theirs = d.returned("mine"), d.returned("theirs")
    size = call(d.subject, "size_of", key) if key in d.before.get("resident", ()) else None
    if not isinstance(size, int) or theirs is None or mine is None:
        return None
    if mine not in (f"({size}, {theirs})", f"({theirs}, {size})"):
        return None
    return (
        f"yours returned {mine}, the stored pair of size and value; get answers the value "
        f"alone ({theirs} here): an entry is kept as (size, value), so return its [1]"
    )


def pins_said(d: Difference) -> str | None:
    """A pin count that the call's own fields show started above 0 (a first pin that
    records 2), or that went to none on one unpin of a key pinned more than once."""
    key = d.args[0] if d.args else None
    before, mine, theirs = (x.get("pins", {}) for x in (d.before, d.mine, d.theirs))
    if not all(isinstance(x, dict) for x in (before, mine, theirs)):
        return None
    was, a, b = before.get(key, 0), mine.get(key, 0), theirs.get(key, 0)
    if d.method == "pin" and was == 0 and b == 1 and isinstance(a, int) and a > 1:
        return (
            f"yours recorded {a} pins for the first pin of {key!r}: a key with no pin has "
            "count 0 (absent), and each pin adds 1"
        )
    if d.method == "unpin" and isinstance(was, int) and was > 1 and b == was - 1 and a == 0:
        return (
            f"yours took every pin of {key!r} away at once ({was} -> none): each unpin takes "
            "one pin away, so the key stays pinned while another replica still pins it"
        )
    return None


def admits_by_pin_count(d: Difference, key: Any, size: int) -> str | None:
    """Yours admitted an entry the pinned bytes keep out: proven to weigh the pinned entries
    by their pin counts where your ``_check_can_admit`` on a copy admits exactly up to the
    capacity less the sum of the pins (that size passes, one byte more raises)."""
    pins = d.before.get("pins", {})
    capacity = getattr(d.subject, "capacity", None)
    if not pins or not isinstance(capacity, int):
        return None
    if not all(isinstance(n, int) for n in pins.values()):
        return None
    edge = capacity - sum(pins.values())
    pinned = sum(n for k in pins if isinstance(n := call(d.subject, "size_of", k), int))
    if edge < 1 or edge == capacity - pinned or edge + 1 > capacity:
        return None
    if d.probe("_check_can_admit", key, edge)[0] != "returned":
        return None
    if d.probe("_check_can_admit", key, edge + 1)[0] != "raised":
        return None
    return (
        f"yours admitted {size} bytes though {pinned} of the {capacity} are pinned: it "
        f"admits up to {edge} bytes, the capacity less the pin counts ({sum(pins.values())}); "
        "the pinned room is the bytes of the pinned entries (each once), not their pins"
    )


def replaced_signs_swapped(d: Difference) -> str | None:
    """A replacement that moved ``used`` by the old size less the new one, the reference's
    step the other way: proven where your put, run again on a copy with one byte more, moves
    it by the old size less that size too (keeping the old size or adding without a release
    lands elsewhere)."""
    key = d.args[0] if d.args else None
    size = d.args[2] if len(d.args) > 2 else None
    old = call(d.subject, "size_of", key) if key in d.before.get("resident", ()) else None
    before, mine = d.before.get("used"), d.mine.get("used")
    if not (isinstance(size, int) and isinstance(old, int) and old != size):
        return None
    if not (isinstance(before, int) and isinstance(mine, int)):
        return None
    if mine - before != old - size:
        return None
    after = d.after(key, d.args[1], size + 1)
    if after is None or getattr(after, "used", None) != before + old - (size + 1):
        return None
    return (
        f"yours moved `used` by {old - size} on replacing {key!r} ({old} bytes by {size}): "
        f"the old size added and the new one taken off, the signs swapped; a replacement "
        f"takes the old size off and adds the new one ({before} - {old} + {size})"
    )


def missed_only_never_put(d: Difference, key: Any) -> str | None:
    """A get of the absent ``key`` that counted no miss, proven on a copy to count none for
    ``key`` again while it counts one for a key never put: yours tells the two apart, which
    the rule does not (an evicted key is missed as a never-put one is)."""
    cache = d.subject
    try:
        with line_budget(LINES_PER_CALL):
            twin = copy.deepcopy(cache)
            start = twin.misses
            twin.get(key)
            again = twin.misses
            twin.get("~never-put")
            fresh = twin.misses
    except Exception:
        return None
    except OutOfLines:
        return None
    if not all(isinstance(n, int) for n in (start, again, fresh)):
        return None
    if again != start or fresh != int(again) + 1:
        return None
    return (
        f"yours counts a miss for a key never put (a copy asked for '~never-put' counts one) "
        f"but none for {key!r}, absent as well: a get of any key that is not resident is a "
        "miss, whether it was never put or was put and evicted since"
    )


def bytes_of_some_victims(d: Difference) -> str | None:
    """A put whose evictions agree with the reference's but whose ``evicted_bytes`` grew by
    the sizes of only some of its victims, exactly one such set: what yours added, named by
    the victims it matches (a difference of 1 here is a victim's size, not an off-by-one); up to
    12 victims, the subsets searched stay a few thousand."""
    if d.method != "put" or d.differ != {"evicted_bytes"}:
        return None
    numbers = [x.get("evicted_bytes") for x in (d.before, d.mine, d.theirs)]
    counts = [n for n in numbers if isinstance(n, int) and not isinstance(n, bool)]
    if len(counts) != 3:
        return None
    before, mine, theirs = counts
    resident = list(d.before.get("resident", ()))
    gone = [k for k in resident if k not in d.theirs.get("resident", ()) and k != d.args[0]]
    sizes = {k: call(d.subject, "size_of", k) for k in gone}
    if not 2 <= len(gone) <= 12 or not all(isinstance(s, int) for s in sizes.values()):
        return None
    if sum(sizes.values()) != theirs - before:
        return None
    added = mine - before
    matches = [
        [k for i, k in enumerate(gone) if mask >> i & 1]
        for mask in range(1, 2 ** len(gone) - 1)
        if sum(sizes[k] for i, k in enumerate(gone) if mask >> i & 1) == added
    ]
    if len(matches) != 1:
        return None
    some = ", ".join(f"{k!r} ({sizes[k]})" for k in matches[0])
    every = ", ".join(f"{k!r} ({sizes[k]})" for k in gone)
    return (
        f"yours added {added} to `evicted_bytes` in this put, the size of {some} alone; the "
        f"put evicted {every}, {theirs - before} bytes: each eviction adds its victim's size"
    )


#: What a pin() or unpin() of one key may return instead of that key's own count, read from
#: the pins after the call (every non-zero pin count, by key).
def _keys_pinned(pins: dict[Any, int]) -> int:
    return len(pins)


def _pins_together(pins: dict[Any, int]) -> int:
    return sum(pins.values())


_OTHER_COUNTS: dict[str, Callable[[dict[Any, int]], int]] = {
    "the number of keys pinned": _keys_pinned,
    "the pins of every key together": _pins_together,
}


def returned_other_count(d: Difference) -> str | None:
    """A pin() or unpin() that returned another count than its key's: the number of keys
    pinned, or the pins of every key together, after the call. Said only where exactly one
    of those equals yours here and on the same call for each other resident key that accepts
    it, and on this key once it holds one pin more (run on copies: that call tells a count over
    the cache from this key's own count before the call, which can coincide with it), and the
    reference's differs from it on one of those calls at least."""
    if d.method not in ("pin", "unpin") or d.differ or not d.args:
        return None
    key, mine, theirs = d.args[0], d.returned("mine"), d.returned("theirs")
    pins = d.mine.get("pins")
    if mine is None or theirs is None or mine == theirs or not isinstance(pins, dict):
        return None
    left = {n: f for n, f in _OTHER_COUNTS.items() if repr(f(pins)) == mine}
    others = [k for k in d.before.get("resident", ()) if k != key][:3]
    # the same call on another key, on this key once another has one pin more, and on this
    # key once it has one pin more itself
    trials = [(None, o, 0) for o in others] + [(o, key, 1) for o in others] + [(key, key, 2)]
    parted, ran = False, set[int]()
    for extra, target, kind in trials:
        try:
            obj = copy.deepcopy(d.subject)
            with line_budget(LINES_PER_CALL):
                if extra is not None:
                    obj.pin(extra)
                if d.method == "unpin" and not obj.pin_count(target):
                    continue  # an unpin of a key with no pin raises
                value = getattr(obj, d.method)(target)
                counts = {k: obj.pin_count(k) for k in obj.keys()}
        except (Exception, OutOfLines):
            return None
        after = {k: n for k, n in counts.items() if n}
        left = {n: f for n, f in left.items() if f(after) == value}
        ran.add(kind)
        parted = parted or any(f(after) != after.get(target, 0) for f in left.values())
    if len(left) != 1 or not parted:
        return None
    (name,) = left
    tried = [t for i, t in enumerate(_TRIALS) if i in ran]
    own_count = (
        "the pin count of that key after the pin"
        if d.method == "pin"
        else ("the pins left on that key")
    )
    return (
        f"yours returned {mine}, {name} ({pins!r}), where the reference returns {theirs}: "
        f"{d.method}() returns {own_count}, not a count over the whole cache; yours does the "
        f"same from other states ({_listed([t.format(d.method) for t in tried])})"
    )


#: The trials of :func:`returned_other_count`, by kind: the call on another key, on this key
#: once another has one pin more, and on this key once it has one pin more itself.
_TRIALS = ("another key's {}()", "one more pin elsewhere", "one more pin of this key")


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", or " + items[-1]


def get_moved(d: Difference) -> str | None:
    """Where a hit left its key, where the reference moves it to the most recently used end:
    at the least recently used end (the call's own fields show it, or a hit of yours on a
    copy on a key that is not there already), or where it was while it is pinned, only where
    your hit on the same key once unpinned (on a copy) moves it."""
    if d.method != "get" or not d.args:
        return None
    key = d.args[0]
    before, mine = d.before.get("resident"), d.mine.get("resident")
    if not isinstance(before, list) or not isinstance(mine, list) or key not in before:
        return None
    front = (
        "where the next victim is taken: a hit makes the key the most recently used, at the "
        "end of keys() (move_to_end's default, last=True)"
    )
    rest = [k for k in before if k != key]
    if len(before) > 1 and mine == [key, *rest] != before:
        moved = f"({before!r} -> {mine!r})"
        return f"yours moved {key!r} to the least recently used end {moved}, {front}"
    pins = d.before.get("pins", {})
    if mine != before or len(before) < 2 or not isinstance(pins, dict):
        return None
    if pins.get(key) and before[-1] != key:
        order = _on_copy(d, lambda c: [c.unpin(key) for _ in range(pins[key])] and c.get(key))
        if order is not None and order[-1] == key:
            return (
                f"yours left {key!r} where it was ({before!r}): it is pinned, and a hit of "
                f"yours on {key!r} once unpinned (on a copy) moves it to the most recently "
                "used end. A pin keeps a key from being evicted; it does not stop a hit from "
                "counting as a use, so get refreshes a pinned key too"
            )
        return None
    if before[0] != key:
        return None
    other = before[-1]
    order = _on_copy(d, lambda c: c.get(other))
    if order is not None and order == [other, *[k for k in before if k != other]]:
        return (
            f"yours left {key!r} first, where it was ({before!r}), and a hit of yours on "
            f"{other!r} (on a copy) moves it to the front too: yours moves a hit's key to the "
            f"least recently used end, {front}"
        )
    return None


def _on_copy(d: Difference, act: Any) -> list[Any] | None:
    """keys() of a copy of yours after ``act`` (None when it cannot run)."""
    try:
        obj = copy.deepcopy(d.subject)
        with line_budget(LINES_PER_CALL):
            act(obj)
            return list(obj.keys())
    except (Exception, OutOfLines):
        return None
