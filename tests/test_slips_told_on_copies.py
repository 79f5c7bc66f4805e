"""Five slips graded end to end, each told by what copies of the learner's own object show:
a chunk's num_cached asked again after its allocate, a cascade that writes a victim down only
into free bytes, a decode-filled block named from ROOT after block 0, one victim evicted twice,
and an empty-heap test made once before the pops. Each with a look-alike whose difference lies
elsewhere, where the sentence must not appear."""

from __future__ import annotations

import heapq

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.token_budget import TOPIC
from servelab.grading.token_budget_cached import hit_before_allocate
from servelab.grading.topic import ProbeFailed
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk
from servelab.testing.kv_offload_held import held_bytes_message
from servelab.weights.policies import NoVictim

Chunked = checkpoint("token-budget", 2)
Tiers = checkpoint("kv-offload", 3)
Sharing = checkpoint("prefix-cache", 2)
Evicting = checkpoint("weight-cache", 2)
LFU = checkpoint("eviction-policy", 2)


class _Admits(Chunked):  # type: ignore[misc,valid-type]
    """Admits as the notebook says, but reports ``reported(seq, hit, n)`` as num_cached."""

    def reported(self, seq, hit, n):  # type: ignore[no-untyped-def]
        return hit

    def admit(self, out, budget):  # type: ignore[no-untyped-def]
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
            slots = self.slots(seq, hit, n)
            cached = self.reported(seq, hit, n)
            out.scheduled.append(Chunk(seq, hit, n, slots, hit + n == seq.num_tokens, cached))
            self.computed[seq.seq_id] = hit + n
            budget -= n


class LooksUpAfterAllocate(_Admits):
    """num_cached from the manager's lookup once the chunk's blocks are allocated."""

    def reported(self, seq, hit, n):  # type: ignore[no-untyped-def]
        return self.cached_tokens(seq)


class CountsTheChunk(_Admits):
    """A look-alike: num_cached counts the chunk's own tokens too (hit + n)."""

    def reported(self, seq, hit, n):  # type: ignore[no-untyped-def]
        return hit + n


def test_num_cached_asked_after_allocate_is_told_so() -> None:
    report = failing_report("token-budget", LooksUpAfterAllocate, 2)[0].text
    assert "✗ step 2 · num_cached is the hit found before the chunk's allocate" in report
    assert "expected [(1, 8, 8)]: num_cached is the prefix hit found at admission, 8" in report
    assert "yours, 12, is what it answers after this chunk's allocate" in report
    assert "the full block [50, 51, 52, 53] the chunk computes itself" in report


def test_num_cached_asked_after_allocate_is_hinted_the_second_lookup() -> None:
    with pytest.raises(ProbeFailed) as caught:
        hit_before_allocate(LooksUpAfterAllocate)
    assert "not a second cached_tokens(seq)" in str(caught.value.hint)


def test_num_cached_of_another_size_is_not_told_the_lookup() -> None:
    hit_before_allocate(_Admits)  # the notebook's rule passes
    with pytest.raises(ProbeFailed) as caught:
        hit_before_allocate(CountsTheChunk)
    assert "is [(1, 8, 13)], expected [(1, 8, 8)]" in caught.value.message
    assert "after this chunk's allocate" not in caught.value.message
    # nor by the probe's own hint, which the report shows where nothing tells more
    (probe,) = [p for s in TOPIC.steps for p in s.probes if p.run is hit_before_allocate]
    assert caught.value.hint is None and "cached_tokens" not in probe.hint


class CascadeWhenRoom(Tiers["Hierarchy"]):  # type: ignore[misc,valid-type]
    """Writes a victim down only when the tier below has the room free already."""

    def _cascade(self, start, chunks):  # type: ignore[no-untyped-def]
        for tier in self.tiers[start:]:
            below = []
            for key, payload in chunks:
                if key not in tier and tier.used + len(payload) <= tier.capacity:
                    below += tier.put(key, payload) or []
            chunks = below


