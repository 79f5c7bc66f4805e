"""The KV cache of a serving node: paged blocks, prefix caching, scheduling, the device pool.

Only the torch-free modules are imported here, so ``import servelab.kv`` stays light;
import ``servelab.kv.pool`` / ``servelab.kv.engine`` explicitly for the device half.
"""

from servelab.kv.blocks import (
    BlockManager,
    InvalidBlock,
    InvalidConfig,
    InvalidLength,
    KVCacheError,
    OutOfBlocks,
    SequenceExists,
    Slot,
    UnknownSequence,
)
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import RequestTooLarge, Scheduler, Sequence, StepOutput

__all__ = [
    "BlockManager",
    "InvalidBlock",
    "InvalidConfig",
    "InvalidLength",
    "KVCacheError",
    "OutOfBlocks",
    "PrefixCachingBlockManager",
    "RequestTooLarge",
    "Scheduler",
    "Sequence",
    "SequenceExists",
    "Slot",
    "StepOutput",
    "UnknownSequence",
]
