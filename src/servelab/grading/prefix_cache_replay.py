"""How diagnosis replays the programs of topic ``prefix-cache``: names, state, values, and the
programs that tell its known mistakes apart (:mod:`servelab.grading.diagnose`).

Apart from :mod:`servelab.grading.prefix_cache` only to keep each file short enough to read in
one sitting; the topic declares :data:`REPLAY` as its own.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from servelab.grading.block_manager import BLOCK_ERRORS, block_value, blocks_ns, graded_blocks
from servelab.grading.observe import Canon, prefix_fields
from servelab.grading.readings.prefix_cache import prefix_cache_reading
from servelab.grading.replay import TopicReplay, program

__all__ = ["REPLAY", "SEPARATING"]


def _prefix_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    bm = ns.get("bm")
    return None if bm is None else graded_blocks(prefix_fields(bm, canon))


SEPARATING = (
    program(
        "bm = PrefixBlockManager(8, 2)",
        "bm.allocate(0, [1, 1, 5])",
        "bm.allocate(1, [1, 1, 1, 1, 5])",
        "bm.allocate(2, [1, 1, 1, 1])",
        "bm.free_seq(0)",
        "bm.free_seq(1)",
        "bm.free_seq(2)",
        "bm.allocate(3, [1, 1, 1, 1, 5])",
        "bm.free_seq(3)",
        "bm.allocate(4, [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7])",
        "bm.num_cached_tokens([1, 1, 1, 1, 5])",
        "bm.num_cached_tokens([1, 1, 2, 2, 5])",
    ),
    program(  # a private copy of a cached block, then the cached one evicted
        "bm = PrefixBlockManager(5, 2)",
        "bm.allocate(0, [1, 2, 3])",
        "bm.allocate(1, [1, 2])",
        "bm.append_slot(1, 3)",
        "bm.append_slot(1, 4)",
        "bm.free_seq(0)",
        "bm.allocate(2, [7, 7, 7, 7, 7])",
        "bm.num_cached_tokens([1, 2, 3, 4, 5])",
    ),
    program(  # reclaim order: least recently freed first, and a hit refreshes it
        "bm = PrefixBlockManager(4, 1)",
        "bm.allocate(0, [1, 2])",
        "bm.free_seq(0)",
        "bm.allocate(1, [5, 6])",
        "bm.free_seq(1)",
        "bm.allocate(2, [1, 9])",
        "bm.free_seq(2)",
        "bm.allocate(3, [7, 7, 7])",
        "bm.num_cached_tokens([1, 1])",
        "bm.evictable()",
    ),
    program(
        "bm = PrefixBlockManager(4, 2)",
        "bm.allocate(0, [1, 2, 3, 4, 5])",
        "bm.free_seq(0)",
        "bm.allocate(1, [1, 2, 9])",
        "bm.allocate(2, [6, 6, 6])",
        "bm.append_slot(2, 6)",
        "bm.num_cached_tokens([1, 2, 3, 4, 5])",
        "bm.allocate(3, [3, 4, 3])",
    ),
    program(  # a hash that collides, then the same block evicted: trusting vs keeping a hash
        "bm = PrefixBlockManager(5, 2)",
        "bm.allocate(0, [1, 2, 3])",
        "bm.free_seq(0)",
        "bm.tokens[0] = (0, 0)",
        "bm.num_cached_tokens([1, 2, 3])",
        "bm.allocate(1, [7, 7, 7, 7, 7, 7, 7, 7, 7])",
        "bm.num_cached_tokens([1, 2, 3])",
    ),
)

REPLAY = TopicReplay(
    "prefix cache",
    blocks_ns("PrefixBlockManager"),
    _prefix_state,
    block_value,
    BLOCK_ERRORS,
    SEPARATING,
    subject="bm",
    classes=("PrefixBlockManager",),
    fields=prefix_fields,
    reader=prefix_cache_reading,
)
"""How diagnosis replays this topic's programs (:mod:`servelab.grading.diagnose`)."""
