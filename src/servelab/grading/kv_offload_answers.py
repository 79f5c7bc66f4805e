"""kv-offload probes of what a call answers, at the edges a random program seldom reaches:
the counts pin/unpin and ref/unref return past a count of 1, a chunk that fits exactly (the
free bytes, the whole tier), a chunk too large for a tier that already holds its key, a
store that evicts nothing, and a retrieve of more than one chunk, which must unpin them all.
Each is a fixed program, so the situation is reached whatever the random programs draw."""

from __future__ import annotations

from typing import Any

from servelab.grading.about import RESULT, About, Hint
from servelab.grading.kv_offload_hints import HINTS
from servelab.grading.kv_offload_script import hierarchy_script, put_chunk, store_chunk, tier_script
from servelab.grading.topic import Probe
from servelab.testing.kv_offload import offload_fields

__all__ = [
    "ANSWER_HINTS",
    "STEP_1_ANSWERS",
    "STEP_3_ANSWERS",
    "counts_past_one",
    "exact_fits",
    "retrieve_unpins_each",
    "store_answers_true",
    "too_large_when_held",
]

ANSWER_HINTS: dict[str, Hint] = {
    "exact-fit": Hint(
        "a chunk fits while its size <= the free bytes (an exact fit fits), and is too large "
        "only when it is larger than the whole tier (size > capacity): one of exactly the "
        "capacity is stored, with no victim",
        About(("put", "_choose_victims"), (RESULT, "keys", "used")),
    ),
    "too-large-held": Hint(
        "a chunk larger than the whole tier raises ChunkTooLarge whatever the tier holds, its "
        "own key included: `put` checks the size before anything else",
        About(("put",), (RESULT, "keys", "used")),
    ),
    "store-answer": Hint(
        "store returns True when the CPU tier took the chunk, even when it evicted nothing "
        "(put returned [], an empty list of victims), and False only for a miss (put "
        "returned None): test `is None`, not the list's truth",
        About(("store",), (RESULT,)),
    ),
    "retrieve-unpins": Hint(
        "retrieve ends by dropping, for every chunk of the lookup, the transfer's reference "
        "and the lookup's pin, in the tier it was found in: no chunk it read stays pinned",
        About(("retrieve",), ("pins", "refs")),
    ),
}


def counts_past_one(impl: Any) -> None:
    """Two pins and two transfers on one chunk: each call returns the count it leaves."""
    s = tier_script(impl, 100)
    put_chunk(s, "a", 10)
    steps = [("pin", 1), ("pin", 2), ("unpin", 1), ("ref", 2), ("ref", 3), ("unref", 2)]
    steps += [("unref", 1), ("unpin", 0)]
    for method, want in steps:
        got = s.call(method, "a")
        what = "pin count now" if "pin" in method else "ref_count now: 1 + transfers"
        s.expect(got, want, f"tier.{method}('a') returned value (the {what})", "count-returned")


def exact_fits(impl: Any) -> None:
    """A chunk of exactly the capacity in an empty tier, then one of exactly the free bytes."""
    s = tier_script(impl, 100)
    s.expect(put_chunk(s, "a", 100), [], "tier.put('a', payload('a', 100)) in a 100-byte tier")
    s.expect(s.keys(), ["a"], "tier.keys()")
    s.call("remove", "a")
    put_chunk(s, "b", 60)
    s.expect(put_chunk(s, "c", 40), [], "tier.put('c', payload('c', 40)) with 40 bytes free")
    s.expect(s.keys(), ["b", "c"], "tier.keys()")


def too_large_when_held(impl: Any) -> None:
    """A tier holding 'a': a put of 'a' larger than the whole tier raises, changing nothing."""
    s = tier_script(impl, 100)
    put_chunk(s, "a", 10)
    before = offload_fields(s.obj)
    code = "tier.put('a', payload('a', 101))"
    try:
        got = s(code)
    except ValueError:
        after = offload_fields(s.obj)
        if after != before:
            raise s.fail(f"{code} raised, but the tier changed: {before} -> {after}") from None
        return
    except Exception as exc:
        raise s.fail(f"{code} raised {type(exc).__name__}, expected ChunkTooLarge") from exc
    raise s.fail(
        f"{code} returned {got!r}; 'a' is held already, yet 101 bytes are more than the whole "
        "100-byte tier: the reference raises ChunkTooLarge and changes nothing"
    )


def store_answers_true(impl: Any) -> None:
    """A store into an empty hierarchy evicts nothing and is no miss: it returns True."""
    s = hierarchy_script(impl, 60, 120)
    s.expect(store_chunk(s, "a", 5), True, "h.store('a', payload('a', 5)) returned value")


def retrieve_unpins_each(impl: Any) -> None:
    """Two chunks in the CPU tier, both looked up and retrieved: neither stays pinned."""
    s = hierarchy_script(impl, 60, 120)
    store_chunk(s, "a", 10)
    store_chunk(s, "b", 10)
    s("found = h.lookup(['a', 'b'])")
    s("h.retrieve(found)")
    for key in ("a", "b"):
        got = s(f"h.tiers[0].pin_count({key!r})")
        s.expect(got, 0, f"h.tiers[0].pin_count({key!r}) after the retrieve")
        got = s(f"h.tiers[0].ref_count({key!r})")
        s.expect(got, 1, f"h.tiers[0].ref_count({key!r}) after the retrieve")


#: Appended to step 1's probes (steps 2-4 run them too) and to step 3's.
STEP_1_ANSWERS = (
    Probe("each count call returns the count", HINTS["count-returned"], counts_past_one),
    Probe("an exact fit fits", ANSWER_HINTS["exact-fit"], exact_fits),
    Probe("too large though held", ANSWER_HINTS["too-large-held"], too_large_when_held),
)
STEP_3_ANSWERS = (
    Probe("a store that evicts nothing", ANSWER_HINTS["store-answer"], store_answers_true),
    Probe("a retrieve unpins each chunk", ANSWER_HINTS["retrieve-unpins"], retrieve_unpins_each),
)
