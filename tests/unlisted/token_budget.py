"""Token-budget scheduler slips, each on the notebook's own classes."""

from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk

TOPIC = "token-budget"
Chunked = checkpoint(TOPIC, 2)
Final = checkpoint(TOPIC, 3)


class AllocatesFromZero(Chunked):
    """Slices the chunk's tokens from 0, forgetting the prefix hit: after a hit, it allocates
    the hit's tokens only, not the chunk's."""

    def admit(self, out, budget):
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids[:n])
            except OutOfBlocks:
                break
            self.waiting.popleft()
            self.running.append(seq)
            samples = hit + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class PreemptUnlisted(Final):
    """Frees the victim and requeues it, but never reports it in ``out.preempted``."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = 0
        self.waiting.appendleft(victim)


class NeedsFromGenerated(Final):
    """Its own helper says a request that has generated anything needs one token, which is
    wrong for a preempted request being recomputed in chunks."""

    def _need(self, seq, start):
        return 1 if seq.num_generated else seq.num_tokens - start

    def schedule_running(self, out, budget):
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(self._need(seq, start), budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class PreemptKeepsTable(Final):
    """Resets and requeues the victim but never frees its blocks: free_seq left for retire."""

    def preempt(self, victim, out):
        self.computed[victim.seq_id] = 0
        self.waiting.appendleft(victim)
        out.preempted.append(victim)


class ExactBudgetForgotten(Chunked):
    """Splits the cases need < budget and need > budget and forgets need == budget: a request
    that needs exactly the budget left waits for the next step."""

    def admit(self, out, budget):
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            need = seq.num_tokens - hit
            if need < budget:
                n = need
            elif need > budget:
                n = budget
            else:
                break
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


class SlotsOfTheChunkCount(Chunked):
    """Takes the slots of positions 0 .. n - 1: right without a hit, wrong after one."""

    def slots(self, seq, start, n):
        size, table = self.bm.block_size, self.bm.block_table(seq.seq_id)
        return [table[p // size] * size + p % size for p in range(n)]


class SpentBudgetBelowZero(checkpoint(TOPIC, 1)):
    """Stops only when the budget goes below zero, which it never does: once it is spent,
    each further running request gets a chunk of 0 tokens."""

    def schedule_running(self, out, budget):
        for seq in self.running:
            if budget < 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            slots = self.extend(seq, start, n)
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget


class AdmitRequeuesAtTheBack(Chunked):
    """On OutOfBlocks puts the head back at the *end* of waiting: a later, smaller request
    overtakes it (first come, first served is broken)."""

    def admit(self, out, budget):
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting.popleft()
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids[: hit + n])
            except OutOfBlocks:
                self.waiting.append(seq)
                break
            self.running.append(seq)
            samples = hit + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class RetryChargedTwice(Final):
    """Charges the whole chunk again on the retry after a preemption: the budget for the
    requests after the one that failed is short by its chunk."""

    def schedule_running(self, out, budget):
        i, failed = 0, 0
        while i < len(self.running) and budget - failed > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget - failed)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                failed += n
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget - failed


class TwoVictimsPerFailedExtend(Final):
    """On a failed extend, preempts the latest two running requests at once, to make room
    generously."""

    def schedule_running(self, out, budget):
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                for _ in range(2):
                    if len(self.running) > i:
                        victim = self.running.pop()
                        self.preempt(victim, out)
                        if victim is seq:
                            return budget
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class RunningPromptNotChunked(Chunked):
    """Gives a running request its whole rest or nothing: the rest of a long prompt waits for
    a step with room for all of it."""

    def schedule_running(self, out, budget):
        for seq in self.running:
            start = self.computed[seq.seq_id]
            n = seq.num_tokens - start
            if n > budget:
                break
            slots = self.extend(seq, start, n)
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget


class AdmitNeverCharged(checkpoint(TOPIC, 1)):
    """Admits whole prompts while each fits the budget, but never takes them off it: the step
    computes more tokens than max_num_batched_tokens."""

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


class NoRetryAfterPreempting(Final):
    """After preempting the latest running request, moves on to the next request instead of
    retrying the one whose extend failed: it gets nothing this step."""

    def schedule_running(self, out, budget):
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                i += 1
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class SampledTokenCharged(Final):
    """Charges a chunk that samples one token more, for the token it generates: a step of
    decodes only looks charged twice, a longer chunk does not."""

    def schedule_running(self, out, budget):
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            samples = start + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, start, n, slots, samples))
            self.computed[seq.seq_id] = start + n
            budget -= n + samples
            i += 1
        return budget


class AdmitWaitsForTheWholePrompt(Chunked):
    """Admits a request only when the blocks of its whole prompt are free, though it
    allocates only the chunk that runs: a long prompt waits while its first chunk would fit."""

    def admit(self, out, budget):
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            if self.bm.blocks_needed(seq.num_tokens) > self.bm.num_free:
                break
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


class SamplesOncePastThePrompt(Final):
    """Marks a chunk as sampling once it reaches the prompt's end, not the request's: a
    preempted request recomputing its generated tokens samples a chunk short of its end."""

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
            samples = hit + n >= seq.prompt_len
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class HitNotReported(Chunked):
    """Leaves num_cached out of the admitted chunk: a prefix hit is never reported."""

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
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class VictimsQueuedInOrder(Final):
    """Puts victims at the front of waiting in the order they were preempted: of two victims
    in one step, the newer comes back first."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = 0
        self.waiting.insert(len(out.preempted), victim)
        out.preempted.append(victim)


