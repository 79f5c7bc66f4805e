"""A kv-offload probe of a hit on a held chunk: a ``get`` of a pinned (or referenced) chunk
is a use like any other, so under LRU it moves the chunk to the newest end; the hold only
keeps it from eviction. A random program seldom reads a held chunk in a tier of several
chunks and then releases it, so a fixed program does."""

from __future__ import annotations

from typing import Any

from servelab.grading.about import About, Hint
from servelab.grading.kv_offload_script import put_chunk, tier_script
from servelab.grading.topic import Probe

__all__ = ["HELD_USE_HINT", "STEP_1_HELD_USES", "held_get_is_a_use"]

HELD_USE_HINT = Hint(
    "a `get` of a pinned or referenced chunk is a use too: under LRU it moves the chunk to the "
    "newest end like any other hit (the hold only keeps it from eviction), so once released it "
    "is evicted after the chunks used less recently",
    About(("get",), ("keys",)),
)


def held_get_is_a_use(impl: Any) -> None:
    """Three chunks; the oldest is held, read, released: LRU moves it to the end, FIFO not."""
    for hold, policy, want in (
        ("pin", "LRU", ["b", "c", "a"]),
        ("ref", "LRU", ["b", "c", "a"]),
        ("pin", "FIFO", ["a", "b", "c"]),
    ):
        s = tier_script(impl, 100, policy)
        for k in "abc":
            put_chunk(s, k, 10)
        s.call(hold, "a")
        s.call("get", "a")
        s.call(f"un{hold}", "a")
        s.expect(
            s.keys(),
            want,
            f"{policy} order (next victim first) after {hold}('a'), get('a'), un{hold}('a')",
        )


STEP_1_HELD_USES = (Probe("a hit on a held chunk is a use", HELD_USE_HINT, held_get_is_a_use),)
