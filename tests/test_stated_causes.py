"""A cause is said only where the evidence shows it: each gate graded end to end on a slip
where its sentence must not show and on a look-alike where it still does.

- A check's hint after a method found by its graft alone: a hint about what the check saw
  (the result of ``allocate``) that names another method than the one found (``append_slot``)
  states a cause in code the graft proved right.
- "Yours evicted though ... fit", and a check's rule of how much a put evicts ("the budget
  is bytes, not a count of entries"): said only of a put that took out a key resident before
  it, or stored its own; a put that stored nothing evicted nothing.
- "Yours refused ... only the pinned bytes cannot be made free": said only where yours raised
  the no-room error (a ``MemoryError``); a size refused as larger than the cache, or as no
  size, broke another rule.
- "Yours evicted the right key but left `X` unlike the reference's": a SIEVE sweep's rule,
  said only where every field that differs could be read on both sides (reading your
  eviction order raised: what it holds is unknown, the raise is what is said).
- "Yours allocated ..., then asked fits": said only where the question refused is about the
  request holding the blocks (its own token count), not the next one in the queue.
- "Does yours test the room before it asks whether the key is here?": asked only where your
  put, made again with room for the chunk, answers the key as a use.
- "Store cascades down": a rule about what the first tier evicts, said after a store only
  where that tier held a chunk to evict.
- "The same symptom comes from ...: does yours do that?": asked only where the look-alike
  agrees with yours on number variants of the failing program too.
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from servelab import checkpoint
from servelab.checkpoints.prefix_cache import ROOT
from servelab.grading import GradeFailure, grade
from servelab.kv.blocks import OutOfBlocks, SequenceExists
from servelab.kv.budget import Chunk
from servelab.kv.scheduler import Prefill
from servelab.weights import EntryPinned, EntryTooLarge, PinnedCapacityExceeded
from servelab.weights.policies import NoVictim


def _hint(topic: str, impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(topic, impl, step, out=io.StringIO(), quiet=True)
    return failed.value.report.hint


SHARING = checkpoint("prefix-cache", 2)
EVICTING = checkpoint("weight-cache", 2)
CHECKED = checkpoint("weight-cache", 4)
POLICIES = checkpoint("eviction-policy", 4)


class ParentFromThirdBlock(SHARING):  # type: ignore[misc]
    """Chains a block filled by decoding on its parent only from the third block on."""

    def append_slot(self, seq: Any, token_id: Any) -> Any:
        self._table(seq)
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:
            table = self.tables[seq]
            block_tokens = tuple(tokens[-self.block_size :])
            parent = self.hash[table[-2]] if len(table) > 2 else ROOT
            if parent is None:
                h = self._chain(tokens)[-1][0]
            else:
                h = hash((parent, block_tokens))
            self._register(slot.block, h, block_tokens)
        return slot


class KeepsCallersList(SHARING):  # type: ignore[misc]
    """Keeps the caller's prompt list itself as the sequence's tokens."""

    def allocate(self, seq: Any, token_ids: Any) -> int:
        if seq in self.tables:
            raise SequenceExists(f"sequence {seq} exists")
        tokens = token_ids
        hits = self._lookup(tokens)
        need = -(-len(tokens) // self.block_size) - len(hits)
        if need > self._room(hits):
            raise OutOfBlocks(f"sequence {seq} needs {need} new blocks")
        for block in hits:
            self._claim(block)
        table, chain = list(hits), self._chain(tokens)
        for i in range(len(hits), len(hits) + need):
            block = self._alloc()
            table.append(block)
            if i < len(chain):
                self._register(block, *chain[i])
        self.tables[seq] = table
        self.seq_tokens[seq] = tokens
        return len(hits) * self.block_size


def test_a_hint_about_another_method_than_the_one_grafted_is_left_out() -> None:
    hint = _hint("prefix-cache", ParentFromThirdBlock, 2)
    assert "keeps its own copy" not in hint, hint
    assert "`append_slot`" in hint, hint
    # the look-alike: the copy is what allocate forgot, and the hint is about allocate
    assert "keeps its own copy of the prompt" in _hint("prefix-cache", KeepsCallersList, 2)


class StoresNothing(EVICTING):  # type: ignore[misc]
    """Evicts as it should, then forgets to store the new entry."""

    def put(self, key: Any, value: Any, size: int) -> None:
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        while self._used + size > self.capacity:
            self._evict(self._next_victim())
        self._used += size


class EvictsAtFourEntries(EVICTING):  # type: ignore[misc]
    """Evicts once four entries are resident, whatever their bytes."""

    def put(self, key: Any, value: Any, size: int) -> None:
        if key in self._entries:
            old_size, _ = self._entries.pop(key)
            self._used -= old_size
        while self._used + size > self.capacity or len(self._entries) >= 4:
            self._evict(self._next_victim())
        self._entries[key] = (size, value)
        self._used += size


def test_evicted_though_it_fit_is_said_only_of_a_put_that_evicted() -> None:
    hint = _hint("weight-cache", StoresNothing, 2)
    assert "evicted" not in hint and "not a count" not in hint, hint
    assert "`put`" in hint, hint
    assert "yours evicted though 10 bytes fit" in _hint("weight-cache", EvictsAtFourEntries, 2)


class TooLargeFromAnySize(CHECKED):  # type: ignore[misc]
    """Tests the size against the capacity the wrong way round."""

    def _check_can_admit(self, key: Any, size: Any) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"size must be a positive int number of bytes, got {size!r}")
        if size <= self.capacity:
            raise EntryTooLarge(f"{key!r} is larger than the whole cache")
        if self._pins.get(key):
            raise EntryPinned(f"{key!r} is pinned")


class EveryEntryCountedPinned(CHECKED):  # type: ignore[misc]
    """Counts the bytes of every resident entry as pinned."""

    def _check_can_admit(self, key: Any, size: Any) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"size must be a positive int number of bytes, got {size!r}")
        if size > self.capacity:
            raise EntryTooLarge(f"{key!r} is larger than the whole cache")
        if self._pins.get(key):
            raise EntryPinned(f"{key!r} is pinned")
        pinned_bytes = sum(s for s, _ in self._entries.values())
        if size > self.capacity - pinned_bytes:
            raise PinnedCapacityExceeded(f"cannot admit {key!r}")


def test_a_refusal_is_read_as_the_pinned_bytes_only_where_yours_said_no_room() -> None:
    hint = _hint("weight-cache", TooLargeFromAnySize, 4)
    assert "pinned bytes" not in hint, hint
    assert hint.startswith("start at your `_check_can_admit`"), hint
    alike = _hint("weight-cache", EveryEntryCountedPinned, 4)
    assert "cannot be made free" in alike, alike


class NoVictimWithOneLeft(POLICIES["SIEVE"]):  # type: ignore[misc]
    """Raises NoVictim while one candidate is still left."""

    def pop_victim(self) -> Any:
        if len(self) == 1:
            raise NoVictim("every resident key is pinned")
        return super().pop_victim()


class SweepFromSecondKey(POLICIES["SIEVE"]):  # type: ignore[misc]
    """With the hand at rest, starts its sweep at the second oldest key."""

    def pop_victim(self) -> Any:
        if len(self) == 0:
            raise NoVictim("every resident key is pinned")
        i = 1 if self.hand is None else self.queue.index(self.hand)
        while True:
            if i == len(self.queue):
                i = 0
            key = self.queue[i]
            if key in self.pinned:
                i += 1
            elif self.visited[key]:
                self.visited[key] = False
                i += 1
            else:
                self.hand = key
                self.update_on_remove(key)
                return key


def test_a_field_one_side_could_not_read_is_not_named_as_left_unlike_the_reference() -> None:
    policies = {**POLICIES, "SIEVE": NoVictimWithOneLeft}
    hint = _hint("eviction-policy", policies, 4)
    assert "clears the visited bit" not in hint, hint
    assert "`SIEVE.pop_victim`" in hint, hint
    # the look-alike: every field readable, the one that differs is read
    alike = _hint("eviction-policy", {**POLICIES, "SIEVE": SweepFromSecondKey}, 4)
    assert "but left `visited` unlike the reference's" in alike, alike


ADMITTING = checkpoint("scheduler", 1)


class AdmitForgetsRunning(ADMITTING):  # type: ignore[misc]
    """Allocates and lists each admitted request, but never puts it in running."""

    def admit(self, out: Any) -> None:
        while self.waiting:
            seq = self.waiting[0]
            n = seq.num_tokens
            if not self.fits(n):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, n)
            out.prefills.append(Prefill(seq, n))


class AllocatesThenAsks(ADMITTING):  # type: ignore[misc]
    """Allocates the head, then asks fits of the pool it left: its blocks count twice."""

    def admit(self, out: Any) -> None:
        while self.waiting:
            seq = self.waiting[0]
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            if not self.fits(seq.num_tokens):
                self.bm.free_seq(seq.seq_id)
                break
            self.waiting.popleft()
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


def test_fits_after_allocating_is_said_only_of_the_request_holding_the_blocks() -> None:
    hint = _hint("scheduler", AdmitForgetsRunning, 1)
    assert "count twice" not in hint, hint
    assert "`admit`" in hint, hint
    alike = _hint("scheduler", AllocatesThenAsks, 1)
    assert "its own blocks count twice" in alike, alike


TIERS = checkpoint("kv-offload", 2)


class HereIsAMiss(TIERS):  # type: ignore[misc]
    """Answers a put of a key already here with None, whatever the room."""

    def put(self, key: Any, payload: Any, wait: int = 0) -> Any:
        if self._payload_size(payload) <= self.capacity and key in self._sizes:
            self.get(key)
            return None
        return super().put(key, payload, wait)


class RoomBeforeHere(TIERS):  # type: ignore[misc]
    """Looks for room before it asks whether the key is already here."""

    def put(self, key: Any, payload: Any, wait: int = 0) -> Any:
        size = self._payload_size(payload)
        if size <= self.capacity and key in self._sizes and self._choose_victims(size) is None:
            return None
        return super().put(key, payload, wait)


def test_the_room_is_asked_about_only_where_room_turns_the_miss_into_a_use() -> None:
    hint = _hint("kv-offload", HereIsAMiss, 2)
    assert "test the room before" not in hint, hint
    alike = _hint("kv-offload", RoomBeforeHere, 2)
    assert "does yours test the room before it asks whether the key is here?" in alike, alike


HIERARCHY = checkpoint("kv-offload", 3)


class StoreIntoDisk(HIERARCHY["Hierarchy"]):  # type: ignore[misc]
    """Puts the chunk into the disk tier, not the CPU tier."""

    def store(self, key: Any, payload: Any) -> bool:
        evicted = self.tiers[1].put(key, payload)
        if evicted is None:
            return False
        self._cascade(1, evicted)
        return True


class CascadesFirstVictimOnly(HIERARCHY["Hierarchy"]):  # type: ignore[misc]
    """Writes only the first of the CPU tier's victims down."""

    def store(self, key: Any, payload: Any) -> bool:
        evicted = self.tiers[0].put(key, payload)
        if evicted is None:
            return False
        self._cascade(1, evicted[:1])
        return True


