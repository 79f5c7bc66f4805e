"""Readings that state a cause of a count or a comparison do so only on its proof: each is
shown on a real slip graded end to end, and kept back on a look-alike (another cause whose
first differing call meets the same numbers)."""

from __future__ import annotations

from typing import Any

import servelab
from servelab import checkpoint
from servelab.grading.failures import GradeFailure
from servelab.grading.readings import Difference
from servelab.grading.readings.scheduler import scheduler_reading
from servelab.grading.readings.token_budget import token_budget_reading
from servelab.kv.blocks import BlockManager, OutOfBlocks, SequenceExists
from servelab.kv.budget import BudgetStep, Chunk
from servelab.kv.offload import ChunkNotPinned, ChunkNotReferenced
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.kv.scheduler import Sequence

PC2 = checkpoint("prefix-cache", 2)
SC1 = checkpoint("scheduler", 1)
SC2 = checkpoint("scheduler", 2)
TB2 = checkpoint("token-budget", 2)
KV1 = checkpoint("kv-offload", 1)
EP2 = checkpoint("eviction-policy", 2)


def hint(topic: str, impl: Any, step: int) -> str:
    """The report's hint line for ``impl`` graded at ``step`` (it must fail)."""
    try:
        servelab.grade(topic, impl, step, quiet=True)
    except GradeFailure as exc:
        return next(line for line in str(exc).splitlines() if "hint:" in line)
    raise AssertionError(f"{impl.__name__} passes")


# --- prefix cache: new blocks named from chain entry 0 -------------------------------------


class NewBlocksNamedFromZero(PC2):
    """Names the j-th new block by chain[j], counting the new blocks from 0, not the hits."""

    def allocate(self, seq: int, token_ids: list[int]) -> int:
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = list(token_ids)
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self._room(hits):
            raise OutOfBlocks("no room")
        for block in hits:
            self._claim(block)
        table, chain = list(hits), self._chain(tokens)
        for j in range(need):
            block = self._alloc()
            table.append(block)
            if j < len(chain):
                self._register(block, *chain[j])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


def test_new_blocks_counted_from_zero_is_said_where_the_copy_carries_those_names() -> None:
    said = hint("prefix-cache", NewBlocksNamedFromZero, 2)
    assert "counting the new blocks from 0, not from the 1 hit(s)" in said, said


# --- scheduler: fits one block early -----------------------------------------------------


class FitsStrictByHand(SC1):
    """num_free - needed - watermark > 0: strict where 0 is allowed."""

    def fits(self, n_tokens: int) -> bool:
        return bool(self.bm.num_free - self.blocks_needed(n_tokens) - self.watermark > 0)


class FitsTokensAgainstBlocks(SC1):
    """num_free - n_tokens >= watermark: tokens taken from a count of blocks."""

    def fits(self, n_tokens: int) -> bool:
        return bool(self.bm.num_free - n_tokens >= self.watermark)


def test_a_fit_refused_one_block_early_is_said_only_where_every_count_of_blocks_shows_it() -> None:
    said = hint("scheduler", FitsStrictByHand, 1)
    assert "one block early" in said and ">= watermark" in said, said
    assert "strict" not in said  # > and a block too many answer alike: neither is claimed
    # tokens read as blocks: refused here (3 free, 2 blocks for 5 tokens, watermark 1) too,
    # but it refuses 4 tokens, a block fewer, as well: no block-early line
    sched = FitsTokensAgainstBlocks(BlockManager(3, 4), watermark=1)
    d = Difference(
        "fits", "", (5,), {"num_free": 3}, {}, {}, "returned False", "returned True", sched
    )
    said = scheduler_reading(d) or ""
    assert "exactly the watermark" in said and "one block early" not in said
    assert "strict" not in said


# --- scheduler: retire late, or only when all are finished --------------------------------


class RetireDeferred(SC2):
    """Marks finished sequences and retires those marked at the previous retire."""

    def retire(self, out: Any) -> None:
        marked = getattr(self, "_marked", set())
        keep = []
        for seq in self.running:
            if seq.seq_id in marked:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
            else:
                keep.append(seq)
        self.running = keep
        self._marked = {s.seq_id for s in self.running if s.is_finished}


class RetireOnlyWhenAllFinished(SC2):
    """Retires only once every running sequence is finished."""

    def retire(self, out: Any) -> None:
        if self.running and all(s.is_finished for s in self.running):
            for seq in self.running:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
            self.running = []


