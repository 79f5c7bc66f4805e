"""The engine's KV connector: GPU prefix-cache blocks go down to the offload tiers and come back.

This is where :class:`~servelab.kv.engine.Engine` meets :class:`~servelab.kv.offload.hierarchy.
OffloadHierarchy`, in the two places LMCache's connector hooks into vLLM:

* **Store on reclaim (write-back).** The GPU prefix cache reclaims an evictable cached block
  lazily, when a new allocation needs it (:mod:`servelab.kv.prefix`).
  :class:`OffloadingBlockManager` reports that moment, and the connector copies the block's KV
  out of the pool into the first tier before the block is handed to its new owner (the engine
  writes the pool only after the scheduler's step, so the copy reads the old contents). With
  ``write_through`` a prompt's full blocks are stored as soon as their prefill computed them,
  and each chunk the first tier takes is written to the second at once: reclaiming then costs no
  copy, at the price of storing every block, hot or cold.
* **Load on a miss.** When a prompt is admitted, the GPU prefix cache gives its cached leading
  tokens. The connector looks the next blocks up in the tiers (pinning what it finds), copies
  each found chunk into the block the prompt was just given, and the prefill starts after them.

One chunk is one GPU block, keyed by the block's name (a SHA-256 chained over the prefix, the
same in every process, as the disk tier needs). LMCache's chunks are 256 tokens; here a chunk
follows the engine's block size, so a hit is never cut inside a chunk. A device module: it
imports torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from servelab.kv.blocks import InvalidConfig
from servelab.kv.offload.cpu import cpu_tier
from servelab.kv.offload.disk import disk_tier
from servelab.kv.offload.errors import OffloadError
from servelab.kv.offload.hierarchy import OffloadHierarchy
from servelab.kv.offload.tier import Tier
from servelab.kv.pool import KVPool
from servelab.kv.prefix import PrefixCachingBlockManager

__all__ = ["OffloadConnector", "OffloadStats", "OffloadingBlockManager", "build_hierarchy"]


class OffloadingBlockManager(PrefixCachingBlockManager):
    """A prefix-caching block manager that reports each cached block it reclaims."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        super().__init__(num_blocks, block_size)
        self.on_reclaim: Callable[[int, int], None] | None = None

    def _evict(self, block: int) -> None:
        name = self.block_hash(block)
        if self.on_reclaim is not None and name is not None:
            self.on_reclaim(block, name)
        super()._evict(block)


@dataclass
class OffloadStats:
    """What went down and what came back, in GPU blocks."""

    stored: int = 0  # blocks copied into the first tier
    store_misses: int = 0  # blocks the first tier had no room for (all pinned)
    loaded: dict[str, int] = field(default_factory=dict)  # blocks loaded, by their tier
    store_errors: int = 0  # stores a tier refused with an error (dropped: offload is best effort)
    load_errors: int = 0  # lookups whose chunks did not verify (recomputed instead)

    @property
    def loaded_blocks(self) -> int:
        return sum(self.loaded.values())


def build_hierarchy(
    *,
    cpu_bytes: int,
    disk_bytes: int = 0,
    disk_dir: str | Path | None = None,
    write_through: bool = False,
) -> OffloadHierarchy:
    """A CPU tier, and a disk tier under it when ``disk_bytes`` and ``disk_dir`` are given."""
    if (disk_bytes > 0) != (disk_dir is not None):
        raise InvalidConfig("a disk tier needs both offload_disk_bytes > 0 and offload_disk_dir")
    tiers: list[Tier[Any]] = [cpu_tier(cpu_bytes)]
    if disk_dir is not None:
        tiers.append(disk_tier(disk_dir, disk_bytes))
    return OffloadHierarchy(tiers, write_through=write_through)


class OffloadConnector:
    """Moves KV blocks between the engine's pool and an :class:`OffloadHierarchy`."""

    def __init__(
        self,
        pool: KVPool,
        bm: OffloadingBlockManager,
        hierarchy: OffloadHierarchy,
        *,
        write_through: bool = False,
    ) -> None:
        self.pool = pool
        self.bm = bm
        self.hierarchy = hierarchy
        self.write_through = write_through
        self.stats = OffloadStats()
        bm.on_reclaim = self.store_block

    def store_block(self, block: int, name: int) -> None:
        """Copy ``block``'s KV into the first tier (a touch if it holds the chunk already).

        Offloading is best effort: a store the tiers refuse with an error (a disk that is full
        or failing) is counted and dropped, since it runs inside the block manager's
        allocation, which must not fail because a cache below it did. Every tier is unchanged
        after such an error."""
        fresh = name not in self.hierarchy.tiers[0]
        try:
            result = self.hierarchy.store(name, self._read(block))
        except (OffloadError, OSError):
            self.stats.store_errors += 1
            return
        if result.stored:
            self.stats.stored += fresh
        else:
            self.stats.store_misses += 1

    def _read(self, block: int) -> torch.Tensor:
        return self.pool.kv[:, :, block].clone()  # [layers, 2, block_size, kv_heads, head_dim]

    def load(self, table: Sequence[int], cached: int, num_tokens: int) -> int:
        """Fill the blocks after the ``cached`` leading tokens from the tiers; returns the new
        count of tokens whose KV is present. The last token is always left to compute (its
        logits start decoding), as the GPU prefix cache does."""
        size = self.pool.block_size
        first, last = cached // size, (num_tokens - 1) // size
        keys = []
        for i in range(first, last):
            name = self.bm.block_hash(table[i])
            if name is None:  # a private block: no name to look up, and none after it
                break
            keys.append(name)
        if not keys:
            return cached
        lookup = self.hierarchy.lookup(keys)
        if not lookup.hits:
            self.hierarchy.release(lookup)
            return cached
        tiers = [self.hierarchy.tiers[i].name for _, i in lookup.found]
        try:
            payloads = self.hierarchy.retrieve(lookup)
        except (OffloadError, OSError):  # a chunk that does not verify: recompute instead
            self.hierarchy.release(lookup)
            self.stats.load_errors += 1
            self._drop_unreadable([(k, self.hierarchy.tiers[i]) for k, i in lookup.found])
            return cached
        blocks = [table[first + i] for i in range(len(payloads))]
        idx = torch.tensor(blocks, device=self.pool.device)
        staged = torch.stack([p.to(self.pool.device, self.pool.dtype) for p in payloads], dim=2)
        self.pool.kv.index_copy_(2, idx, staged)
        for t in tiers:
            self.stats.loaded[t] = self.stats.loaded.get(t, 0) + 1
        return cached + len(payloads) * size

    @staticmethod
    def _drop_unreadable(chunks: list[tuple[int, Tier[Any]]]) -> None:
        """Remove the chunks that no longer verify, so no later lookup trips on them again."""
        for key, tier in chunks:
            try:
                tier.get(key)
            except (OffloadError, OSError):
                with contextlib.suppress(OffloadError):
                    tier.remove(key)

    def store_computed(self, table: Sequence[int], num_tokens: int) -> None:
        """Write-through: store the full named blocks of a prefill just computed."""
        for i in range(num_tokens // self.pool.block_size):
            name = self.bm.block_hash(table[i])
            if name is not None and not self.hierarchy.where(name):
                self.store_block(table[i], name)
