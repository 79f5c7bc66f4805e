"""Checkpoints of the 'scheduler' course notebook: its solution, step by step.

Generated from solutions/04_scheduler_solution.ipynb by tools/notebooks.py; do not edit.
``servelab.checkpoint('scheduler', step=n)`` returns what the step-n grade cell grades.
"""


# ruff: noqa
# mypy: ignore-errors


from collections import deque
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Decode, Prefill, RequestTooLarge, StepOutput


class SchedulerSkeleton:
    def __init__(self, bm, watermark=1):
        self.bm = bm
        self.watermark = watermark  # free blocks that admission must leave
        self.waiting = deque()  # Sequences, next to admit first
        self.running = []  # Sequences, oldest first

    def blocks_needed(self, n_tokens):
        """Blocks that ``n_tokens`` tokens occupy: ceil(n_tokens / block_size)."""
        return -(-n_tokens // self.bm.block_size)

    def step(self):
        out = StepOutput()
        self.retire(out)
        self.decode(out)
        self.admit(out)
        return out

    def retire(self, out):
        pass  # step 2

    def decode(self, out):
        pass  # step 2


# Each step is a new class with its own name, built on the previous step's class. Running a
# cell again redefines the same class from the same parent, so re-running never changes a grade.
class AdmittingScheduler(SchedulerSkeleton):
    def add(self, seq):
        need = self.blocks_needed(seq.prompt_len + seq.max_new_tokens)
        if need > self.bm.num_blocks - self.watermark:
            raise RequestTooLarge(
                f"sequence {seq.seq_id} needs up to {need} blocks; the pool can give "
                f"{self.bm.num_blocks - self.watermark} above the watermark"
            )
        self.waiting.append(seq)

    def fits(self, n_tokens):
        return self.bm.num_free - self.blocks_needed(n_tokens) >= self.watermark

    def admit(self, out):
        while self.waiting:
            seq = self.waiting[0]
            n = seq.num_tokens
            if not self.fits(n):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, n)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))


class DecodingScheduler(AdmittingScheduler):
    def retire(self, out):
        still_running = []
        for seq in self.running:
            if seq.is_finished:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
            else:
                still_running.append(seq)
        self.running = still_running

    def decode(self, out):
        for seq in self.running:
            out.decodes.append(Decode(seq, self.bm.append_slot(seq.seq_id)))


class Scheduler(DecodingScheduler):
    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.waiting.appendleft(victim)
        out.preempted.append(victim)

    def decode(self, out):
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                # If the newest is `seq` itself, i == len(running) afterwards: the loop ends.
                self.preempt(self.running.pop(), out)
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1


TOPIC = 'scheduler'
STEPS = {
    1: lambda: AdmittingScheduler,
    2: lambda: DecodingScheduler,
    3: lambda: Scheduler,
}
