"""The block manager's rules as a plain model on abstract block ids.

It fixes which logical blocks must share a physical block, not which physical ids an
implementation hands out: the state machine of :mod:`servelab.testing.block_manager` drives a
learner's class beside it and compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BlockManagerModel"]


@dataclass
class BlockManagerModel:
    """The rules, executed on abstract block ids (no physical placement, no free order)."""

    num_blocks: int
    block_size: int
    tables: dict[int, list[int]] = field(default_factory=dict)
    lens: dict[int, int] = field(default_factory=dict)
    ref: dict[int, int] = field(default_factory=dict)
    next_id: int = 0

    @property
    def num_free(self) -> int:
        return self.num_blocks - len(self.ref)

    def need(self, n_tokens: int) -> int:
        return -(-n_tokens // self.block_size)

    def _new(self) -> int:
        self.next_id += 1
        self.ref[self.next_id] = 1
        return self.next_id

    def _release(self, a: int) -> None:
        self.ref[a] -= 1
        if self.ref[a] == 0:
            del self.ref[a]

    def allocate(self, seq: int, n_tokens: int) -> None:
        self.tables[seq] = [self._new() for _ in range(self.need(n_tokens))]
        self.lens[seq] = n_tokens

    def append_kind(self, seq: int) -> str:
        """'new' (boundary), 'copy' (shared partial) or 'inplace'."""
        if self.lens[seq] % self.block_size == 0:
            return "new"
        return "copy" if self.ref[self.tables[seq][-1]] > 1 else "inplace"

    def append(self, seq: int) -> str:
        kind = self.append_kind(seq)
        table = self.tables[seq]
        if kind == "new":
            table.append(self._new())
        elif kind == "copy":
            old = table[-1]
            table[-1] = self._new()
            self._release(old)
        self.lens[seq] += 1
        return kind

    def fork(self, parent: int, child: int) -> None:
        for a in self.tables[parent]:
            self.ref[a] += 1
        self.tables[child] = list(self.tables[parent])
        self.lens[child] = self.lens[parent]

    def free(self, seq: int) -> None:
        for a in self.tables.pop(seq):
            self._release(a)
        del self.lens[seq]
