"""Readings of a weight cache's first diverging call: victim, admission, counters, pins."""

from __future__ import annotations

import builtins
import copy
import re

import servelab.weights as weights
from servelab.grading.readings.difference import (
    BOTH_RAISED,
    MINE_RAISED,
    SAME,
    THEIRS_RAISED,
    VALUE,
    Difference,
    WrittenFor,
    call,
    failed_call,
)
from servelab.grading.readings.stale_list import stale_holder
from servelab.grading.readings.weight_cache_pins import (
    pinned_hit_uncounted,
    zero_pin_kept,
    zero_unpin_let_through,
)
from servelab.grading.readings.weight_cache_returns import (
    get_answered_newest,
    get_answered_size,
    none_at_last_unpin,
    pin_count_shown,
    replacement_kept,
    returned_bool,
    returned_count_before,
)
from servelab.grading.readings.weight_cache_rules import (
    admits_by_pin_count,
    bytes_of_some_victims,
    evict_kept_victim,
    get_answered_pair,
    get_moved,
    missed_only_never_put,
    pins_said,
    replaced_signs_swapped,
    returned_other_count,
    victim_kinds,
)
from servelab.grading.readings.weight_cache_twice import evicted_twice
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.grading.weight_cache_hints import PINNED_ONCE

# The difference each reading below was written for (see WrittenFor): a reading is shown only
# when the first diverging call differs that way and in nothing else.
CHOSE = WrittenFor((VALUE,))
"""Another victim named, nothing changed."""
REFUSED = WrittenFor((MINE_RAISED,))
"""Yours raised where the reference admits, nothing else differs."""
ADMITTED = WrittenFor((THEIRS_RAISED,))
"""Yours let through what the reference refuses, changing nothing."""
ADMITTED_AND_EVICTED = WrittenFor(
    (THEIRS_RAISED,), ("resident",), below=("used",), above=("evictions", "evicted_bytes")
)
"""Yours let it through and evicted to make room."""
OTHER_ERROR = WrittenFor((BOTH_RAISED,))
GET_RAISED = WrittenFor((MINE_RAISED,), ("hits", "misses"))
PIN_REFUSED = WrittenFor((MINE_RAISED,), ("pins",))
PIN_LET_THROUGH = WrittenFor((THEIRS_RAISED,), ("pins",))
READ_AFTER_REMOVAL = WrittenFor((MINE_RAISED,), ("used", "evictions", "evicted_bytes"))
"""The victim gone on both sides; what yours did not count after it differs."""
REPLACE_COUNTED = WrittenFor((SAME,), above=("evictions", "evicted_bytes"))
EVICTION_UNCOUNTED = WrittenFor((SAME,), below=("evictions", "evicted_bytes"))
EVICTION_OVERCOUNTED = WrittenFor((SAME,), above=("evictions", "evicted_bytes"))
COUNTED_OTHERWISE = WrittenFor((SAME,), ("evictions", "evicted_bytes"))
"""Counters moved by an amount the call's own numbers account for (a size, not its sum)."""
REMOVED_OTHER = WrittenFor((SAME,), ("resident", "used", "pins", "evicted_bytes"))
"""``_evict(key)`` removed another entry than ``key``."""
UNPIN_REMOVED = WrittenFor((SAME,), ("resident", "used", "pins"))
"""A pin or unpin that took its own key out of the cache."""
USED_KEPT = WrittenFor((SAME,), above=("used",))
"""An eviction that left more bytes in use than the victim's removal leaves."""
USED_OVERTAKEN = WrittenFor((SAME,), below=("used",))
REFRESHED = WrittenFor((SAME,), ("resident",))
"""The same keys in another order."""
EVICTED_MORE = WrittenFor(
    (SAME,), ("resident",), below=("used",), above=("evictions", "evicted_bytes")
)
EVICTED_LESS = WrittenFor(
    (SAME,), ("resident",), above=("used",), below=("evictions", "evicted_bytes")
)
REPLACED_SIZE = WrittenFor((SAME,), ("used",))
COUNTED = WrittenFor((SAME,), ("hits", "misses"))
PUT_COUNTED = WrittenFor((SAME, BOTH_RAISED), ("hits", "misses"))
PINS_COUNTED = WrittenFor((SAME, VALUE), ("pins",))


