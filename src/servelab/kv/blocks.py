"""The paged KV-cache block manager: a free list, a refcount per block, a table per sequence.

A sequence's keys and values live in fixed-size physical blocks that need not be
contiguous; its *block table* maps logical block ``i`` (tokens ``i*B .. i*B+B-1``) to a
physical block id. Blocks are allocated only when a sequence's length crosses a block
boundary, so a sequence wastes at most ``block_size - 1`` slots.

``fork`` shares every block of a parent with a child by raising refcounts. Full blocks are
never written again, so sharing them is free; only the trailing *partial* block can
receive a write, and the first sequence that appends to a shared partial block copies it
(copy-on-write). That writer drops its reference, so the last holder writes in place.

Every public method validates its input and raises a :class:`KVCacheError` subclass.
After any raised error the manager is exactly as it was before the call: ``append_slot``
allocates the replacement block before it releases the shared one, and ``allocate``
checks the whole request before taking any block.

Each operation costs O(1) per block it touches (the free list is a deque used only at its
ends; no list is ever scanned).
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

__all__ = [
    "BlockManager",
    "InvalidBlock",
    "InvalidConfig",
    "InvalidLength",
    "KVCacheError",
    "OutOfBlocks",
    "SequenceExists",
    "Slot",
    "UnknownSequence",
]


class KVCacheError(Exception):
    """Base class of every error raised by the KV-cache package."""


class OutOfBlocks(KVCacheError, MemoryError):
    """Not enough free blocks for the request. Transient: nothing was changed, so the
    caller may free or preempt a sequence and retry."""


class UnknownSequence(KVCacheError, KeyError):
    """The sequence id is not live (never allocated, or already freed)."""

    def __str__(self) -> str:  # KeyError would quote the message; keep it readable
        return str(self.args[0]) if self.args else ""


class SequenceExists(KVCacheError, ValueError):
    """The sequence id is already live; free it first or pick another id."""


class InvalidLength(KVCacheError, ValueError):
    """A token count or id that is not a non-negative int."""


class InvalidBlock(KVCacheError, IndexError):
    """A physical block id outside ``range(num_blocks)``."""


class InvalidConfig(KVCacheError, ValueError):
    """A constructor argument that is not a positive int."""


class Slot(NamedTuple):
    """Where the new token goes, and which block to copy first (copy-on-write).

    When ``cow_src`` is not None the caller must copy the contents of block ``cow_src``
    into ``block`` before writing the token at ``offset``.
    """

    block: int
    offset: int
    cow_src: int | None


def _check_positive(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidConfig(f"{name} must be a positive int, got {value!r}")
    return value


def _check_seq_id(seq: object) -> int:
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise UnknownSequence(f"sequence ids are ints, got {seq!r}")
    return seq


class BlockManager:
    """Hands out fixed-size KV blocks to sequences, with refcounted sharing.

    ``num_blocks`` physical blocks of ``block_size`` token slots each. Freed blocks go to
    the back of the free list and allocation takes from the front, so ``free_list()``
    lists blocks in the order they will be handed out.
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks: int = _check_positive("num_blocks", num_blocks)
        self.block_size: int = _check_positive("block_size", block_size)
        self._free: deque[int] = deque(range(num_blocks))
        self._ref: list[int] = [0] * num_blocks
        self._tables: dict[int, list[int]] = {}
        self._lens: dict[int, int] = {}

    # ------------------------------------------------------------------ queries
    @property
    def num_free(self) -> int:
        """Blocks that can be allocated right now."""
        return len(self._free)

    def blocks_needed(self, n_tokens: int) -> int:
        """Blocks that ``n_tokens`` tokens occupy: ``ceil(n_tokens / block_size)``."""
        self._check_length(n_tokens)
        return -(-n_tokens // self.block_size)

    def can_allocate(self, n_tokens: int) -> bool:
        """Whether ``allocate(seq, n_tokens)`` would succeed for a new sequence id."""
        return self.blocks_needed(n_tokens) <= self.num_free

    # ---------------------------------------------------------------- mutations
    def allocate(self, seq: int, n_tokens: int) -> None:
        """Give a new sequence the blocks for its first ``n_tokens`` tokens, all or nothing.

        Raises SequenceExists if ``seq`` is live, InvalidLength for a bad count and
        OutOfBlocks (changing nothing) if fewer than ``blocks_needed(n_tokens)`` are free.
        """
        seq = _check_seq_id(seq)
        if seq in self._tables:
            raise SequenceExists(f"sequence {seq} is already allocated; free_seq({seq}) first")
        need = self.blocks_needed(n_tokens)
        if need > len(self._free):
            raise OutOfBlocks(
                f"sequence {seq} needs {need} blocks for {n_tokens} tokens, "
                f"only {len(self._free)} are free"
            )
        self._tables[seq] = [self._take() for _ in range(need)]
        self._lens[seq] = n_tokens

    def append_slot(self, seq: int) -> Slot:
        """Reserve the slot of one new token of ``seq`` and return where it goes.

        A block is allocated only when the last block is full (or there is none). When
        the trailing partial block is shared, it is copied: the new block is taken
        *before* the shared one is released, so OutOfBlocks leaves everything unchanged.
        """
        table, n = self._table_of(seq), self._lens[seq]
        offset = n % self.block_size
        cow_src: int | None = None
        if offset == 0:
            if not self._free:
                raise OutOfBlocks(f"sequence {seq} needs a new block at token {n}; none free")
            table.append(self._take())
        elif self._ref[table[-1]] > 1:
            if not self._free:
                raise OutOfBlocks(
                    f"sequence {seq} must copy shared block {table[-1]} before writing; "
                    "no block is free"
                )
            new = self._take()
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        self._lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)

    def fork(self, parent: int, child: int) -> None:
        """Make ``child`` a new sequence that shares every block of ``parent``."""
        table = self._table_of(parent)
        child = _check_seq_id(child)
        if child in self._tables:
            raise SequenceExists(f"fork target {child} is already allocated; pick a new id")
        for block in table:
            self._ref[block] += 1
        self._tables[child] = list(table)
        self._lens[child] = self._lens[parent]

    def free_seq(self, seq: int) -> None:
        """Drop ``seq`` and release its blocks; a block returns to the free list when its
        refcount reaches zero. Freeing an unknown (or already freed) id raises
        UnknownSequence."""
        table = self._table_of(seq)
        del self._tables[seq], self._lens[seq]
        for block in reversed(table):  # tail first, as prefix caching wants it
            self._release(block)

    # --------------------------------------------------------------- inspection
    def block_table(self, seq: int) -> list[int]:
        """A copy of ``seq``'s block table (logical index -> physical block)."""
        return list(self._table_of(seq))

    def seq_len(self, seq: int) -> int:
        """Tokens of ``seq`` that have a slot."""
        self._table_of(seq)
        return self._lens[seq]

    def refcount(self, block: int) -> int:
        """How many block tables hold ``block`` (0 when it is free)."""
        if (
            not isinstance(block, int)
            or isinstance(block, bool)
            or not (0 <= block < self.num_blocks)
        ):
            raise InvalidBlock(f"block must be an int in [0, {self.num_blocks}), got {block!r}")
        return self._ref[block]

    def free_list(self) -> list[int]:
        """Free blocks, the next one to be allocated first."""
        return list(self._free)

    def sequences(self) -> list[int]:
        """Live sequence ids in allocation order."""
        return list(self._tables)

    # ----------------------------------------------------------------- helpers
    def _check_length(self, n_tokens: object) -> None:
        if not isinstance(n_tokens, int) or isinstance(n_tokens, bool) or n_tokens < 0:
            raise InvalidLength(f"a token count must be a non-negative int, got {n_tokens!r}")

    def _table_of(self, seq: int) -> list[int]:
        seq = _check_seq_id(seq)
        try:
            return self._tables[seq]
        except KeyError:
            raise UnknownSequence(
                f"sequence {seq} is not allocated (never allocated, or already freed)"
            ) from None

    def _take(self) -> int:
        block = self._free.popleft()
        self._ref[block] = 1
        return block

    def _release(self, block: int) -> None:
        self._ref[block] -= 1
        if self._ref[block] == 0:
            self._free.append(block)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_blocks={self.num_blocks}, block_size={self.block_size}, "
            f"free={self.num_free}, sequences={len(self._tables)})"
        )