def test_a_cascade_into_free_bytes_is_told_with_its_own_tiers() -> None:
    report = failing_report("kv-offload", {**Tiers, "Hierarchy": CascadeWhenRoom}, 3)[0].text
    assert "the distinct chunks take" not in report
    assert "✗ step 3 · state machine\n      the tiers: disk.keys is" in report
    assert "out of the disk tier, where" in report
    assert "tier's own put(" in report
    assert "(len(payload) <= tier.capacity): the tier's put evicts to make room" in report


def test_held_bytes_is_told_from_the_learners_own_tiers() -> None:
    sizes = {"a": 10, "b": 20, "c": 5}
    tiers = {"cpu.keys": ["a"], "disk.keys": ["a", "b"]}
    assert held_bytes_message({**tiers, "held_bytes": 35}, sizes, 35) is None
    assert held_bytes_message({**tiers, "held_bytes": 30}, sizes, 35) is None  # its own tiers
    said = held_bytes_message({**tiers, "held_bytes": 40}, sizes, 30)
    assert said == (
        "h.held_bytes() is 40; the distinct chunks in your tiers take 30 bytes "
        "(cpu.keys ['a'], disk.keys ['a', 'b'])"
    )


def test_held_bytes_over_tiers_that_list_no_keys_is_left_to_the_tiers_comparison() -> None:
    sizes = {"a": 10, "b": 20}
    listed = {"cpu.keys": [["a", 10]], "disk.keys": ["b"], "held_bytes": 40}
    assert held_bytes_message(listed, sizes, 30) is None  # an unhashable entry is no key
    assert held_bytes_message({**listed, "cpu.keys": [("a", [10])]}, sizes, 30) is None
    assert held_bytes_message({**listed, "cpu.keys": ("a",)}, sizes, 30) is None


class ParentIfTruthy(Sharing):  # type: ignore[misc,valid-type]
    """Names a decode-filled block over the block before it only when that block's id is
    truthy: after block 0 the filled block is named from ROOT."""

    def append_slot(self, seq, token_id):  # type: ignore[no-untyped-def]
        slot = super().append_slot(seq, token_id)
        table = self.tables[seq]
        if slot.offset == self.block_size - 1 and len(table) > 1 and not table[-2]:
            tokens = self.seq_tokens[seq]
            block_tokens = tuple(tokens[-self.block_size :])
            self.map.pop(self.hash[slot.block], None)
            self.hash[slot.block] = None
            self._register(slot.block, self._chain(list(block_tokens))[0][0], block_tokens)
        return slot


class ParentIfTruthyElsewhere(Sharing):  # type: ignore[misc,valid-type]
    """After block 0 the filled block is hashed over a parent of its own making, not ROOT."""

    def append_slot(self, seq, token_id):  # type: ignore[no-untyped-def]
        slot = super().append_slot(seq, token_id)
        table = self.tables[seq]
        if slot.offset == self.block_size - 1 and len(table) > 1 and not table[-2]:
            block_tokens = tuple(self.seq_tokens[seq][-self.block_size :])
            self.map.pop(self.hash[slot.block], None)
            self.hash[slot.block] = None
            self._register(slot.block, hash((-1, block_tokens)), block_tokens)
        return slot


class ParentIfTruthyUnhashed(Sharing):  # type: ignore[misc,valid-type]
    """After block 0 the filled block is left without a hash."""

    def append_slot(self, seq, token_id):  # type: ignore[no-untyped-def]
        slot = super().append_slot(seq, token_id)
        table = self.tables[seq]
        if slot.offset == self.block_size - 1 and len(table) > 1 and not table[-2]:
            self.map.pop(self.hash[slot.block], None)
            self.hash[slot.block] = None
        return slot


@pytest.mark.parametrize(
    ("impl", "said"),
    [
        (ParentIfTruthyElsewhere, "yours hashed block 1, [3, 4], under a hash a later prompt"),
        (ParentIfTruthyUnhashed, "yours leaves block 1, [3, 4], unhashed;"),
    ],
)
def test_block_zero_read_as_no_previous_block_tells_what_the_block_holds(
    impl: type, said: str
) -> None:
    report = failing_report("prefix-cache", impl, 2)[0].text
    assert "where it is block 1 (another prompt took block 0 first" in report
    assert said in report
    assert "from ROOT" not in report