def _cache_room(d: Difference) -> tuple[int, int] | None:
    """(capacity, bytes of pinned entries, each counted once) before the call, or None."""
    cache = d.subject
    capacity = getattr(cache, "capacity", None)
    if not isinstance(capacity, int):
        return None
    pinned = 0
    for key in d.before.get("pins", {}):
        size = call(cache, "size_of", key)
        if isinstance(size, int) and key in d.before.get("resident", ()):
            pinned += size
    return capacity, pinned


def _unpinned_twin(d: Difference) -> object:
    """Your ``_next_victim`` on a new cache of your class holding the same entries in the same
    order, none of them ever pinned: the key it names there. Where the skipped key is that
    key, what set it apart was its pin history; where it is skipped there too, something else
    did (an off-by-one in the scan names another key in both)."""
    cache, resident = d.subject, list(d.before.get("resident", ()))
    if d.before.get("pins") or not isinstance(getattr(cache, "capacity", None), int):
        return None
    sizes = [call(cache, "size_of", k) for k in resident]
    if not all(isinstance(n, int) for n in sizes):
        return None

    def make() -> object:
        twin = type(cache)(cache.capacity)
        for key, size in zip(resident, sizes, strict=True):
            twin.put(key, f"<{key} weights>", size)
        return twin

    try:
        with line_budget(LINES_PER_CALL):
            twin = make()
            if call(twin, "keys") != resident:
                return None
            return twin._next_victim()  # type: ignore[attr-defined]
    except Exception:
        return None
    except OutOfLines:
        return None


def _weight_cache_victim(d: Difference) -> str | None:
    mine, theirs = d.returned("mine"), d.returned("theirs")
    resident = list(d.before.get("resident", ()))
    pins = d.before.get("pins", {})
    chosen = next((k for k in resident if repr(k) == mine), None)
    skipped = next((k for k in resident if repr(k) == theirs), None)
    rule = "the victim is the least recently used unpinned entry: the first key of `keys()` "
    rule += f"that is not pinned ({theirs} here)"
    if chosen is None and mine == "None" and skipped is not None and skipped not in pins:
        # "pass over the pinned ones" only where a pinned entry comes before it in the scan
        passed = any(k in pins for k in resident[: resident.index(skipped)])
        go_on = "; pass over the pinned ones and go on looking" if passed else ""
        return (
            f"yours returned None though {theirs} is resident and not pinned: None means every "
            f"entry is pinned{go_on}. {rule[0].upper()}{rule[1:]}"
        )
    if chosen is None:
        stale = stale_holder(d.subject, mine, resident)
        return f"{stale}. {rule[0].upper()}{rule[1:]}" if stale else None
    if chosen in pins:
        return f"yours chose {mine}, a pinned entry: skip pinned entries; {rule}"
    zero = zero_pin_kept(d, skipped) if skipped is not None else None
    if zero:
        return zero
    if skipped is not None and f"pin({skipped!r})" in d.program and _unpinned_twin(d) == skipped:
        return (
            f"yours skipped {theirs}, whose pins were all released: an entry is evictable "
            f"again after its last unpin; {rule}"
        )
    what = victim_kinds(d, chosen, skipped)  # each proven on a copy, not read off one call
    if what:
        return f"yours chose {mine}, {' and '.join(what)} entry; {rule}"
    a, b = (call(d.subject, "size_of", k) for k in (chosen, skipped))
    if skipped is not None and isinstance(a, int) and isinstance(b, int):
        return f"yours chose {mine} ({a} bytes), the reference {theirs} ({b} bytes); {rule}"
    return f"yours chose {mine}; {rule}"


def _admits_pinned_once(d: Difference, key: object, size: int) -> bool:
    """Your ``_check_can_admit(key, size)`` on a copy whose pinned keys hold one pin each (the
    same keys pinned, the same bytes): it admits there only where yours counted the pins, not
    the bytes, of a key pinned more than once."""
    try:
        with line_budget(LINES_PER_CALL):
            twin = copy.deepcopy(d.subject)
            twin._pins = {k: 1 for k in twin._pins}
            twin._check_can_admit(key, size)
    except Exception:
        return False
    except OutOfLines:
        return False
    return True


def _room_error(name: str) -> bool:
    """Whether an error named ``name`` says there is no room (a ``MemoryError``, as the
    notebook's PinnedCapacityExceeded): what a refusal for the pinned bytes raises. A size
    refused as too large for the whole cache, or as no size at all, is another rule's."""
    found = getattr(weights, name, None) or getattr(builtins, name, None)
    return isinstance(found, type) and issubclass(found, MemoryError)