def test_a_retire_that_changed_nothing_is_never_said_to_never_retire_on_one_call() -> None:
    late = hint("scheduler", RetireDeferred, 2)
    assert "one call late" in late and "never" not in late, late
    together = hint("scheduler", RetireOnlyWhenAllFinished, 2)
    assert "only finished sequences run, yours retires them" in together, together
    assert "never" not in together


# --- token budget: a prefix hit charged ---------------------------------------------------


class HitChargedViaComputed(TB2):
    """Takes computed[seq] (hit + n) off the budget: the hit is charged."""

    def admit(self, out: Any, budget: int) -> None:
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
            budget -= self.computed[seq.seq_id]


class AdmitChargesTwoBlocks(TB2):
    """Charges each admitted request two blocks of budget on top of its chunk (its decode
    room): short by 8 tokens after a request, as a hit of 8 cached tokens would leave it."""

    def admit(self, out: Any, budget: int) -> None:
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
            budget -= n + 2 * self.bm.block_size


def test_a_prefix_hit_charged_is_said_where_no_hits_give_the_whole_budget() -> None:
    said = hint("token-budget", HitChargedViaComputed, 2)
    assert "the cached tokens of the prefix hits before it" in said, said
    # the look-alike from the state before the same call (it fails an earlier check end to
    # end): 8 short after a request with 8 cached tokens, its two blocks' charge
    bm = PrefixCachingBlockManager(num_blocks=16, block_size=4)
    sched = TB2(bm, max_num_batched_tokens=12, max_num_seqs=4)
    sched.add(Sequence.from_prompt(0, [0, 1, 2, 3, 4, 5, 6, 7, 8], 1))
    sched.step()
    sched.sequence(0).append_token(1)
    sched.step()
    sched.add(Sequence.from_prompt(1, [0, 1, 2, 3, 4, 5, 6, 7, 50, 51], 1))
    sched.add(Sequence.from_prompt(2, [60, 61, 62], 1))
    sched.retire(BudgetStep())
    sched.__class__ = AdmitChargesTwoBlocks
    d = Difference(
        "admit", "", (BudgetStep(), 12), {}, {}, {}, "returned None", "returned None", sched
    )
    other = token_budget_reading(d) or ""
    assert (
        "yours gave request 2 2 of its 3 tokens to run, where the tokens run before it leave 10"
        in other
    ), other
    assert "cached" not in other and "prefix hit" not in other


# --- kv offload: a count dropped by 2 is not an off-by-one -------------------------------


class UnrefDropsAll(KV1):
    """Drops every transfer's reference at once."""

    def unref(self, key: str) -> int:
        self._resident(key, "unref")
        if self._refs.get(key, 0) < 1:
            raise ChunkNotReferenced(f"{key!r}")
        del self._refs[key]
        return int(self.ref_count(key))


class UnpinToZeroAtTwo(KV1):
    """A chunk pinned twice is unpinned for good by one unpin."""

    def unpin(self, key: str) -> int:
        self._resident(key, "unpin")
        left = self._pins.get(key, 0) - 1
        if left < 0:
            raise ChunkNotPinned(f"{key!r}")
        left = 0 if left == 1 else left
        if left:
            self._pins[key] = left
        else:
            self._pins.pop(key, None)
        return left


def test_a_count_dropped_by_two_is_said_as_such_not_as_off_by_one() -> None:
    said = hint("kv-offload", UnrefDropsAll, 1)
    assert "off by one" not in said, said
    assert "from 2 to 0, the reference to 1" in said, said
    # dropped only at 1 (from 3 it leaves 2, on a copy): the threshold is said
    said = hint("kv-offload", UnpinToZeroAtTwo, 1)
    assert "off by one" not in said, said
    assert "with one pin still left (2 -> none), where the reference leaves 1" in said, said


# --- eviction policy: a hit that adds 2 (a plain `+= 2` keeps the reference's order: it passes)


class LFUHitSuperPlusOne(EP2):
    """Calls the reference's update_on_hit through super() and adds 1 itself as well."""

    def update_on_hit(self, key: Any) -> None:
        super().update_on_hit(key)
        self.count[key] += 1


def test_a_hit_counted_twice_says_how_far_the_count_moved() -> None:
    said = hint("eviction-policy", LFUHitSuperPlusOne, 2)
    assert "from 1 to 3, the reference to 2: twice as far" in said, said
    assert "off by one" not in said
