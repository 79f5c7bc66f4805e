"""Scheduler slips, each on the notebook's own classes."""

from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler import Decode, Prefill, RequestTooLarge, StepOutput

TOPIC = "scheduler"
Admitting = checkpoint(TOPIC, 1)
Decoding = checkpoint(TOPIC, 2)
Final = checkpoint(TOPIC, 3)


class FitRoundsUp(Admitting):
    """Counts `n // block_size + 1` blocks in its own helper: a prompt that fills its blocks
    exactly is refused one block early."""

    def _blocks(self, n):
        return n // self.bm.block_size + 1

    def fits(self, n_tokens):
        return self.bm.num_free - self._blocks(n_tokens) >= self.watermark


class RetireSkipsNext(Final):
    """Removes finished sequences from the list it is walking: the one after each is skipped."""

    def retire(self, out):
        for seq in self.running:
            if seq.is_finished:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
                self.running.remove(seq)


class AdmitRequeuesAtBack(Final):
    """Takes the next sequence off the queue before checking it fits, and puts it back last."""

    def admit(self, out):
        for _ in range(len(self.waiting)):
            seq = self.waiting.popleft()
            n = seq.num_tokens
            if not self.fits(n):
                self.waiting.append(seq)
                break
            self.bm.allocate(seq.seq_id, n)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))


class PreemptReportsNothing(Final):
    """Frees the victim and puts it first in waiting, but leaves it out of the step's output."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.waiting.appendleft(victim)


class PreemptReportedFinished(Final):
    """Reports the victim among the step's finished sequences, the list its author knew."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.waiting.appendleft(victim)
        out.finished.append(victim)


class AddFitsBesideRunning(Admitting):
    """add() refuses a request that does not fit beside the running ones: a request that fits
    the pool is refused once admissions have started."""

    def add(self, seq):
        held = sum(self.blocks_needed(s.num_tokens) for s in self.running)
        need = self.blocks_needed(seq.prompt_len + seq.max_new_tokens)
        if held + need > self.bm.num_blocks - self.watermark:
            raise RequestTooLarge(f"sequence {seq.seq_id} does not fit")
        self.waiting.append(seq)


class AdmitUntilOneAdmitted(Admitting):
    """The admission loop also stops once this step has admitted a request: one per step."""

    def admit(self, out):
        while self.waiting and not out.prefills:
            seq = self.waiting[0]
            n = seq.num_tokens
            if not self.fits(n):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, n)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))


class DecodeOverASlice(Final):
    """Decodes `self.running[:]`, a copy: a sequence preempted earlier in the loop is still
    decoded after its blocks are gone."""

    def decode(self, out):
        for seq in self.running[:]:
            while True:
                try:
                    slot = self.bm.append_slot(seq.seq_id)
                except OutOfBlocks:
                    victim = self.running.pop()
                    self.preempt(victim, out)
                    if victim is seq:
                        break
                    continue
                out.decodes.append(Decode(seq, slot))
                break


class AddTakesBackTheHead(Admitting):
    """add() queues the request, then on refusal takes back the head of waiting (popleft)
    instead of the request it just queued."""

    def add(self, seq):
        self.waiting.append(seq)
        need = self.blocks_needed(seq.prompt_len + seq.max_new_tokens)
        if need > self.bm.num_blocks - self.watermark:
            self.waiting.popleft()
            raise RequestTooLarge(f"sequence {seq.seq_id} needs up to {need} blocks")


class VictimPeekedNotPopped(Final):
    """Preempts the newest with `self.running[-1]` and then stops counting it out of running:
    the victim stays in running, waiting and preempted at once."""

    def decode(self, out):
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                victim = self.running[-1]
                self.preempt(victim, out)
                if victim is seq:
                    break
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1


class DecodePreemptsEveryNewer(Final):
    """On a failed append, preempts every sequence behind the one asking at once, to be sure
    the retry finds room: more victims than one step needs."""

    def decode(self, out):
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                self.preempt(self.running.pop(), out)
                while len(self.running) - 1 > i:
                    self.preempt(self.running.pop(), out)
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1


class StepAdmitsWhenIdle(Final):
    """Admits only once nothing runs: a batch runs to its end before the next is let in."""

    def step(self):
        out = StepOutput()
        self.retire(out)
        self.decode(out)
        if not self.running:
            self.admit(out)
        return out


class FitsRefusesZero(Admitting):
    """Treats a request of 0 tokens as a caller's error and raises."""

    def fits(self, n_tokens):
        if n_tokens <= 0:
            raise ValueError(f"n_tokens must be positive, got {n_tokens}")
        return self.bm.num_free - self.blocks_needed(n_tokens) >= self.watermark


class FitRoundsDown(Admitting):
    """Counts `n_tokens // block_size` blocks: a partial last block is taken for free, so a
    request one block too large is admitted."""

    def fits(self, n_tokens):
        return self.bm.num_free - n_tokens // self.bm.block_size >= self.watermark


class VictimNeverTheAsker(Final):
    """Never preempts the sequence whose append failed: when the newest is the one asking, it
    preempts the one before it instead."""

    def decode(self, out):
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                if self.running[-1] is seq and len(self.running) > 1:
                    victim = self.running.pop(-2)
                    i -= 1
                else:
                    victim = self.running.pop()
                self.preempt(victim, out)
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1


