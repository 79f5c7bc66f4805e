"""The weight cache of a serving node: byte budget, eviction policies, pins, the store."""

from servelab.weights.cache import (
    CacheStats,
    EntryPinned,
    EntryTooLarge,
    InvalidSize,
    NotPinned,
    NotResident,
    PinnedCapacityExceeded,
    WeightCache,
    WeightCacheError,
)
from servelab.weights.policies import (
    FIFO,
    GDSF,
    LFU,
    LRU,
    MRU,
    POLICIES,
    S3FIFO,
    SIEVE,
    EvictionPolicy,
    NoVictim,
)

__all__ = [
    "FIFO",
    "GDSF",
    "LFU",
    "LRU",
    "MRU",
    "POLICIES",
    "S3FIFO",
    "SIEVE",
    "CacheStats",
    "EntryPinned",
    "EntryTooLarge",
    "EvictionPolicy",
    "InvalidSize",
    "NoVictim",
    "NotPinned",
    "NotResident",
    "PinnedCapacityExceeded",
    "WeightCache",
    "WeightCacheError",
]
