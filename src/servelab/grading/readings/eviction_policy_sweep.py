"""Two SIEVE sweeps that misread visited bits, proven on fresh policies of yours (or copies)
driven through their public calls, each beside a run that shows yours reads bits otherwise:
the key under the hand taken without looking at its bit, and a wrap past the newest key that
clears bits the hand never reached."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["hand_key_unlooked", "wrap_cleared"]

KEYS = ("k0", "k1", "k2", "k3")


def _sieve(d: Difference) -> type | None:
    impl = d.impl if d.subject is None else type(d.subject)
    if isinstance(impl, dict):
        impl = impl.get("SIEVE")
    return impl if isinstance(impl, type) else None


def _bit(p: Any, key: str) -> bool | None:
    """``key``'s visited bit in ``p.visited`` (a dict of bits or a set of keys); None where
    yours keeps it otherwise."""
    visited = getattr(p, "visited", None)
    if isinstance(visited, dict):
        return bool(visited.get(key))
    return key in visited if isinstance(visited, set | frozenset) else None


def _victims(cls: type, hits: tuple[str, ...]) -> tuple[Any, Any, Any, tuple[Any, ...]] | None:
    """On a fresh ``cls``: put KEYS, pop once, hit ``hits``, pop again: (first victim, the
    hand after it, second victim, the bits of ``hits`` just before that pop); None where that
    cannot run."""
    try:
        with line_budget(LINES_PER_CALL):
            p = cls()
            for k in KEYS:
                p.update_on_put(k, 1)
            first = p.pop_victim()
            hand = getattr(p, "hand", None)
            for k in hits:
                p.update_on_hit(k)
            bits = tuple(_bit(p, k) for k in hits)
            return first, hand, p.pop_victim(), bits
    except (Exception, OutOfLines):
        return None


def hand_key_unlooked(d: Difference) -> str | None:
    """Said only where, on fresh policies of yours, the first victim is the oldest key and the
    hand then rests on the next; a hit on that key sets its bit and still gets it evicted
    next; and a hit on a key the hand reaches later (with the hand at rest on the oldest,
    after no eviction) does protect that key: yours skips the bit of the key under the hand
    only."""
    cls = _sieve(d)
    if cls is None:
        return None
    plain = _victims(cls, ())
    under = _victims(cls, ("k1",))
    if plain != ("k0", "k1", "k1", ()) or under != ("k0", "k1", "k1", (True,)):
        return None
    later = _victims(cls, ("k1", "k2"))
    if later is None or later[2] != "k1":
        return None
    try:
        with line_budget(LINES_PER_CALL):
            p = cls()
            for k in KEYS:
                p.update_on_put(k, 1)
            p.update_on_hit("k0")
            protected = p.pop_victim() == "k1"
    except (Exception, OutOfLines):
        return None
    if not protected:
        return None
    return (
        "yours evicts the key under the hand without looking at its bit: made again on a fresh "
        f"policy, with keys {list(KEYS)} put, one eviction ('k0', the hand then on 'k1') and "
        "a hit on 'k1', yours evicts 'k1' though its bit is set, where the hand clears it and "
        "evicts 'k2'; yet a hit on 'k0' with the hand at rest protects it (yours evicts 'k1' "
        "then). The hand's own key is examined like any other: a set bit is cleared and the "
        "hand moves on to the next newer key"
    )


def wrap_cleared(d: Difference) -> str | None:
    """Said only where, on a copy of the policy before the call with two new keys put (n1, n2)
    and the hand on the newest, bits set on it, on the oldest key and on n1 and the second
    key clear, yours evicts the oldest key and n1 has lost its bit, which the hand never
    reached (the reference evicts the second key, n1 keeping its bit)."""
    subject = d.subject
    queue = list(getattr(subject, "queue", []) or [])
    if not queue or getattr(subject, "pinned", None):
        return None
    new = ["n1", "n2"]
    if any(k in queue for k in new) or not all(type(k) is str for k in queue):
        return None
    try:
        p = copy.deepcopy(subject)
        with line_budget(LINES_PER_CALL):
            for k in new:
                p.update_on_put(k, 1)
            keys = list(p.queue)
            if keys[-2:] != new or len(keys) < 4:
                return None
            oldest, second = keys[0], keys[1]
            p.visited = {k: k in (oldest, new[0], new[1]) for k in keys}
            p.hand = new[1]
            victim = p.pop_victim()
            bit = bool(p.visited.get(new[0]))
    except (Exception, OutOfLines):
        return None
    if victim != oldest or bit:
        return None
    return (
        f"yours clears bits the hand has not reached when it wraps: made again on a copy with "
        f"keys {keys}, the hand on {new[1]!r} and bits set on {new[1]!r}, {oldest!r} and "
        f"{new[0]!r}, yours evicts {oldest!r}, whose bit was set, and {new[0]!r} has lost its "
        f"bit though the hand never reached it; the hand clears {new[1]!r}, wraps, clears "
        f"{oldest!r} and evicts {second!r}, the first key with no bit, and {new[0]!r} keeps its "
        "bit. The hand clears only the bit of each key it passes, one key at a time"
    )
