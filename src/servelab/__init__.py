"""servelab: the memory systems of an LLM serving node, as a course and a reference package.

The course half (weight cache, policies, block manager, scheduler, graders, widgets) imports
without torch. The device half (``servelab.kv.pool``, ``attention``, ``model``, ``engine``,
``servelab.weights.store`` and its ``fileformat``) needs torch and is imported only from those
modules.
"""

from servelab.carry_forward import mine
from servelab.checkpoints import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv import (
    BlockManager,
    DuplicateSequence,
    InvalidBlock,
    InvalidBlockHash,
    InvalidConfig,
    InvalidExtraKey,
    InvalidLength,
    InvalidRequest,
    InvalidSchedulerConfig,
    InvalidSequenceId,
    KVCacheError,
    KVDivergence,
    NotASequence,
    OutOfBlocks,
    PrefixCachingBlockManager,
    RepeatedInStep,
    RequestTooLarge,
    Scheduler,
    SchedulerError,
    SequenceExists,
    SequenceFinished,
    TokenNotAppended,
    UnknownSequence,
)
from servelab.native import compiled
from servelab.units import GB, MB, TB, format_bytes
from servelab.weights import (
    LRU,
    CacheStats,
    EntryPinned,
    EntryTooLarge,
    EvictionPolicy,
    InvalidPolicy,
    InvalidSize,
    NotPinned,
    NotResident,
    NoVictim,
    PinnedCapacityExceeded,
    PolicyInconsistent,
    PolicyInUse,
    WeightCache,
    WeightCacheError,
)

__version__ = "0.1.0"

__all__ = [
    "GB",
    "LRU",
    "MB",
    "TB",
    "BlockManager",
    "CacheStats",
    "DuplicateSequence",
    "EntryPinned",
    "EntryTooLarge",
    "EvictionPolicy",
    "GradeFailure",
    "InvalidBlock",
    "InvalidBlockHash",
    "InvalidConfig",
    "InvalidExtraKey",
    "InvalidLength",
    "InvalidPolicy",
    "InvalidRequest",
    "InvalidSchedulerConfig",
    "InvalidSequenceId",
    "InvalidSize",
    "KVCacheError",
    "KVDivergence",
    "NoVictim",
    "NotASequence",
    "NotPinned",
    "NotResident",
    "OutOfBlocks",
    "PinnedCapacityExceeded",
    "PolicyInUse",
    "PolicyInconsistent",
    "PrefixCachingBlockManager",
    "RepeatedInStep",
    "RequestTooLarge",
    "Scheduler",
    "SchedulerError",
    "SequenceExists",
    "SequenceFinished",
    "TokenNotAppended",
    "UnknownSequence",
    "WeightCache",
    "WeightCacheError",
    "__version__",
    "checkpoint",
    "compiled",
    "format_bytes",
    "grade",
    "mine",
]
