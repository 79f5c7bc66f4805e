"""The KV cache of a serving node: paged blocks, prefix caching, scheduling, the device pool.

Only the torch-free modules are imported here, so ``import servelab.kv`` stays light;
import ``servelab.kv.pool`` / ``servelab.kv.engine`` explicitly for the device half.
"""

from servelab.kv.blocks import (
    BlockManager,
    InvalidBlock,
    InvalidConfig,
    InvalidLength,
    InvalidSequenceId,
    KVCacheError,
    OutOfBlocks,
    RepeatedInStep,
    SequenceExists,
    Slot,
    StepSlots,
    UnknownSequence,
)
from servelab.kv.budget import BudgetStep, Chunk, TokenBudgetScheduler
from servelab.kv.prefix import InvalidBlockHash, InvalidExtraKey, PrefixCachingBlockManager
from servelab.kv.scheduler import (
    DuplicateSequence,
    InvalidRequest,
    InvalidSchedulerConfig,
    NotASequence,
    RequestTooLarge,
    Scheduler,
    SchedulerError,
    Sequence,
    SequenceFinished,
    StepOutput,
    TokenNotAppended,
)

__all__ = [
    "BlockManager",
    "BudgetStep",
    "Chunk",
    "DuplicateSequence",
    "InvalidBlock",
    "InvalidBlockHash",
    "InvalidConfig",
    "InvalidExtraKey",
    "InvalidLength",
    "InvalidRequest",
    "InvalidSchedulerConfig",
    "InvalidSequenceId",
    "KVCacheError",
    "NotASequence",
    "OutOfBlocks",
    "PrefixCachingBlockManager",
    "RepeatedInStep",
    "RequestTooLarge",
    "Scheduler",
    "SchedulerError",
    "Sequence",
    "SequenceExists",
    "SequenceFinished",
    "Slot",
    "StepOutput",
    "StepSlots",
    "TokenBudgetScheduler",
    "TokenNotAppended",
    "UnknownSequence",
]
