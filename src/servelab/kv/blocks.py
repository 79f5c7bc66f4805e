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

:class:`BlockTables` holds what every paged manager shares: the tables, the refcounts,
``fork`` and copy-on-write. :class:`BlockManager` adds a plain free list;
:class:`~servelab.kv.prefix.PrefixCachingBlockManager` adds the prefix cache. Both accept the
same calls from a scheduler: ``allocate(seq, token_ids)`` and ``append_slot(seq, token_id)``
(the plain manager needs only the count, and also takes ``allocate(seq, n_tokens)``).

A decode step appends one token to every running sequence: ``append_slots(seqs, token_ids)``
does that in one call, all or nothing, and returns the step's *slot mapping* (one flat slot
index ``block * block_size + offset`` per sequence, what a paged attention kernel's KV write
takes) and its copy-on-write copies: the same slots as ``append_slot`` called for each
sequence in order, without a ``Slot`` object per token. The inputs are validated in bulk.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterable, Sequence
from operator import countOf
from typing import Any, NamedTuple, TypeGuard, cast

from servelab.native import mypyc_attr

__all__ = [
    "BlockManager",
    "BlockTables",
    "InvalidBlock",
    "InvalidConfig",
    "InvalidLength",
    "InvalidSequenceId",
    "KVCacheError",
    "OutOfBlocks",
    "RepeatedInStep",
    "SequenceExists",
    "Slot",
    "StepSlots",
    "UnknownSequence",
    "check_seq_id",
    "check_token_id",
    "check_token_ids",
    "new_slot",
    "pack_token_ids",
]


# Compiled (servelab.native), an exception class with two bases is a plain Python class.
@mypyc_attr(native_class=False)
class KVCacheError(Exception):
    """Base class of every error raised by the KV-cache package."""


@mypyc_attr(native_class=False)
class OutOfBlocks(KVCacheError, MemoryError):
    """Not enough free blocks for the request. Transient: nothing was changed, so the
    caller may free or preempt a sequence and retry."""


@mypyc_attr(native_class=False)
class UnknownSequence(KVCacheError, KeyError):
    """The sequence id is not live (never allocated, or already freed)."""

    def __str__(self) -> str:  # KeyError would quote the message; keep it readable
        return str(self.args[0]) if self.args else ""


@mypyc_attr(native_class=False)
class InvalidSequenceId(KVCacheError, TypeError):
    """A sequence id that is not an int (a str, a float, a bool, None ...)."""


@mypyc_attr(native_class=False)
class SequenceExists(KVCacheError, ValueError):
    """The sequence id is already live; free it first or pick another id."""


@mypyc_attr(native_class=False)
class RepeatedInStep(KVCacheError, ValueError):
    """A decode step that names one sequence twice (a step appends one token to each)."""


@mypyc_attr(native_class=False)
class InvalidLength(KVCacheError, ValueError):
    """A token count or id that is not a non-negative int."""


@mypyc_attr(native_class=False)
class InvalidBlock(KVCacheError, IndexError):
    """A physical block id outside ``range(num_blocks)``."""


@mypyc_attr(native_class=False)
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


new_slot = tuple.__new__  # ``new_slot(Slot, (block, offset, cow_src))``: Slot without a Python call


class StepSlots(NamedTuple):
    """Where one decode step writes: ``slots[i]`` is the flat slot index (``block *
    block_size + offset``) of the new token of the step's ``i``-th sequence; ``copies`` are
    the copy-on-write ``(src, dst)`` block copies to make, in order, before any write."""

    slots: list[int]
    copies: list[tuple[int, int]]