def _evicted(d: Difference) -> bool:
    """Whether your call took out a key that was resident before it, other than its own."""
    key = d.args[0] if d.args else None
    mine = d.mine.get("resident", [])
    return any(k not in mine and k != key for k in d.before.get("resident", ()))


def _weight_cache_admit(d: Difference) -> str | None:
    room = _cache_room(d)
    size = d.args[1] if len(d.args) > 1 and isinstance(d.args[1], int) else None
    key = d.args[0] if d.args else None
    if d.i_raised and not d.they_raised and room is not None and size is not None:
        capacity, pinned = room
        smaller = d.probe("_check_can_admit", key, size - 1)[0] if size > 1 else "failed"
        if size == capacity - pinned and smaller == "returned":
            return REFUSED.show(
                d,
                f"yours refused {size} bytes where exactly {capacity - pinned} can be made free: "
                "an entry that fits exactly fits",
            )
        pins = d.before.get("pins", {})
        if pinned and any(n > 1 for n in pins.values()) and _admits_pinned_once(d, key, size):
            return REFUSED.show(
                d,
                f"yours refused an entry that fits beside the pinned ones: {PINNED_ONCE}",
            )
        if not _room_error(d.error("mine")):
            return None  # refused for another reason (a size, a pin): not the room's rule
        return REFUSED.show(
            d,
            f"yours refused {size} bytes that fit after evicting unpinned entries: only the "
            f"pinned bytes ({pinned} of {capacity}) cannot be made free",
        )
    if d.they_raised and not d.i_raised:
        error = d.error("theirs")
        given = d.args[1] if len(d.args) > 1 else None
        if isinstance(given, bool) or not isinstance(given, int) or given <= 0:
            return ADMITTED.show(
                d,
                f"yours accepted a size of {given!r}: a size is a positive int number of "
                f"bytes (not 2.5, not 10.0, not 0): check its type and sign, raise {error}",
            )
        if size is not None and room is not None and size > room[0]:
            return ADMITTED_AND_EVICTED.show(
                d, f"an entry larger than the capacity never fits: raise {error} at once"
            )
        if key in d.before.get("pins", {}):
            return ADMITTED.show(
                d,
                f"you cannot replace a pinned key (its weights are in use): raise {error} "
                "and change nothing",
            )
        if size is None or room is None or size <= room[0] - room[1]:
            return None  # it fits beside the pinned ones: the rule it breaks is not this one
        by_pins = admits_by_pin_count(d, key, size)
        return ADMITTED_AND_EVICTED.show(
            d,
            by_pins
            or f"an entry that cannot fit beside the pinned ones must raise {error} before "
            "evicting anything, so a failed put changes nothing",
        )
    if d.i_raised and d.they_raised:
        return OTHER_ERROR.show(d, _other_error(d, room))
    return None


def _other_error(d: Difference, room: tuple[int, int] | None) -> str:
    """Both refused, with other errors: the rule the reference's error comes from, read from
    the call's own arguments, and that it is tried first."""
    said = f"yours raised {d.error('mine')} where the reference raises {d.error('theirs')}"
    key = d.args[0] if d.args else None
    given = d.args[1] if len(d.args) > 1 else None
    order = (
        "; _check_can_admit tries a bad size, then larger than the cache, then the key pinned, "
        "then the pinned bytes"
    )
    if isinstance(given, bool) or not isinstance(given, int) or given <= 0:
        return (
            f"{said}: a size of {given!r} is not a positive int, a ValueError, tried first{order}"
        )
    if room is not None and given > room[0]:
        return (
            f"{said}: {given} bytes is larger than the whole cache, an EntryTooLarge (a "
            f"ValueError), tried before the pins{order}"
        )
    if key in d.before.get("pins", {}):
        return f"{said}: {key!r} is pinned, EntryPinned, tried before the pinned bytes"
    return (
        f"{said}: an entry larger than the capacity is a ValueError; one that only the pinned "
        "entries keep out is a PinnedCapacityExceeded (a MemoryError) naming the pinned keys"
    )


