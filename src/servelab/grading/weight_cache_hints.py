"""The hints of the ``weight-cache`` grader, by rule: the rule a check was written for, and the
methods and fields it speaks of (:class:`~servelab.grading.about.About`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servelab.grading.about import About, Hint

if TYPE_CHECKING:
    from servelab.grading.localise import Divergence

__all__ = ["HINTS", "PINNED_ONCE", "stored"]


def stored(divergence: Divergence | None) -> bool:
    """Whether your put left its key resident where the reference's does: a rule about how
    much a put evicts is about a put that stored its entry (one that stored nothing evicted
    nothing for it, too many or too few). No call found: no evidence against it."""
    if divergence is None:
        return True
    key: Any = divergence.args[0] if divergence.args else None
    before = divergence.before.get("resident", ())
    mine = divergence.mine[1].get("resident", before)
    theirs = divergence.theirs[1].get("resident", before)
    return key in mine or key not in theirs


HINTS = {
    "evicted-too-few": Hint(
        "evict in a loop until the new entry fits: one large model can need the space of "
        "several small ones (evicting exactly one is not enough)",
        About(("put",), ("resident", "used"), holds=stored),
    ),
    "evicted-too-many": Hint(
        "stop evicting as soon as used + size <= capacity; and the budget is bytes, not a count",
        About(("put",), ("resident", "used", "evictions", "evicted_bytes"), holds=stored),
    ),
    "within-budget": Hint(
        "the budget is bytes: used + size must stay <= capacity after every put",
        About(("put",), ("used",)),
    ),
    "pinned-evicted": Hint(
        "pinned entries are never victims: skip them when choosing what to evict",
        About(("_next_victim",)),
    ),
    "wrong-victim": Hint(
        "the victim is the least recently used unpinned entry: get and put both refresh a key",
        About(("_next_victim", "get", "put")),
    ).before(3, "the victim is the least recently used entry: get and put both refresh a key"),
    "recency-order": Hint(
        "keys() lists least recently used first: move a key to the end on get and on put",
        About(("get", "put"), ("resident",)),
    ),
    "bytes-accounted": Hint(
        "used must equal the sum of resident sizes: subtract each victim's size, and release "
        "the old size when a key is replaced",
        About(("_evict", "put"), ("used",)),
    ).before(
        2, "used must equal the sum of resident sizes: release the old size when a key is replaced"
    ),
    "pin-count": Hint(
        "pins are counts (two replicas can pin one model), not a set",
        About(("pin", "unpin"), ("pins",)),
    ),
    "pin-returns-count": Hint(
        "pin() returns the count after adding this pin (the first pin returns 1), unpin() the "
        "pins left after removing one",
        About(("pin", "unpin")),
    ),
    "unexpected-error": Hint(
        "this put fits after evicting unpinned entries, so it must not raise",
        About(("put", "_check_can_admit")),
    ),
    "wrong-error": Hint(
        "larger than the whole cache is a ValueError (permanent); blocked by pins is a "
        "MemoryError (transient)",
        About(("_check_can_admit",)),
    ),
    "miss-instead-of-raise": Hint(
        "a `put` that cannot be admitted must raise, not return: a silent miss hides a "
        "configuration error or a transient pin problem",
        About(("put", "_check_can_admit")),
    ),
    "changed-on-error": Hint(
        "decide whether the entry can be admitted before evicting anything, so a raised error "
        "leaves the cache unchanged",
        About(("put", "_check_can_admit")),
    ),
    "pins-on-error": Hint(
        "check before changing anything: a pin or unpin that raises must leave every pin "
        "count as it was",
        About(("pin", "unpin"), ("pins",)),
    ),
    "pin-missing": Hint("pin() of a key that is not resident must raise KeyError", About(("pin",))),
    "replace-pinned": Hint(
        "put() must not replace a pinned key: raise (EntryPinned) and leave the cache as it "
        "was; replace a pinned key only after its replicas unpin it",
        About(("put", "_check_can_admit")),
    ),
    "error-names-keys": Hint(
        "the MemoryError must name the pinned keys: the operator has to look at those",
        About(("_check_can_admit",)),
    ),
    "unpin-too-many": Hint(
        "unpin() without a matching pin() must raise and leave the count at 0",
        About(("unpin",), ("pins",)),
    ),
    "bad-size": Hint(
        "a size must be a positive number of bytes: raise ValueError otherwise",
        About(("put", "_check_can_admit")),
    ),
    "get-value": Hint("get returns the stored value on a hit and None on a miss", About(("get",))),
    "stats": Hint(
        "count a hit or a miss on every get, and every eviction with its bytes",
        About(("get", "_evict"), ("hits", "misses", "evictions", "evicted_bytes")),
    ),
    "exception": Hint(
        "your cache raised where the model expected success; see the message above", About()
    ),
    "unpin-error-type": Hint(
        "unpin() of a key that is not pinned, resident or not, raises ValueError (not "
        "KeyError), and changes nothing",
        About(("unpin",)),
    ),
    "pin-error-type": Hint(
        "pin() of a key that is not resident raises KeyError, and changes nothing",
        About(("pin",)),
    ),
    "size-not-int": Hint(
        "a size that is not an int (2.5, 10.0) raises ValueError: check the type, not only "
        "the sign",
        About(("put", "_check_can_admit")),
    ),
    "error-order": Hint(
        "_check_can_admit checks in the notebook's order: a bad size (ValueError), then "
        "larger than the cache (EntryTooLarge), then the key pinned (EntryPinned), then the "
        "pinned bytes (PinnedCapacityExceeded)",
        About(("_check_can_admit",)),
    ),
}

#: A probe's hint and a reading's rule alike (not a rule the state machine names): the pinned
#: bytes count each pinned entry once.
PINNED_ONCE = Hint(
    "count each pinned entry's bytes once in the pinned bytes, however many pins it has "
    "(not once per pin)",
    About(("_check_can_admit",)),
)