class AdmitNewestFirst(Admitting):
    """Puts each admitted sequence at the front of running (insert(0, ...)): newest first."""

    def admit(self, out):
        while self.waiting and self.fits(self.waiting[0].num_tokens):
            seq = self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.insert(0, seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


class DecodeRestartsAfterPreempting(Final):
    """After each preemption, starts the decode loop again from the oldest: the sequences
    before the one that found no block decode a second time."""

    def decode(self, out):
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                self.preempt(self.running.pop(), out)
                i = 0
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1


class AdmitReservesTheFuture(Admitting):
    """Admits a request only while its whole future, prompt + max_new_tokens, fits now: it
    reserves what add() already sized, and admits fewer than the pool can take."""

    def admit(self, out):
        while self.waiting:
            seq = self.waiting[0]
            if not self.fits(seq.prompt_len + seq.max_new_tokens):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


class VictimHoldsTheMostTokens(Final):
    """Preempts the running sequence with the most tokens (the newest of equals), not the
    newest: one victim may free what the newest and another would."""

    def decode(self, out):
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                victim = max(reversed(self.running), key=lambda s: s.num_tokens)
                self.running.remove(victim)
                self.preempt(victim, out)
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1


class RetireStopsAtARunningOne(Decoding):
    """Retires from the front of running and stops at the first sequence still running: a
    finished sequence behind it stays."""

    def retire(self, out):
        while self.running and self.running[0].is_finished:
            seq = self.running.pop(0)
            self.bm.free_seq(seq.seq_id)
            out.finished.append(seq)


class VictimHoldsTheFewestTokens(Final):
    """Preempts the running sequence with the fewest tokens (the newest of equals), not the
    newest: mostly the same one, since the newest has generated least."""

    def decode(self, out):
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                victim = min(reversed(self.running), key=lambda s: s.num_tokens)
                j = self.running.index(victim)
                self.running.remove(victim)
                self.preempt(victim, out)
                if j < i:
                    i -= 1
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1


class RetireOnePerStep(Decoding):
    """Retires the first finished sequence it finds, then stops: one retired per step."""

    def retire(self, out):
        for seq in self.running:
            if seq.is_finished:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
                self.running = [s for s in self.running if s is not seq]
                break


class RetireFromTheBackStops(Decoding):
    """Retires from the newest end of running and stops at the first sequence still running."""

    def retire(self, out):
        while self.running and self.running[-1].is_finished:
            seq = self.running.pop()
            self.bm.free_seq(seq.seq_id)
            out.finished.append(seq)


class AdmitSizedAtThePrompt(Admitting):
    """Sizes and prefills a request at its prompt: one that already holds generated tokens
    (added back after a preemption) is admitted short."""

    def admit(self, out):
        while self.waiting:
            seq = self.waiting[0]
            n = seq.prompt_len
            if not self.fits(n):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, n)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, n))


class AdmitFitsThePromptOnly(Admitting):
    """Asks `fits` about the prompt but allocates every token: a request with generated
    tokens can pass the check and not fit."""

    def admit(self, out):
        while self.waiting:
            seq = self.waiting[0]
            if not self.fits(seq.prompt_len):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


class AdmitAllocatesThePrompt(Admitting):
    """Asks `fits` about every token and records them in the prefill, but allocates the
    prompt only: a request with generated tokens gets too few slots."""

    def admit(self, out):
        while self.waiting:
            seq = self.waiting[0]
            if not self.fits(seq.num_tokens):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.prompt_len)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


MISTAKES = {
    "victim peeked, not popped": (3, VictimPeekedNotPopped, {"decode"}),
    "fit counts one block too many": (1, FitRoundsUp, {"fits"}),
    "retire skips the next sequence": (3, RetireSkipsNext, {"retire"}),
    "admit puts a waiting sequence back last": (3, AdmitRequeuesAtBack, {"admit"}),
    "preempt leaves out.preempted empty": (3, PreemptReportsNothing, {"preempt"}),
    "preempt reports the victim finished": (3, PreemptReportedFinished, {"preempt"}),
    "add fits beside the running requests": (1, AddFitsBesideRunning, {"add"}),
    "admit stops after one admission": (1, AdmitUntilOneAdmitted, {"admit"}),
    "decode walks a slice of running": (3, DecodeOverASlice, {"decode"}),
    "a refused add takes back the head": (1, AddTakesBackTheHead, {"add"}),
    "decode preempts every newer sequence": (3, DecodePreemptsEveryNewer, {"decode"}),
    "step admits only when nothing runs": (3, StepAdmitsWhenIdle, {"step"}),
    "fits raises for 0 tokens": (1, FitsRefusesZero, {"fits"}),
    "fit counts a partial block free": (1, FitRoundsDown, {"fits"}),
    "the victim is never the asker": (3, VictimNeverTheAsker, {"decode"}),
    "admit puts newcomers first": (1, AdmitNewestFirst, {"admit"}),
    "decode restarts after preempting": (3, DecodeRestartsAfterPreempting, {"decode"}),
    "admit reserves the future": (1, AdmitReservesTheFuture, {"admit"}),
    "the victim holds the most tokens": (3, VictimHoldsTheMostTokens, {"decode"}),
    "retire stops at a running sequence": (2, RetireStopsAtARunningOne, {"retire"}),
    "the victim holds the fewest tokens": (3, VictimHoldsTheFewestTokens, {"decode"}),
    "retire retires one per step": (2, RetireOnePerStep, {"retire"}),
    "retire from the back stops at a running one": (2, RetireFromTheBackStops, {"retire"}),
    "admission sized at the prompt": (1, AdmitSizedAtThePrompt, {"admit"}),
    "fits asked about the prompt only": (1, AdmitFitsThePromptOnly, {"admit"}),
    "admit allocates the prompt": (1, AdmitAllocatesThePrompt, {"admit"}),
}
