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
from servelab.weights.policies import LRU, EvictionPolicy, NoVictim

__all__ = [
    "LRU",
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