def _weight_cache_counters(d: Difference) -> str | None:
    if {"hits", "misses"} & d.differ and d.method == "put":
        return "a put counts no hit and no miss (not even a failed one): only get counts them"
    key = d.args[0] if d.args else None
    if key not in d.before.get("resident", ()):
        rule = f"a get of an absent key ({key!r}) counts one miss and no hit"
        if d.mine.get("misses") == 0 and d.theirs.get("misses") == 1:
            if _misses_after_a_hit(d) == 0:
                return f"yours left misses at 0: so far it never counts misses; {rule}"
            if "hits" not in d.differ and (only_fresh := missed_only_never_put(d, key)):
                return only_fresh
            return f"yours left misses at 0 on this get; {rule}"
        return rule
    rule = f"a get of a resident key ({key!r}) counts one hit and no miss"
    return pinned_hit_uncounted(d) or rule


def _misses_after_a_hit(d: Difference) -> object:
    """Your cache, copied, after a put of a new key, a get of it (a hit) and two gets of an
    absent key: the misses it counts then, above what it had. 0 says it counts none in either
    case; a miss counted only once a hit came is another slip."""
    cache = d.subject
    before = getattr(cache, "misses", None)
    if not isinstance(before, int):
        return None
    try:
        with line_budget(LINES_PER_CALL):
            twin = copy.deepcopy(cache)
            twin.put("~probe", "<probe weights>", 1)
            twin.get("~probe")
            twin.get("~absent")
            twin.get("~absent")
            misses = twin.misses
    except Exception:
        return None
    except OutOfLines:
        return None
    return misses - before if isinstance(misses, int) else None


def _victim_size(d: Difference) -> int | None:
    key = d.args[0] if d.args else None
    size = call(d.subject, "size_of", key) if key in d.before.get("resident", ()) else None
    return size if isinstance(size, int) else None


def _took_more(d: Difference) -> str | None:
    """``_evict`` lowered ``used`` by more than the victim's size (twice, or another's)."""
    before, mine, size = d.before.get("used"), d.mine.get("used"), _victim_size(d)
    if not (isinstance(before, int) and isinstance(mine, int) and size is not None):
        return None
    return (
        f"yours took {before - mine} bytes off `used` for {d.args[0]!r}, which holds {size}: "
        "an eviction subtracts the victim's own size, once"
    )


def _counted_more(d: Difference) -> str | None:
    """``_evict`` counted more than one eviction, or more bytes than the victim holds. "More
    than this one eviction" only where the counters rose by a whole number of evictions (2 or
    more, or the victim's size that many times); another number is said as it is."""
    size = _victim_size(d)
    numbers = [d.before.get(n) for n in ("evictions", "evicted_bytes")]
    numbers += [d.mine.get(n) for n in ("evictions", "evicted_bytes")]
    if size is None or not all(isinstance(n, int) for n in numbers):
        return None
    count_before, bytes_before, count_mine, bytes_mine = (int(n or 0) for n in numbers)
    counted, added = count_mine - count_before, bytes_mine - bytes_before
    rule = f"each eviction adds 1 to `evictions` and the victim's size ({size}) to `evicted_bytes`"
    if counted > 1 or (added > size and added % size == 0):
        return f"yours counted more than this one eviction of {d.args[0]!r}: {rule}, once"
    if "evictions" in d.differ:
        return None
    return f"yours added {added} to `evicted_bytes` for {d.args[0]!r}, which holds {size}: {rule}"


def _counted_otherwise(d: Difference) -> str | None:
    """An eviction whose counters moved by a number the call accounts for exactly: the
    victim's size added to `evictions`, `evicted_bytes` set to the size (not added), or
    another resident entry's size added."""
    victim = d.args[0] if d.args else None
    size = _victim_size(d)
    if size is None:
        return None
    numbers = [d.before.get("evicted_bytes"), d.mine.get("evicted_bytes")]
    numbers += [d.before.get("evictions"), d.mine.get("evictions")]
    if not all(isinstance(n, int) for n in numbers):
        return None
    before, mine, count_before, count_mine = (n for n in numbers if isinstance(n, int))
    rule = f"each eviction adds 1 to `evictions` and the victim's size ({size}) to `evicted_bytes`"
    # a size of 2 or 3 could as well be an eviction counted twice or thrice: no reading
    if size > 3 and count_mine - count_before == size and "evictions" in d.differ:
        return f"yours added {size}, the size of {victim!r}, to `evictions`: {rule}"
    if "evictions" in d.differ:
        return None
    if mine == size and before not in (0, size):
        return (
            f"yours set `evicted_bytes` to {size}, the size of {victim!r}, where the reference "
            f"adds it to the {before} counted before: {rule}, adding to what it holds"
        )
    added = mine - before
    others = [
        k
        for k in d.before.get("resident", ())
        if k != victim and call(d.subject, "size_of", k) == added
    ]
    # 1 could as well be evictions' step taken for bytes; two such entries say neither
    if len(others) == 1 and added not in (0, 1, size, 2 * size):
        key = others[0]
        return (
            f"yours added {mine - before}, the size of {key!r}, to `evicted_bytes`, where "
            f"the victim is {victim!r} ({size}): {rule}"
        )
    return None