class KeepsCallersList(Sharing):  # type: ignore[misc,valid-type]
    """A look-alike: keeps the caller's own list as the sequence's tokens."""

    def allocate(self, seq, token_ids):  # type: ignore[no-untyped-def]
        got = super().allocate(seq, token_ids)
        self.seq_tokens[seq] = token_ids
        return got


def test_block_zero_read_as_no_previous_block_is_told_so() -> None:
    report = failing_report("prefix-cache", ParentIfTruthy, 2)[0].text
    assert "✗ step 2 · the manager keeps its own copy of the prompt" in report
    assert "whatever the caller does with its list" not in report
    assert "yours returns 2 too where the caller leaves its list alone" in report
    assert (
        "Where the block before it is block 0, yours hashed block 1 as a first block, from ROOT"
        in report
    )
    assert "where it is block 1 (another prompt took block 0 first" in report
    assert "only None means no previous block" in report


def test_a_manager_that_keeps_the_callers_list_is_told_the_copy() -> None:
    report = failing_report("prefix-cache", KeepsCallersList, 2)[0].text
    assert "whatever the caller does with its list afterwards" in report
    assert "plays no part" not in report
    assert "only None means no previous block" not in report


class OneVictimForTheLoop(Evicting):  # type: ignore[misc,valid-type]
    """Chooses the victim before the eviction loop, once."""

    def put(self, key, value, size):  # type: ignore[no-untyped-def]
        if key in self._entries:
            self._used -= self._entries.pop(key)[0]
        victim = self._next_victim() if self._used + size > self.capacity else None
        while self._used + size > self.capacity:
            self._evict(victim)
        self._entries[key] = (size, value)
        self._used += size


class SizeReadAfterPop(Evicting):  # type: ignore[misc,valid-type]
    """A look-alike: ``_evict`` reads the victim's size after removing it."""

    def _evict(self, key):  # type: ignore[no-untyped-def]
        self._entries.pop(key)
        size, _ = self._entries[key]
        self._used -= size


def test_one_victim_evicted_twice_is_told_so() -> None:
    report = failing_report("weight-cache", OneVictimForTheLoop, 2)[0].text
    assert "yours evicted 'a' twice in this put" in report
    assert "asked _next_victim once (it answered 'a')" in report
    assert "ask _next_victim inside the loop, once per eviction" in report


def test_a_size_read_after_the_pop_is_not_told_twice() -> None:
    report = failing_report("weight-cache", SizeReadAfterPop, 2)[0].text
    assert "KeyError" in report
    assert "twice in this put" not in report


class EmptyTestedFirst(LFU):  # type: ignore[misc,valid-type]
    """Tests for an empty heap once, then pops until a candidate turns up."""

    def pop_victim(self):  # type: ignore[no-untyped-def]
        if len(self.heap) == 0:
            raise NoVictim("nothing to evict")
        for _ in iter(int, 1):
            count, reached, key = heapq.heappop(self.heap)
            if key not in self.pinned and (self.count.get(key), self.reached.get(key)) == (
                count,
                reached,
            ):
                self.update_on_remove(key)
                return key
        raise AssertionError


class NeverTestsEmpty(LFU):  # type: ignore[misc,valid-type]
    """A look-alike: never tests the heap at all."""

    def pop_victim(self):  # type: ignore[no-untyped-def]
        while True:
            count, reached, key = heapq.heappop(self.heap)
            if key not in self.pinned and (self.count.get(key), self.reached.get(key)) == (
                count,
                reached,
            ):
                self.update_on_remove(key)
                return key


def test_an_empty_heap_tested_once_is_told_so() -> None:
    report = failing_report("eviction-policy", EmptyTestedFirst, 2)[0].text
    assert "the heap held 2 entries when pop_victim began" in report
    assert "raises NoVictim only where the heap is empty from the start" in report


def test_a_heap_never_tested_is_not_told_a_test_before_the_pops() -> None:
    report = failing_report("eviction-policy", NeverTestsEmpty, 2)[0].text
    assert "IndexError" in report
    assert "empty from the start" not in report
