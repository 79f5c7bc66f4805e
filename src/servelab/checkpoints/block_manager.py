"""Checkpoints of the 'block-manager' course notebook: its solution, step by step.

Generated from solutions/03_block_manager_solution.ipynb by tools/notebooks.py; do not edit.
``servelab.checkpoint('block-manager', step=n)`` returns what the step-n grade cell grades.
"""


# ruff: noqa
# mypy: ignore-errors


from collections import deque
from servelab.kv.blocks import InvalidLength, OutOfBlocks, SequenceExists, Slot, UnknownSequence


class BlockManagerSkeleton:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free = deque(range(num_blocks))  # free blocks, next to allocate on the left
        self.ref = [0] * num_blocks  # how many tables hold each block
        self.tables = {}  # seq -> list of physical blocks
        self.lens = {}  # seq -> tokens that have a slot

    # inspection: read by the grader and the pictures (ready-made)
    @property
    def num_free(self):
        return len(self.free)

    def block_table(self, seq):
        return list(self.tables[seq])

    def seq_len(self, seq):
        return self.lens[seq]

    def refcount(self, block):
        return self.ref[block]

    def free_list(self):
        return list(self.free)

    def sequences(self):
        return list(self.tables)

    # later steps
    def append_slot(self, seq):
        raise NotImplementedError("step 2")

    def fork(self, parent, child):
        raise NotImplementedError("step 3")


# Each step is a new class with its own name, built on the previous step's class. Running a
# cell again redefines the same class from the same parent, so re-running never changes a grade.
class AllocatingManager(BlockManagerSkeleton):
    def _alloc(self):
        if not self.free:
            raise OutOfBlocks("no free block")
        block = self.free.popleft()
        self.ref[block] = 1
        return block

    def _release(self, block):
        self.ref[block] -= 1
        if self.ref[block] == 0:
            self.free.append(block)

    def allocate(self, seq, n_tokens):
        need = -(-n_tokens // self.block_size)  # ceil without floats
        if need > len(self.free):
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks, {len(self.free)} are free")
        self.tables[seq] = [self._alloc() for _ in range(need)]
        self.lens[seq] = n_tokens

    def free_seq(self, seq):
        table = self.tables.pop(seq)
        del self.lens[seq]
        for block in reversed(table):
            self._release(block)


class GrowingManager(AllocatingManager):
    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        offset = n % self.block_size
        if offset == 0:
            table.append(self._alloc())
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, None)


class ForkingManager(GrowingManager):
    def fork(self, parent, child):
        table = self.tables[parent]
        for block in table:
            self.ref[block] += 1
        self.tables[child] = list(table)
        self.lens[child] = self.lens[parent]

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()  # first: an OutOfBlocks here changes nothing
            cow_src = table[-1]
            self._release(cow_src)
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


class BlockManager(ForkingManager):
    def _known(self, seq):
        if seq not in self.tables:
            raise UnknownSequence(f"sequence {seq} is not allocated (or already freed)")

    def _new(self, seq):
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} is already allocated")

    def allocate(self, seq, n_tokens):
        self._new(seq)
        if not isinstance(n_tokens, int) or n_tokens < 0:
            raise InvalidLength(f"a token count must be a non-negative int, got {n_tokens!r}")
        super().allocate(seq, n_tokens)

    def append_slot(self, seq):
        self._known(seq)
        return super().append_slot(seq)

    def fork(self, parent, child):
        self._known(parent)
        self._new(child)
        super().fork(parent, child)

    def free_seq(self, seq):
        self._known(seq)
        super().free_seq(seq)


TOPIC = 'block-manager'
STEPS = {
    1: lambda: AllocatingManager,
    2: lambda: GrowingManager,
    3: lambda: ForkingManager,
    4: lambda: BlockManager,
}