def _check_positive(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidConfig(f"{name} must be a positive int, got {value!r}")
    return value


def check_seq_id(seq: object) -> int:
    """``seq`` if it is an int (not a bool), else InvalidSequenceId.

    The public methods type the ids they check as ``object``: compiled (``servelab.native``),
    an ``int`` argument is checked by mypyc before the method runs, and a str would get a
    plain TypeError, a bool would pass as an int, instead of this typed error."""
    if type(seq) is not int and (not isinstance(seq, int) or isinstance(seq, bool)):
        raise InvalidSequenceId(
            f"sequence ids are ints, got {type(seq).__name__} {seq!r}; "
            "use the int id the sequence was allocated with"
        )
    return int(seq)


def check_token_id(token: object) -> int:
    """``token`` if it is a non-negative int (not a bool), else InvalidLength."""
    if type(token) is int and token >= 0:
        return token
    if not isinstance(token, int) or isinstance(token, bool) or token < 0:
        raise InvalidLength(f"token ids are non-negative ints, got {token!r}")
    return int(token)


def _last(table: list[int]) -> int:
    return table[-1] if table else -1


def _is_id_sequence(obj: object) -> TypeGuard[Sequence[Any]]:
    """A list, a tuple or another ``Sequence`` that is not text: what a list of ids may be."""
    if type(obj) is list or type(obj) is tuple:  # the common case, decided at once
        return True
    return isinstance(obj, Sequence) and not isinstance(obj, (str, bytes))


def check_token_ids(token_ids: object) -> list[int]:
    """A new list of the ids in ``token_ids``, checked in one pass (InvalidLength if any is
    not a non-negative int, or if ``token_ids`` is not a sequence)."""
    return pack_token_ids(token_ids)[0]


def pack_token_ids(token_ids: object) -> tuple[list[int], bytes | None]:
    """:func:`check_token_ids`, and the ids packed as native unsigned 64-bit ints (None if
    one is 2**64 or above): a prefix cache keys its blocks by these bytes.

    The common case, a list or tuple of plain ints, costs two C-level passes (counting
    ``map(type)`` equal to ``int``, then packing into an unsigned 64-bit ``array``, which
    refuses a negative id) instead of a Python-level check per token.
    """
    if not _is_id_sequence(token_ids):
        raise InvalidLength(f"token_ids must be a sequence of ints, got {token_ids!r}")
    ids = list(token_ids)
    if countOf(map(type, ids), int) != len(ids):
        ids = [check_token_id(t) for t in ids]  # names the first bad id
    try:
        return ids, array("Q", ids).tobytes()
    except OverflowError:  # a negative id, or one of 2**64 and above (allowed)
        if min(ids) < 0:
            ids = [check_token_id(t) for t in ids]
        return ids, None


# Compiled (servelab.native), Python classes, a learner's among them, may subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class BlockTables:
    """Block tables with refcounted sharing: the part every paged block manager has.

    A table per sequence, a refcount per block, :meth:`fork` (share every block) and
    copy-on-write of a shared partial tail. A subclass decides where blocks come from and go
    to (``num_free``, ``_take``, ``_release``) and what else a sequence carries
    (``seq_len``, ``_copy_seq``, ``_forget``).
    """

    def __init__(self, num_blocks: object, block_size: object) -> None:
        self.num_blocks: int = _check_positive("num_blocks", num_blocks)
        self.block_size: int = _check_positive("block_size", block_size)
        self._ref: list[int] = [0] * self.num_blocks
        self._tables: dict[int, list[int]] = {}

    # ------------------------------------------------------ what a subclass provides
    @property
    def num_free(self) -> int:
        """Blocks that can be allocated right now."""
        raise NotImplementedError

    def seq_len(self, seq: object) -> int:
        """Tokens of ``seq`` that have a slot."""
        raise NotImplementedError

    def _take(self) -> int:
        raise NotImplementedError

    def _release(self, block: int) -> None:
        raise NotImplementedError

    def _release_all(self, blocks: Iterable[int]) -> None:
        """``_release`` each block in order (a subclass may do it in one loop)."""
        for block in blocks:
            self._release(block)

    def _copy_seq(self, parent: int, child: int) -> None:
        """Give ``child`` a copy of what ``parent`` carries besides its table."""

    def _forget(self, seq: int) -> None:
        """Drop what ``seq`` carries besides its table."""

    def _tables_snapshot(self) -> tuple[dict[int, list[int]], list[int], list[int]]:
        """The tables (the list objects themselves, in the dict's order), each one's length
        and last block (-1 if empty). Between a snapshot and its restore a table only grows
        by one block or has its last block replaced (copy-on-write), once per step, and is
        never shortened: a new allocation is a new list. So the two ints per table restore it,
        and no list is copied (``map`` runs the loops in C)."""
        tables = self._tables.values()
        return dict(self._tables), list(map(len, tables)), list(map(_last, tables))

    def _restore_tables(self, saved: tuple[dict[int, list[int]], list[int], list[int]]) -> None:
        """The tables as :meth:`_tables_snapshot` saw them: the same list objects (a subclass
        may hold them elsewhere too), with their contents and order then."""
        tables, lengths, lasts = saved
        for table, n, last in zip(tables.values(), lengths, lasts, strict=True):
            del table[n:]
            if n:
                table[n - 1] = last
        self._tables.clear()
        self._tables.update(tables)

    # ------------------------------------------------------------------ queries
    def blocks_needed(self, n_tokens: object) -> int:
        """Blocks that ``n_tokens`` tokens occupy: ``ceil(n_tokens / block_size)``."""
        return -(-self._check_length(n_tokens) // self.block_size)

    # ---------------------------------------------------------------- mutations
    def fork(self, parent: object, child: object) -> None:
        """Make ``child`` a new sequence that shares every block of ``parent``."""
        parent = self._live_id(parent)
        table = self._tables[parent]
        child = check_seq_id(child)
        if child in self._tables:
            raise SequenceExists(f"fork target {child} is already allocated; pick a new id")
        for block in table:
            self._ref[block] += 1
        self._tables[child] = list(table)
        self._copy_seq(parent, child)

    def free_seq(self, seq: object) -> None:
        """Drop ``seq`` and release its blocks, tail first; a block is free again when its
        refcount reaches zero. Freeing an unknown (or already freed) id raises
        UnknownSequence."""
        seq = self._live_id(seq)
        table = self._tables.pop(seq)
        self._forget(seq)
        self._release_all(reversed(table))  # tail first, as prefix caching wants it

    def _grow_or_copy(self, seq: int, table: list[int], n: int) -> int | None:
        """Make slot ``n`` of ``seq`` writable: a new block at a block boundary, else a
        private copy of the shared partial tail. Returns the block to copy from, if any.

        The new block is taken *before* the shared one is released, so OutOfBlocks leaves
        everything unchanged.
        """
        if n % self.block_size == 0:
            if not self.num_free:
                raise OutOfBlocks(f"sequence {seq} needs a new block at token {n}; none free")
            table.append(self._take())
            return None
        if not self.num_free:
            raise OutOfBlocks(
                f"sequence {seq} must copy shared block {table[-1]} before writing; "
                "no block is free"
            )
        new = self._take()
        src = table[-1]
        self._release(src)
        table[-1] = new
        return src

    def _check_step(
        self, seqs: object, token_ids: object, *, tokens_required: bool
    ) -> tuple[list[int], list[int] | None]:
        """The ids and token ids of a decode step, checked in bulk: ``seqs`` is a sequence of
        distinct live ids, ``token_ids`` one non-negative int per sequence (or None where
        ``tokens_required`` is false)."""
        if not _is_id_sequence(seqs):
            raise InvalidSequenceId(f"seqs must be a sequence of sequence ids, got {seqs!r}")
        ids = list(seqs)
        if countOf(map(type, ids), int) != len(ids):
            ids = [check_seq_id(s) for s in ids]  # names the first bad id
        distinct = set(ids)
        if len(distinct) != len(ids):
            seen: set[int] = set()
            for seq in ids:
                if seq in seen:
                    raise RepeatedInStep(
                        f"sequence {seq} appears twice in one step; a step appends one token "
                        "to each sequence"
                    )
                seen.add(seq)
        if not distinct <= self._tables.keys():
            unknown = next(s for s in ids if s not in self._tables)
            raise UnknownSequence(
                f"sequence {unknown} is not allocated (never allocated, or already freed)"
            )
        if token_ids is None:
            if tokens_required:
                raise InvalidLength("token_ids is required: one new token id per sequence")
            return ids, None
        tokens = check_token_ids(token_ids)
        if len(tokens) != len(ids):
            raise InvalidLength(
                f"a step takes one token id per sequence: {len(ids)} sequences, "
                f"{len(tokens)} token ids"
            )
        return ids, tokens

    def _check_step_fits(self, ids: list[int], lengths: Iterable[int]) -> None:
        """OutOfBlocks unless the free blocks cover the step (``lengths``: each sequence's
        tokens before it). A sequence at a block boundary needs a new block; ``k`` of the
        ``r`` holders of a shared partial tail need ``min(k, r - 1)`` copies, as the last
        holder to write writes in place."""
        size, ref, tables = self.block_size, self._ref, self._tables
        need = 0
        sharing: dict[int, int] = {}
        for seq, n in zip(ids, lengths, strict=True):
            if n % size == 0:
                need += 1
            else:
                tail = tables[seq][-1]
                if ref[tail] > 1:
                    sharing[tail] = sharing.get(tail, 0) + 1
        need += sum(min(k, ref[tail] - 1) for tail, k in sharing.items())
        if need > self.num_free:
            raise OutOfBlocks(
                f"this step of {len(ids)} sequences needs {need} new blocks, "
                f"only {self.num_free} are free"
            )

    # --------------------------------------------------------------- inspection
    def block_table(self, seq: object) -> list[int]:
        """A copy of ``seq``'s block table (logical index -> physical block)."""
        return list(self._table_of(seq))

    def refcount(self, block: object) -> int:
        """How many block tables hold ``block`` (0 when it is free)."""
        return self._ref[self._check_block(block)]

    def sequences(self) -> list[int]:
        """Live sequence ids in allocation order."""
        return list(self._tables)

    # ----------------------------------------------------------------- helpers
    def _check_length(self, n_tokens: object) -> int:
        if not isinstance(n_tokens, int) or isinstance(n_tokens, bool) or n_tokens < 0:
            raise InvalidLength(f"a token count must be a non-negative int, got {n_tokens!r}")
        return n_tokens

    def _check_block(self, block: object) -> int:
        if (
            not isinstance(block, int)
            or isinstance(block, bool)
            or not (0 <= block < self.num_blocks)
        ):
            raise InvalidBlock(f"block must be an int in [0, {self.num_blocks}), got {block!r}")
        return block

    def _table_of(self, seq: object) -> list[int]:
        table = self._tables.get(seq) if type(seq) is int else None
        if table is None:
            table = self._tables[self._live_id(seq)]
        return table

    def _live_id(self, seq: object) -> int:
        """``seq`` as a plain int if it is live; else InvalidSequenceId or UnknownSequence."""
        seq = check_seq_id(seq)
        if seq not in self._tables:
            raise UnknownSequence(
                f"sequence {seq} is not allocated (never allocated, or already freed)"
            )
        return seq


# What BlockManager._snapshot copies: refcounts, free list, tables, lengths
_Snapshot = tuple[
    list[int], list[int], tuple[dict[int, list[int]], list[int], list[int]], dict[int, int]
]


@mypyc_attr(allow_interpreted_subclasses=True)
class BlockManager(BlockTables):
    """Hands out fixed-size KV blocks to sequences, with refcounted sharing.

    ``num_blocks`` physical blocks of ``block_size`` token slots each. Freed blocks go to
    the back of the free list and allocation takes from the front, so ``free_list()``
    lists blocks in the order they will be handed out.
    """

    def __init__(self, num_blocks: object, block_size: object) -> None:
        super().__init__(num_blocks, block_size)
        self._free: deque[int] = deque(range(self.num_blocks))
        self._lens: dict[int, int] = {}

    # ------------------------------------------------------------------ queries
    @property
    def num_free(self) -> int:
        """Blocks that can be allocated right now."""
        return len(self._free)

    def can_allocate(self, n_tokens: object) -> bool:
        """Whether ``allocate(seq, n_tokens)`` would succeed for a new sequence id."""
        return self.blocks_needed(n_tokens) <= self.num_free

    # ---------------------------------------------------------------- mutations
    def allocate(self, seq: object, tokens: int | Sequence[int]) -> int:
        """Give a new sequence the blocks for its first tokens, all or nothing.

        ``tokens`` is the token count, or the token ids (checked, then only counted: the
        same call a prefix-caching manager takes). Returns 0, the number of tokens found
        already cached, as this manager caches nothing. Raises SequenceExists if ``seq``
        is live, InvalidLength for a bad count or id and OutOfBlocks (changing nothing) if
        fewer than ``blocks_needed`` blocks are free.
        """
        seq = check_seq_id(seq)
        if seq in self._tables:
            raise SequenceExists(f"sequence {seq} is already allocated; free_seq({seq}) first")
        if isinstance(tokens, int):
            self._check_length(tokens)
            n_tokens = tokens
        else:
            n_tokens = len(check_token_ids(tokens))
        need = -(-n_tokens // self.block_size)
        if need > len(self._free):
            raise OutOfBlocks(
                f"sequence {seq} needs {need} blocks for {n_tokens} tokens, "
                f"only {len(self._free)} are free"
            )
        take = self._take
        self._tables[seq] = [take() for _ in range(need)]
        self._lens[seq] = n_tokens
        return 0

    def append_slot(self, seq: object, token_id: object = None) -> Slot:
        """Reserve the slot of one new token of ``seq`` and return where it goes.

        A block is allocated only when the last block is full (or there is none). When
        the trailing partial block is shared, it is copied: the new block is taken
        *before* the shared one is released, so OutOfBlocks leaves everything unchanged.
        ``token_id``, if given, is checked and otherwise ignored.
        """
        sid = seq if type(seq) is int else self._live_id(seq)
        table = self._tables.get(sid)
        if table is None:
            table = self._tables[self._live_id(sid)]
        if token_id is not None:
            check_token_id(token_id)
        n = self._lens[sid]
        offset = n % self.block_size
        cow_src = None
        if offset == 0 or self._ref[table[-1]] > 1:
            cow_src = self._grow_or_copy(sid, table, n)
        self._lens[sid] = n + 1
        return new_slot(Slot, (table[-1], offset, cow_src))

    def append_slots(
        self, seqs: Sequence[int], token_ids: Sequence[int] | None = None
    ) -> StepSlots:
        """One decode step: a slot for one new token of each of ``seqs``, in order, the
        slots ``append_slot`` would give one by one (see :class:`StepSlots`). All or
        nothing: a bad id, a sequence named twice (RepeatedInStep) or too few free blocks
        (OutOfBlocks) changes nothing. ``token_ids``, if given, are checked and otherwise
        ignored."""
        ids, _ = self._check_step(seqs, token_ids, tokens_required=False)
        lens = self._lens
        if len(self._free) < len(ids):
            self._check_step_fits(ids, [lens[s] for s in ids])
        size, tables, ref = self.block_size, self._tables, self._ref
        slots: list[int] = []
        copies: list[tuple[int, int]] = []
        append = slots.append
        # ``Any``: compiled, an ``int`` loop variable is unboxed, then boxed anew (an object
        # allocated, above 256) for each dict it keys; as ``Any`` it stays the list's object.
        seq: Any
        for seq in ids:  # append_slot's work, inline: a call per sequence was most of it
            n = lens[seq]
            offset = n % size
            table = tables[seq]
            if offset and ref[table[-1]] == 1:  # our own partial tail: the common case
                lens[seq] = n + 1
                append(table[-1] * size + offset)
                continue
            cow_src = self._grow_or_copy(seq, table, n)  # fits: checked above
            lens[seq] = n + 1
            append(table[-1] * size + offset)
            if cow_src is not None:
                copies.append((cow_src, table[-1]))
        return StepSlots(slots, copies)

    # --------------------------------------------------------------- inspection
    def seq_len(self, seq: object) -> int:
        """Tokens of ``seq`` that have a slot."""
        n = self._lens.get(seq) if type(seq) is int else None
        return n if n is not None else self._lens[self._live_id(seq)]

    def free_list(self) -> list[int]:
        """Free blocks, the next one to be allocated first."""
        return list(self._free)

    # ----------------------------------------------------------------- helpers
    def _copy_seq(self, parent: int, child: int) -> None:
        self._lens[child] = self._lens[parent]

    def _forget(self, seq: int) -> None:
        del self._lens[seq]

    def _take(self) -> int:
        block = self._free.popleft()
        self._ref[block] = 1
        return block

    def _snapshot(self) -> object:
        """Everything a call may change, copied, for :meth:`_restore`: the undo point of a
        caller that makes several calls all or nothing (``Scheduler.step``)."""
        return (self._ref[:], list(self._free), self._tables_snapshot(), dict(self._lens))

    def _restore(self, snapshot: object) -> None:
        """Put back the state that ``snapshot`` (this manager's :meth:`_snapshot`) copied."""
        ref, free, tables, lens = cast(_Snapshot, snapshot)
        self._ref[:] = ref
        self._free.clear()
        self._free.extend(free)
        self._restore_tables(tables)
        self._lens.clear()
        self._lens.update(lens)

    def _release(self, block: int) -> None:
        self._ref[block] -= 1
        if self._ref[block] == 0:
            self._free.append(block)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_blocks={self.num_blocks}, block_size={self.block_size}, "
            f"free={self.num_free}, sequences={len(self._tables)})"
        )
