"""The scheduler's contract: the errors it raises and what it asks of a block manager.

Apart from :mod:`servelab.kv.scheduler` so that the scheduler module holds the step alone; the
scheduler re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Sequence as SequenceOf
from typing import Protocol

from servelab.kv.blocks import KVCacheError, Slot, StepSlots
from servelab.native import mypyc_attr

__all__ = [
    "DuplicateSequence",
    "InvalidRequest",
    "InvalidSchedulerConfig",
    "KVCacheManager",
    "NotASequence",
    "RequestTooLarge",
    "SchedulerError",
    "SequenceFinished",
    "StepFailed",
    "TokenNotAppended",
]


# Compiled (servelab.native), an exception class with two bases is a plain Python class.
@mypyc_attr(native_class=False)
class SchedulerError(KVCacheError):
    """Base class of the scheduler's errors."""


@mypyc_attr(native_class=False)
class InvalidRequest(SchedulerError, ValueError):
    """A sequence that is malformed: empty prompt, ``max_new_tokens < 1``, non-int ids."""


@mypyc_attr(native_class=False)
class RequestTooLarge(InvalidRequest):
    """The request can never run: its longest KV cache needs more blocks than the pool minus
    the watermark. Shorten the prompt or ``max_new_tokens``, or give the pool more blocks."""


@mypyc_attr(native_class=False)
class DuplicateSequence(SchedulerError, ValueError):
    """The sequence id is already queued, running, or held by the block manager."""


@mypyc_attr(native_class=False)
class SequenceFinished(SchedulerError, ValueError):
    """A token was appended to a sequence that has already generated ``max_new_tokens``."""


@mypyc_attr(native_class=False)
class TokenNotAppended(SchedulerError, RuntimeError):
    """``step()`` was called before the engine appended exactly one sampled token to every
    sequence the previous step computed (see :meth:`StepOutput.computed`)."""


@mypyc_attr(native_class=False)
class StepFailed(SchedulerError, RuntimeError):
    """The block manager raised during :meth:`Scheduler.step`; the step was undone, so the
    queues, the sequences and the block manager are as they were before it. The manager's own
    error is the ``__cause__``."""


@mypyc_attr(native_class=False)
class InvalidSchedulerConfig(SchedulerError, ValueError):
    """A watermark, preemption mode or host pool size that the scheduler cannot work with."""


@mypyc_attr(native_class=False)
class NotASequence(SchedulerError, TypeError):
    """An argument that must be a :class:`Sequence` is something else (None, an id ...)."""


class KVCacheManager(Protocol):
    """What the scheduler asks of a block manager; both reference managers have it.

    ``allocate`` gets the token ids to hold and returns how many leading ones were already
    cached (0 without a prefix cache); ``append_slot`` gets the id of the token whose KV the
    slot will hold.
    """

    @property
    def num_blocks(self) -> int: ...
    @property
    def block_size(self) -> int: ...
    @property
    def num_free(self) -> int: ...
    def blocks_needed(self, n_tokens: int, /) -> int: ...
    def allocate(self, seq: int, token_ids: SequenceOf[int], /) -> int: ...
    def append_slot(self, seq: int, token_id: int, /) -> Slot: ...
    def append_slots(self, seqs: SequenceOf[int], token_ids: SequenceOf[int], /) -> StepSlots: ...
    def fork(self, parent: int, child: int, /) -> None: ...
    def free_seq(self, seq: int, /) -> None: ...
    def block_table(self, seq: int, /) -> list[int]: ...
    def seq_len(self, seq: int, /) -> int: ...