class OneTokenChunkSamples(Chunked):
    """Takes any one-token chunk of a running request for a decode: a prompt's rest cut to
    one token by the budget samples mid-prompt."""

    def schedule_running(self, out, budget):
        for seq in self.running:
            if budget == 0:
                break
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            slots = self.extend(seq, start, n)
            samples = n == 1 or start + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, start, n, slots, samples))
            self.computed[seq.seq_id] = start + n
            budget -= n
        return budget


class RunningChunkSamplesAtThePrompt(Final):
    """Step 3, schedule_running: a running chunk samples once it reaches the prompt's end
    (start + n >= prompt_len): a recomputed request's chunk past its prompt but short of its
    end samples too early."""

    def schedule_running(self, out, budget):
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n >= seq.prompt_len))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class AdmitCountsTheHitsBlocks(Chunked):
    """Checks the free blocks for the hit's tokens too before allocating: a prefix hit held
    by a running request is shared, yet it refuses a prompt whose new block is free."""

    def admit(self, out, budget):
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cached_tokens(seq)
            n = min(seq.num_tokens - hit, budget)
            if self.bm.blocks_needed(hit + n) > self.bm.num_free:
                break
            self.bm.allocate(seq.seq_id, seq.token_ids[: hit + n])
            self.waiting.popleft()
            self.running.append(seq)
            samples = hit + n == seq.num_tokens
            out.scheduled.append(Chunk(seq, hit, n, self.slots(seq, hit, n), samples, hit))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class AdmitChargesWholeBlocks(Chunked):
    """Charges an admitted chunk the whole blocks it fills (blocks * block_size), not its
    tokens: a 6-token chunk in blocks of 4 costs 8, and the next request's chunk runs short."""

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
            budget = max(0, budget - self.bm.blocks_needed(n) * self.bm.block_size)


class VictimSkipsPrefilling(Final):
    """Spares a request still in its prompt: the victim is the latest running request whose
    prompt has run, the latest of all only when none has."""

    def schedule_running(self, out, budget):
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                later = self.running[i + 1 :]
                done = [s for s in later if self.computed[s.seq_id] >= s.prompt_len]
                victim = done[-1] if done else self.running[-1]
                self.running.remove(victim)
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class VictimHighestId(Final):
    """Takes the running request with the highest seq_id for the latest: right while ids grow
    with arrival, wrong for ids added out of order."""

    def schedule_running(self, out, budget):
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = max(self.running, key=lambda s: s.seq_id)
                self.running.remove(victim)
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                i = self.running.index(seq)
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class PreemptRestoresTheHit(Final):
    """Sets a victim's num_computed_tokens to its prefix hit, not 0, as if its cached blocks
    still counted: equal to the count it had wherever that count ends on a block's edge."""

    def preempt(self, victim, out):
        self.bm.free_seq(victim.seq_id)
        self.computed[victim.seq_id] = self.cached_tokens(victim)
        self.waiting.appendleft(victim)
        out.preempted.append(victim)


MISTAKES = {
    "a one-token chunk taken for a decode": (2, OneTokenChunkSamples, {"schedule_running"}),
    "a prefix hit left out of the chunk": (2, HitNotReported, {"admit"}),
    "two victims queued newest first": (3, VictimsQueuedInOrder, {"preempt"}),
    "admit allocates from token 0, not up to the chunk's end": (2, AllocatesFromZero, {"admit"}),
    "preempt does not report its victim": (3, PreemptUnlisted, {"preempt"}),
    "preempt keeps the victim's blocks": (3, PreemptKeepsTable, {"preempt"}),
    "a recomputed request gets one token a step": (
        3,
        NeedsFromGenerated,
        {"schedule_running"},
    ),
    "a request needing exactly the budget waits": (2, ExactBudgetForgotten, {"admit"}),
    "slots counted from position 0": (2, SlotsOfTheChunkCount, {"slots", "admit"}),
    "the budget checked for below zero": (1, SpentBudgetBelowZero, {"schedule_running"}),
    "a request the pool cannot hold goes to the back": (2, AdmitRequeuesAtTheBack, {"admit"}),
    "a failed extend charged on the retry": (3, RetryChargedTwice, {"schedule_running"}),
    "a failed extend preempts two": (3, TwoVictimsPerFailedExtend, {"schedule_running"}),
    "a running prompt's rest not chunked": (2, RunningPromptNotChunked, {"schedule_running"}),
    "admitted prompts never charged": (1, AdmitNeverCharged, {"admit"}),
    "no retry after preempting": (3, NoRetryAfterPreempting, {"schedule_running"}),
    "a sampled token charged": (3, SampledTokenCharged, {"schedule_running"}),
    "a recomputed chunk samples once past the prompt": (
        3,
        SamplesOncePastThePrompt,
        {"admit"},
    ),
    "admission waits for the whole prompt's blocks": (
        2,
        AdmitWaitsForTheWholePrompt,
        {"admit"},
    ),
    "a running chunk samples at the prompt's end": (
        3,
        RunningChunkSamplesAtThePrompt,
        {"schedule_running"},
    ),
    "a prefix hit's shared blocks counted as new": (2, AdmitCountsTheHitsBlocks, {"admit"}),
    "an admitted chunk charged its whole blocks": (2, AdmitChargesWholeBlocks, {"admit"}),
    "the victim spares a request mid-prompt": (3, VictimSkipsPrefilling, {"schedule_running"}),
    "the victim has the highest id": (3, VictimHighestId, {"schedule_running"}),
    "a victim restarts from its prefix hit": (3, PreemptRestoresTheHit, {"preempt"}),
}
