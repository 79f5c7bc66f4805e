"""Checkpoints of the 'token-budget' course notebook: its solution, step by step.

Generated from solutions/07_token_budget_solution.ipynb by tools/notebooks.py; do not edit.
``servelab.checkpoint('token-budget', step=n)`` returns what the step-n grade cell grades.
"""


# ruff: noqa
# mypy: ignore-errors


from collections import deque
from servelab.kv.blocks import OutOfBlocks, UnknownSequence
from servelab.kv.budget import BudgetStep, Chunk
from servelab.kv.scheduler import RequestTooLarge


class BudgetSkeleton:
    def __init__(self, bm, max_num_batched_tokens=2048, max_num_seqs=256):
        self.bm = bm
        self.max_num_batched_tokens = max_num_batched_tokens  # tokens computed per step, at most
        self.max_num_seqs = max_num_seqs  # running requests, at most
        self.waiting = deque()  # Sequences, next to admit first
        self.running = []  # Sequences, in admission order
        self.computed = {}  # seq_id -> num_computed_tokens, for every waiting or running request

    def add(self, seq):
        need = self.bm.blocks_needed(seq.prompt_len + seq.max_new_tokens - 1)
        if need > self.bm.num_blocks:
            raise RequestTooLarge(f"sequence {seq.seq_id} needs up to {need} blocks")
        self.waiting.append(seq)
        self.computed[seq.seq_id] = 0

    def sequence(self, seq_id):
        for seq in [*self.running, *self.waiting]:
            if seq.seq_id == seq_id:
                return seq
        raise UnknownSequence(f"sequence {seq_id} is not waiting or running")

    def num_computed_tokens(self, seq_id):
        self.sequence(seq_id)
        return self.computed[seq_id]

    @property
    def is_idle(self):
        return not self.running and not self.waiting

    def step(self):
        out = BudgetStep()
        self.retire(out)
        budget = self.schedule_running(out, self.max_num_batched_tokens)
        out.num_running = len(out.scheduled)
        if not out.preempted:  # a step that preempted has no blocks to admit anybody with
            self.admit(out, budget)
        return out

    def retire(self, out):
        for seq in [s for s in self.running if s.is_finished]:
            self.running.remove(seq)
            self.bm.free_seq(seq.seq_id)
            del self.computed[seq.seq_id]
            out.finished.append(seq)

    def extend(self, seq, start, n):
        """Slots for token_ids[start:start + n] of a running request, all or nothing."""
        need = self.bm.blocks_needed(start + n) - self.bm.blocks_needed(start)
        if need > self.bm.num_free:
            raise OutOfBlocks(f"sequence {seq.seq_id} needs {need} new blocks")
        for token in seq.token_ids[start : start + n]:
            self.bm.append_slot(seq.seq_id, token)
        return self.slots(seq, start, n)

    def cached_tokens(self, seq):
        """Leading tokens of seq that the prefix cache holds (0 without a prefix cache)."""
        lookup = getattr(self.bm, "num_cached_tokens", None)
        return lookup(seq.token_ids) if lookup is not None else 0

    def slots(self, seq, start, n):
        """The flat slots of positions start .. start + n - 1, from the block table."""
        size, table = self.bm.block_size, self.bm.block_table(seq.seq_id)
        return [table[p // size] * size + p % size for p in range(start, start + n)]

    def schedule_running(self, out, budget):
        return budget  # step 1

    def admit(self, out, budget):
        pass  # step 1


# Each step is a new class with its own name, built on the previous step's class. Running a
# cell again redefines the same class from the same parent, so re-running never changes a grade.
class BudgetScheduler(BudgetSkeleton):
    def schedule_running(self, out, budget):
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            slots = self.extend(seq, start, n)
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget

    def admit(self, out, budget):
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            n = seq.num_tokens
            if n > budget:
                break
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids)
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            out.scheduled.append(Chunk(seq, 0, n, self.slots(seq, 0, n), True))
            self.computed[seq.seq_id] = n
            budget -= n


class ChunkedScheduler(BudgetScheduler):
    def admit(self, out, budget):
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids[: hit + n])
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            samples = hit + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class TokenBudgetScheduler(ChunkedScheduler):
    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = 0
        self.waiting.appendleft(victim)
        out.preempted.append(victim)

    def schedule_running(self, out, budget):
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop()  # the latest: the lowest priority
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue  # retry seq: the victim's blocks are free now
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


TOPIC = 'token-budget'
STEPS = {
    1: lambda: BudgetScheduler,
    2: lambda: ChunkedScheduler,
    3: lambda: TokenBudgetScheduler,
}
