"""A correct learner-style block manager (the notebook shape).

Every file beside this one subclasses it and plants exactly one known mistake.
"""

from __future__ import annotations

from collections import deque

from servelab.kv.blocks import (
    InvalidLength,
    OutOfBlocks,
    SequenceExists,
    Slot,
    UnknownSequence,
)


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free: deque[int] = deque(range(num_blocks))
        self.ref = [0] * num_blocks
        self.tables: dict[int, list[int]] = {}
        self.lens: dict[int, int] = {}

    def _alloc(self) -> int:
        if not self.free:
            raise OutOfBlocks("no free block")
        b = self.free.popleft()
        self.ref[b] = 1
        return b

    def _release(self, b: int) -> None:
        self.ref[b] -= 1
        if self.ref[b] == 0:
            self.free.append(b)

    def _table(self, seq: int) -> list[int]:
        if seq not in self.tables:
            raise UnknownSequence(f"sequence {seq} is not allocated")
        return self.tables[seq]

    def allocate(self, seq: int, n_tokens: int) -> None:
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        if not isinstance(n_tokens, int) or n_tokens < 0:
            raise InvalidLength(f"bad length {n_tokens!r}")
        need = -(-n_tokens // self.block_size)
        if need > len(self.free):
            raise OutOfBlocks(f"need {need}, have {len(self.free)}")
        self.tables[seq] = [self._alloc() for _ in range(need)]
        self.lens[seq] = n_tokens

    def append_slot(self, seq: int) -> Slot:
        table, n = self._table(seq), self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)

    def fork(self, parent: int, child: int) -> None:
        table = self._table(parent)
        if child in self.tables:
            raise SequenceExists(f"sequence {child} exists")
        for b in table:
            self.ref[b] += 1
        self.tables[child] = list(table)
        self.lens[child] = self.lens[parent]

    def free_seq(self, seq: int) -> None:
        table = self._table(seq)
        del self.tables[seq], self.lens[seq]
        for b in table:
            self._release(b)

    # inspection (ready-made in the exercise)
    @property
    def num_free(self) -> int:
        return len(self.free)

    def block_table(self, seq: int) -> list[int]:
        return list(self._table(seq))

    def seq_len(self, seq: int) -> int:
        self._table(seq)
        return self.lens[seq]

    def refcount(self, block: int) -> int:
        return self.ref[block]

    def free_list(self) -> list[int]:
        return list(self.free)

    def sequences(self) -> list[int]:
        return list(self.tables)