def test_the_cascade_rule_is_said_only_where_the_first_tier_had_a_chunk_to_evict() -> None:
    hint = _hint("kv-offload", {**HIERARCHY, "Hierarchy": StoreIntoDisk}, 3)
    assert "cascades down" not in hint, hint
    assert "`Hierarchy.store`" in hint, hint
    alike = _hint("kv-offload", {**HIERARCHY, "Hierarchy": CascadesFirstVictimOnly}, 3)
    assert "cascades down a tier" in alike, alike


CHUNKED = checkpoint("token-budget", 2)


class AdmitsOneOverTheLimit(CHUNKED):  # type: ignore[misc]
    """Admits while len(running) <= max_num_seqs: one request too many."""

    def admit(self, out: Any, budget: int) -> None:
        while self.waiting and budget > 0 and len(self.running) <= self.max_num_seqs:
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


class AdmitsWhateverTheLimit(CHUNKED):  # type: ignore[misc]
    """Never looks at max_num_seqs."""

    def admit(self, out: Any, budget: int) -> None:
        while self.waiting and budget > 0:
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


def test_a_look_alike_is_asked_about_only_where_it_agrees_beyond_the_failing_numbers() -> None:
    hint = _hint("token-budget", AdmitsOneOverTheLimit, 2)
    assert "whatever max_num_seqs says" not in hint, hint
    assert "admit only while len(running) < max_num_seqs" in hint, hint
    alike = _hint("token-budget", AdmitsWhateverTheLimit, 2)
    assert "whatever max_num_seqs says" in alike, alike