def _removed_other(d: Difference) -> str | None:
    """``_evict(key)`` that left ``key`` resident and removed another entry instead."""
    victim = d.args[0] if d.args else None
    before, mine = list(d.before.get("resident", ())), list(d.mine.get("resident", ()))
    gone = [k for k in before if k not in mine]
    if victim not in mine or victim not in before or len(gone) != 1:
        return None
    said = (
        f"yours removed {gone[0]!r}, not {victim!r}, the key it was called with: _evict "
        f"removes the key it is given (the victim _next_victim chose)"
    )
    if gone[0] in d.before.get("pins", {}):
        said += f", and {gone[0]!r} is pinned"
    return said


def _kept_old_size(d: Difference) -> str | None:
    """A replacement whose entry keeps the size it had (read back with ``size_of`` on a copy
    after your call): proven, whatever else the call shows."""
    key = d.args[0] if d.args else None
    size = d.args[2] if len(d.args) > 2 else None
    if key not in d.before.get("resident", ()) or not isinstance(size, int) or d.i_raised:
        return None
    old = call(d.subject, "size_of", key)
    after = d.after()
    now = call(after, "size_of", key) if after is not None else None
    if not isinstance(old, int) or now != old or old == size:
        return None
    said = (
        f"yours kept the old size of {key!r}: after put({key!r}, ..., {size}) its size_of is "
        f"still {old}. A replacement records the new size, since a later eviction or "
        "replacement frees the size recorded"
    )
    capacity, used = getattr(d.subject, "capacity", None), d.mine.get("used")
    if isinstance(capacity, int) and isinstance(used, int) and used > capacity:
        said += (
            f"; and it must make room like a new entry: yours left used at {used}, above the "
            f"capacity {capacity}"
        )
    return said


def _evicts_with(d: Difference, size: int) -> bool | None:
    """Whether your put, called again on a copy with ``size`` bytes instead, evicts an entry
    (fewer keys resident than before it, beside the new one); None when it cannot run."""
    if size < 1 or len(d.args) < 3:
        return None
    after = d.after(d.args[0], d.args[1], size)
    keys = call(after, "keys") if after is not None else None
    if not isinstance(keys, list):
        return None
    before = list(d.before.get("resident", ()))
    return any(k not in keys for k in before)


def _replaces(program: str) -> bool:
    """Whether ``program`` puts some key twice (a replacement, unless evicted in between)."""
    keys = re.findall(r"\.put\(\s*('[^']*'|\"[^\"]*\")", program)
    return len(keys) != len(set(keys))


