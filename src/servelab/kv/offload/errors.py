"""The errors of the KV offload tiers: one base, each a subclass of the builtin it refines.

Every call validates its input before it changes anything, so after any of these errors every
tier is exactly as it was (strong exception safety).
"""

from __future__ import annotations

__all__ = [
    "ChunkInUse",
    "ChunkNotFound",
    "ChunkNotPinned",
    "ChunkNotReferenced",
    "ChunkTooLarge",
    "CorruptChunk",
    "InvalidChunkKey",
    "InvalidPayload",
    "InvalidTierConfig",
    "LookupClosed",
    "OffloadError",
    "OffloadPolicyInconsistent",
    "PinnedMemoryUnavailable",
    "TierIOError",
    "TierInUse",
]


class OffloadError(Exception):
    """Base of every error the offload tiers raise."""


class InvalidTierConfig(OffloadError, ValueError):
    """A capacity, policy, wait bound or chunk size that cannot work."""


class InvalidChunkKey(OffloadError, TypeError):
    """A key a tier cannot name (the disk tier needs a 256-bit chunk name)."""


class InvalidPayload(OffloadError, TypeError):
    """A payload this tier's storage cannot hold (bytes for host memory, a tensor for CPU)."""


class ChunkTooLarge(OffloadError, ValueError):
    """Permanent: the chunk is larger than the whole tier, so no eviction or wait can help."""


class ChunkNotFound(OffloadError, KeyError):
    """The chunk is not in this tier."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


class ChunkInUse(OffloadError, RuntimeError):
    """Removing a chunk that a lookup pins or a transfer references would free memory in use."""


class ChunkNotPinned(OffloadError, ValueError):
    """``unpin`` without a matching ``pin``: a pin count never goes below zero."""


class ChunkNotReferenced(OffloadError, ValueError):
    """``unref`` without a matching ``ref``: the tier's own reference is not the caller's."""


class LookupClosed(OffloadError, RuntimeError):
    """The lookup was already retrieved or released: its pins are gone."""


class CorruptChunk(OffloadError, ValueError):
    """A chunk file that does not verify (torn, truncated, flipped bits, another key's)."""


class TierIOError(OffloadError, OSError):
    """The storage under a tier failed (disk full, permissions); nothing was changed."""


class PinnedMemoryUnavailable(OffloadError, RuntimeError):
    """``pin_memory=True`` without CUDA: page-locked host memory needs a CUDA build and GPU."""


class TierInUse(OffloadError, ValueError):
    """A tier (or its policy) already belongs to another hierarchy or tier."""


class OffloadPolicyInconsistent(OffloadError, RuntimeError):
    """The eviction policy named a victim that is absent, pinned or referenced, or none at all
    although evictable bytes remain. Every tier is left unchanged."""
