"""A correct learner-style scheduler, shaped as notebook 04 builds it.

Every file beside this one subclasses it and plants exactly one known mistake.
"""

from __future__ import annotations

from collections import deque

from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Decode, Prefill, RequestTooLarge, StepOutput


class LearnerScheduler:
    def __init__(self, bm, watermark=1):
        self.bm = bm
        self.watermark = watermark
        self.waiting = deque()
        self.running = []

    def add(self, seq):
        need = self.bm.blocks_needed(seq.prompt_len + seq.max_new_tokens)
        if need > self.bm.num_blocks - self.watermark:
            raise RequestTooLarge(f"sequence {seq.seq_id} needs {need} blocks")
        self.waiting.append(seq)

    def step(self):
        out = StepOutput()
        self.retire(out)
        self.decode(out)
        self.admit(out)
        return out

    def fits(self, n_tokens):
        return self.bm.num_free - self.bm.blocks_needed(n_tokens) >= self.watermark

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
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                self.preempt(self.running.pop(), out)
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.waiting.appendleft(victim)
        out.preempted.append(victim)
