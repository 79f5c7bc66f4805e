"""KV offload: tiers of KV chunks under the GPU prefix cache (LMCache's storage backends).

* :mod:`~servelab.kv.offload.tier`: one tier: budget, policy, pins, references, bounded waits;
* :mod:`~servelab.kv.offload.hierarchy`: the tiers together: store, lookup, retrieve, release;
* :mod:`~servelab.kv.offload.disk`: the disk tier (atomic, verified files);
* :mod:`~servelab.kv.offload.cpu`: the CPU tier (host tensors; imports torch, so not here).
"""

from servelab.kv.offload.disk import DiskStorage, disk_tier
from servelab.kv.offload.errors import (
    ChunkInUse,
    ChunkNotFound,
    ChunkNotPinned,
    ChunkNotReferenced,
    ChunkTooLarge,
    CorruptChunk,
    InvalidChunkKey,
    InvalidPayload,
    InvalidTierConfig,
    LookupClosed,
    OffloadError,
    OffloadPolicyInconsistent,
    PinnedMemoryUnavailable,
    TierInUse,
    TierIOError,
)
from servelab.kv.offload.hierarchy import (
    DEFAULT_CHUNK_TOKENS,
    Lookup,
    OffloadHierarchy,
    OffloadSummary,
    StoreResult,
    chunk_keys,
)
from servelab.kv.offload.tier import HostStorage, PutResult, Storage, Tier, TierStats, Wait

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "ChunkInUse",
    "ChunkNotFound",
    "ChunkNotPinned",
    "ChunkNotReferenced",
    "ChunkTooLarge",
    "CorruptChunk",
    "DiskStorage",
    "HostStorage",
    "InvalidChunkKey",
    "InvalidPayload",
    "InvalidTierConfig",
    "Lookup",
    "LookupClosed",
    "OffloadError",
    "OffloadHierarchy",
    "OffloadPolicyInconsistent",
    "OffloadSummary",
    "PinnedMemoryUnavailable",
    "PutResult",
    "Storage",
    "StoreResult",
    "Tier",
    "TierIOError",
    "TierInUse",
    "TierStats",
    "Wait",
    "chunk_keys",
    "disk_tier",
]