def weight_cache_reading(d: Difference) -> str | None:
    """The rule a weight cache's first diverging call breaks."""
    if d.hidden:
        if d.method == "put":
            said = (
                "yours leaves every field a call shows as the reference's does, yet with the "
                "reference's put in its place the program behaves: what differs is what put "
                "keeps for later, each entry as (size, value): get answers the value, and a "
                "later eviction frees the size recorded"
            )
            replaced = replacement_kept(d.impl) if _replaces(d.program) else frozenset()
            if replaced == {"value"}:
                said += (
                    ". On a new cache of your class, a key put again with another value "
                    "answers its first value on a get: a replacement of yours keeps the old "
                    "value, where a replacement stores the new one"
                )
            elif _replaces(d.program):
                said += (
                    ". It records the size it is given, a replacement's new size too: does a "
                    "replacement of yours keep the old size?"
                )
            return said
        return None
    m, differ = d.method, d.differ
    if m == "put" and (twice := evicted_twice(d)):
        return twice
    if d.i_raised and d.they_raised and d.error("mine") == d.error("theirs") and differ:
        return failed_call(d)
    if m == "_next_victim" and not d.same_outcome:
        return CHOSE.show(d, _weight_cache_victim(d))
    if m == "_check_can_admit" and not d.same_outcome:
        return _weight_cache_admit(d)
    if m in ("pin", "unpin") and d.outcome_pair == VALUE and not differ:
        return (
            returned_other_count(d)
            or returned_count_before(d)
            or returned_bool(d)
            or none_at_last_unpin(d)
            or pin_count_shown(d)
        )
    absent = bool(d.args) and d.args[0] not in d.before.get("resident", ())
    if m == "get" and d.outcome_pair == VALUE:
        pair = CHOSE.show(d, get_answered_pair(d) or get_answered_size(d) or get_answered_newest(d))
        if pair:
            return pair
    if m == "get" and d.i_raised and not d.they_raised and absent:
        return GET_RAISED.show(
            d, "a get of an absent key returns None (and counts a miss); it does not raise"
        )
    if m == "pin" and d.they_raised and not d.i_raised:
        return PIN_LET_THROUGH.show(
            d, f"a pin of an absent key raises {d.error('theirs')} (a KeyError) and records nothing"
        )
    key = d.args[0] if d.args else None
    resident = key in d.before.get("resident", ())
    if m in ("pin", "unpin") and d.i_raised and not d.they_raised and resident:
        pins = d.before.get("pins", {})
        unpinned = isinstance(pins, dict) and key not in pins
        rule = (
            "a pin of a resident key records one more pin; only an absent key is refused"
            if m == "pin"
            else "an unpin of a key with a pin left takes one pin away"
        )
        said = f"yours raised {d.error('mine')} for {key!r}, which is resident: {rule}"
        if m == "pin" and unpinned:
            said += (
                f". It has no pin yet (pins {pins!r}): does yours look for it among the pinned "
                "keys instead of the resident ones?"
            )
        return PIN_REFUSED.show(d, said)
    if m == "unpin" and d.they_raised and not d.i_raised:
        return PIN_LET_THROUGH.show(
            d,
            zero_unpin_let_through(d)
            or "an unpin of a key with no pin left raises and changes nothing: a pin count "
            "never goes below zero",
        )
    victim = d.args[0] if d.args else None
    removed = victim in d.before.get("resident", ()) and victim not in d.mine.get("resident", ())
    if m == "_evict" and d.error("mine").startswith("KeyError") and not d.they_raised and removed:
        return READ_AFTER_REMOVAL.show(
            d,
            f"yours raised KeyError after it removed {victim!r}: a value read after the entry "
            "is gone fails; read what the eviction needs (the victim's size, for `used` and "
            "`evicted_bytes`) before removing it",
        )
    if (
        m in ("_evict", "put")
        and differ & {"evictions", "evicted_bytes"}
        and "resident" not in differ
    ):
        some = bytes_of_some_victims(d)
        if some:
            return COUNTED_OTHERWISE.show(d, some)
        if m == "put" and "used" not in differ:
            return REPLACE_COUNTED.show(
                d,
                "a replacement is not an eviction: replacing a key frees its old bytes without "
                "counting an eviction",
            )
        counted = _counted_otherwise(d) if m == "_evict" else None
        if counted:
            return COUNTED_OTHERWISE.show(d, counted)
        return EVICTION_UNCOUNTED.show(
            d, "count every eviction in `evictions` and the victim's size in `evicted_bytes`"
        ) or (EVICTION_OVERCOUNTED.show(d, _counted_more(d)) if m == "_evict" else None)
    if m == "_evict" and "resident" in differ:
        other = _removed_other(d) or evict_kept_victim(d)
        if other:
            return REMOVED_OTHER.show(d, other)
    if m == "_evict" and "used" in differ:
        return USED_KEPT.show(
            d, "evicting an entry must subtract its size from `used`"
        ) or USED_OVERTAKEN.show(d, _took_more(d))
    kept = _kept_old_size(d) if m == "put" else None
    if kept:
        return kept
    if m == "put" and "resident" in differ:
        mine, theirs = d.mine.get("resident", []), d.theirs.get("resident", [])
        if set(mine) == set(theirs):
            return REFRESHED.show(
                d, "put refreshes the key: a new or replaced key becomes the most recently used"
            )
        capacity = getattr(d.subject, "capacity", None)
        size = d.args[2] if len(d.args) > 2 else None
        used = d.before.get("used")
        if (
            len(mine) < len(theirs)
            and _evicted(d)  # "yours evicted": a key resident before is gone after yours
            and isinstance(capacity, int)
            and isinstance(used, int)
            and isinstance(size, int)
        ):
            if used + size == capacity and _evicts_with(d, size - 1) is False:
                return EVICTED_MORE.show(
                    d,
                    f"yours evicted though the {size} bytes fill the budget exactly: stop "
                    "evicting as soon as the new entry fits (used + size > capacity, not >=)",
                )
            if used + size < capacity:
                # "entries" only where a put of 1 byte evicts too: the number of entries,
                # not the bytes, drove it (a margin kept on the bytes does not, at 1 byte)
                entries = " the budget counts bytes, not entries;" if _evicts_with(d, 1) else ""
                return EVICTED_MORE.show(
                    d,
                    f"yours evicted though {size} bytes fit in the {capacity - used} free:"
                    f"{entries} evict only while used + size > capacity",
                )
        key = d.args[0] if d.args else None
        old = call(d.subject, "size_of", key) if key in d.before.get("resident", ()) else None
        if (
            len(mine) < len(theirs)
            and _evicted(d)
            and isinstance(old, int)
            and isinstance(capacity, int)
            and isinstance(used, int)
            and isinstance(size, int)
            and used - old + size <= capacity < used + size
        ):
            return EVICTED_MORE.show(
                d,
                f"yours evicted to replace {key!r} though {size} bytes fit once its old "
                f"{old} are released ({used} - {old} + {size} <= {capacity}): release the old "
                "entry before the eviction loop; does yours still count it while evicting?",
            )
        if len(mine) < len(theirs) and _evicted(d):
            return EVICTED_MORE.show(
                d, "yours evicted more than needed: stop evicting as soon as the new entry fits"
            )
        if isinstance(d.mine.get("used"), int) and d.grew("used"):
            over = d.mine["used"]
            if isinstance(capacity, int) and over > capacity and len(mine) > 1:
                return EVICTED_LESS.show(
                    d,
                    f"yours left `used` at {over}, above the capacity {capacity}, with "
                    f"{', '.join(map(repr, mine[:-1]))} still resident: evict in a loop until "
                    "the new entry fits, the last old entry too if it must go",
                )
            return EVICTED_LESS.show(
                d,
                "evict in a loop until the new entry fits: one large entry can need the room of "
                "several small ones",
            )
    replacing = bool(d.args) and d.args[0] in d.before.get("resident", ())
    if m == "put" and "used" in differ and replacing:
        return REPLACED_SIZE.show(
            d,
            replaced_signs_swapped(d)
            or "replacing a key must release its old size before adding the new one",
        )
    if m == "put" and {"hits", "misses"} & differ:
        return PUT_COUNTED.show(d, _weight_cache_counters(d))
    if m == "get" and {"hits", "misses"} & differ:
        return COUNTED.show(d, _weight_cache_counters(d))
    if m == "get" and "resident" in differ:
        return REFRESHED.show(
            d, get_moved(d) or "a hit refreshes the key: get moves it to the most recently used end"
        )
    gone = key not in d.mine.get("resident", ()) and key in d.theirs.get("resident", ())
    if m in ("pin", "unpin") and resident and gone:
        return UNPIN_REMOVED.show(
            d,
            f"yours removed {key!r} from the cache on {m}({key!r}): {m}() changes the key's pin "
            "count and nothing else; the entry stays resident (evictable again after its last "
            "unpin)",
        )
    if m in ("pin", "unpin") and "resident" in differ and "pins" not in differ:
        return REFRESHED.show(
            d, f"recency does not change on {m}: the LRU order moves only on get and put"
        )
    if m in ("pin", "unpin") and "pins" in differ:
        counted = pins_said(d)
        if counted:
            return PINS_COUNTED.show(d, counted)
        mine, theirs = d.mine.get("pins", {}), d.theirs.get("pins", {})
        key = d.args[0] if d.args else None
        if m == "pin" and theirs.get(key, 0) > 1 and mine.get(key, 0) == 1:
            return PINS_COUNTED.show(
                d, "pins are counted: two replicas pin twice, so a set of pinned keys is not enough"
            )
        return PINS_COUNTED.show(
            d, "each pin adds 1 to the key's pin count and each unpin takes 1 away"
        )
    return None
