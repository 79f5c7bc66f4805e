"""Slips that once passed their step's grade, each a one-statement change of the notebook's own
method: the probe added for it must fail the slip with its rule in the report, and a class of
the same look that keeps the rule must not meet it."""

from __future__ import annotations

from functools import partial

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.block_manager import _copy_of_a_block_three_share
from servelab.grading.kv_offload_answers import (
    counts_past_one,
    exact_fits,
    retrieve_unpins_each,
    store_answers_true,
    too_large_when_held,
)
from servelab.grading.policy_probes import _sieve_hand_on_key_zero
from servelab.grading.policy_probes_heap import lfu_unpinned_key_found
from servelab.grading.prefix_cache_order import lookup_sees_registers
from servelab.grading.scheduler import SchedulerScript
from servelab.grading.scheduler_orders import (
    running_in_admission_order,
    victims_in_preemption_order,
)
from servelab.grading.topic import ProbeFailed
from servelab.grading.weight_cache import (
    _bad_size_before_pinned,
    _pin_returns_count,
    _pinned_twice_holds_once,
)
from servelab.kv.blocks import Slot
from servelab.kv.offload.errors import ChunkNotReferenced, ChunkTooLarge
from servelab.weights.cache import EntryPinned, EntryTooLarge, PinnedCapacityExceeded

LFU = checkpoint("eviction-policy", 2)


class UnpinWithoutPush(LFU):
    """update_on_unpin drops the pin and pushes nothing: a key hit while pinned (its entry
    stale) or skipped by a pop while pinned is never found again."""

    def update_on_unpin(self, key):
        self.pinned.discard(key)


class UnpinPushesAFreshTick(LFU):
    """Pushes the key back, but with a fresh tick: found again, though out of its place."""

    def update_on_unpin(self, key):
        self.pinned.discard(key)
        self.clock += 1
        self.reached[key] = self.clock
        LFU.update_on_unpin(self, key)


def _step_3(lfu: type) -> dict[str, type]:
    return {**checkpoint("eviction-policy", 3), "LFU": lfu}


def test_an_unpin_that_pushes_nothing_is_caught_at_steps_2_and_3() -> None:
    for impl, step in ((UnpinWithoutPush, 2), (_step_3(UnpinWithoutPush), 3)):
        report = failing_report("eviction-policy", impl, step)[0].text
        assert "✗ step 2 · an unpinned key is found again" in report
        assert "p.pop_victim()  # raised NoVictim" in report
        assert "the heap holds no current entry for it" in report
        assert "update_on_unpin`: with the reference's in its place" in report
        assert "push it back onto the heap" in report


def test_an_unpin_that_pushes_a_fresh_tick_is_found_again() -> None:
    lfu_unpinned_key_found(_step_3(UnpinPushesAFreshTick))  # found again: no failure
    report = failing_report("eviction-policy", _step_3(UnpinPushesAFreshTick), 3)[0].text
    assert "an unpinned key is found again" not in report
    assert "✗ step 2 · an unpin keeps a key's place" in report


PREFIX = checkpoint("prefix-cache", 3)


class ReleaseFreesWhileHeld(PREFIX):
    """The refcount test negated: a block goes back when its refcount is not yet 0."""

    def _release(self, block):
        self.ref[block] -= 1
        if self.ref[block] != 0:
            if self.hash[block] is not None:
                self.evictable_lru[block] = None
            else:
                self.free.append(block)


def test_blocks_missing_from_the_free_list_are_named_in_plain_words() -> None:
    report = failing_report("prefix-cache", ReleaseFreesWhileHeld, 3)[0].text
    assert "✗ step 3 · a freed block is freed once" in report
    assert ": blocks [0, 1] are missing; in the reference" in report
    assert "block s " not in report


# --- slips only a rare program reaches: each meets a fixed program


def _probe_passes(probe, impl) -> None:  # type: ignore[no-untyped-def]
    probe(impl)  # the look-alike keeps the rule: the probe raises nothing


TIER = checkpoint("kv-offload", 1)


class UnrefKeepsTheCount(TIER):
    """unref drops the count only when it reaches 0: a second transfer's unref returns 3."""

    def unref(self, key):
        self._resident(key, "unref")
        left = self._refs.get(key, 0) - 1
        if left < 0:
            raise ChunkNotReferenced(f"{key!r} has only the tier's own reference")
        if not left:
            del self._refs[key]
        return self.ref_count(key)


class UnrefAsTwoStatements(TIER):
    """The same rule written otherwise: the count drops, the key leaves at 0."""

    def unref(self, key):
        self._resident(key, "unref")
        if self._refs.get(key, 0) < 1:
            raise ChunkNotReferenced(f"{key!r} has only the tier's own reference")
        self._refs[key] -= 1
        if self._refs[key] == 0:
            del self._refs[key]
        return self.ref_count(key)


def test_an_unref_past_one_transfer_returns_the_count() -> None:
    report = failing_report("kv-offload", UnrefKeepsTheCount, 1)[0].text
    assert "✗ step 1 · each count call returns the count" in report
    assert "returned value (the ref_count now: 1 + transfers) is 3, expected 2" in report
    _probe_passes(counts_past_one, UnrefAsTwoStatements)


class ExactFitIsTooLarge(TIER):
    """`size >= self.capacity`: a chunk of exactly the tier raises ChunkTooLarge."""

    def put(self, key, payload):
        if self._payload_size(payload) >= self.capacity:
            raise ChunkTooLarge(f"{key!r} fills the whole tier")
        return TIER.put(self, key, payload)


class ExactFitChecksFirst(TIER):
    """`size > self.capacity` tested by the subclass too: an exact fit is stored."""

    def put(self, key, payload):
        if self._payload_size(payload) > self.capacity:
            raise ChunkTooLarge(f"{key!r} is larger than the whole tier")
        return TIER.put(self, key, payload)


def test_a_chunk_of_exactly_the_capacity_fits() -> None:
    report = failing_report("kv-offload", ExactFitIsTooLarge, 1)[0].text
    assert "✗ step 1 · an exact fit fits" in report
    assert "size > capacity" in report
    _probe_passes(exact_fits, ExactFitChecksFirst)


class HeldKeyBeforeSize(TIER):
    """A put of a key the tier holds returns [] before the size is checked."""

    def put(self, key, payload):
        if key in self._sizes:
            self.get(key)
            return []
        return TIER.put(self, key, payload)


def test_a_too_large_put_of_a_held_key_raises() -> None:
    report = failing_report("kv-offload", HeldKeyBeforeSize, 1)[0].text
    assert "✗ step 1 · too large though held" in report
    assert "raises ChunkTooLarge" in report
    _probe_passes(too_large_when_held, ExactFitChecksFirst)


def _hierarchy(cls: type) -> dict[str, type]:
    return {**checkpoint("kv-offload", 3), "Hierarchy": cls}


HIER = checkpoint("kv-offload", 3)["Hierarchy"]


class StoreTestsTheListsTruth(HIER):
    """`if not evicted`: a put that evicted nothing ([]) is taken for a miss."""

    def store(self, key, payload):
        evicted = self.tiers[0].put(key, payload)
        if not evicted:
            return False
        self._cascade(1, evicted)
        return True


class StoreTestsNone(HIER):
    """`if evicted is None`, and the cascade skipped when nothing was evicted: same answers."""

    def store(self, key, payload):
        evicted = self.tiers[0].put(key, payload)
        if evicted is None:
            return False
        if evicted:
            self._cascade(1, evicted)
        return True


def test_a_store_that_evicts_nothing_returns_true() -> None:
    report = failing_report("kv-offload", _hierarchy(StoreTestsTheListsTruth), 3)[0].text
    assert "✗ step 3 · a store that evicts nothing" in report
    _probe_passes(store_answers_true, _hierarchy(StoreTestsNone))


class RetrieveUnpinsTheLast(HIER):
    """The unpin dedented out of the last loop: only the last chunk found is unpinned."""

    def retrieve(self, found):
        payloads = []
        for key, i in found:
            self.tiers[i].ref(key)
            payloads.append(self.tiers[i].get(key))
        top = self.tiers[0]
        for (key, i), payload in zip(found, payloads, strict=True):
            if i > 0 and key not in top and len(payload) <= top.capacity:
                evicted = top.put(key, payload)
                if evicted:
                    self._cascade(1, evicted)
        for key, i in found:
            self.tiers[i].unref(key)
        if found:
            self.tiers[i].unpin(key)  # the loop's last pair: the one unpin, after the loop
        return payloads


def test_a_retrieve_of_two_chunks_unpins_both() -> None:
    report = failing_report("kv-offload", _hierarchy(RetrieveUnpinsTheLast), 3)[0].text
    assert "✗ step 3 · a retrieve unpins each chunk" in report
    assert "yours left 'a' in `cpu.pins`" in report
    _probe_passes(retrieve_unpins_each, _hierarchy(HIER))


SIEVE4 = checkpoint("eviction-policy", 4)["SIEVE"]


class HandTestedForTruth(SIEVE4):
    """`0 if not self.hand`: a hand on key 0 is taken for no hand."""

    def pop_victim(self):
        saved = self.hand
        if not self.hand:
            self.hand = None
        try:
            return SIEVE4.pop_victim(self)
        except Exception:
            self.hand = saved
            raise


def test_a_sieve_hand_on_key_zero_is_a_hand() -> None:
    impl = {**checkpoint("eviction-policy", 4), "SIEVE": HandTestedForTruth}
    report = failing_report("eviction-policy", impl, 4)[0].text
    assert "✗ step 4 · a hand on key 0" in report
    assert "pop_victim() returned 5, expected 0" in report
    _probe_passes(_sieve_hand_on_key_zero, checkpoint("eviction-policy", 4))


CACHE3 = checkpoint("weight-cache", 3)


class UnpinReturnsTheKey(CACHE3):
    def unpin(self, key):
        CACHE3.unpin(self, key)
        return key


def test_pin_and_unpin_return_the_count() -> None:
    report = failing_report("weight-cache", UnpinReturnsTheKey, 3)[0].text
    assert "✗ step 3 · pin and unpin return the count" in report
    assert "cache.unpin('a') returned 'a', expected 1" in report
    _probe_passes(_pin_returns_count, CACHE3)


CACHE4 = checkpoint("weight-cache", 4)


class PinBeforeSize(CACHE4):
    """The pin is told before the size (after larger than the cache): a size of 0 for a pinned
    key raises EntryPinned."""

    def _check_can_admit(self, key, size):
        if self._pins.get(key) and not (isinstance(size, int) and size > self.capacity):
            raise EntryPinned(f"{key!r} is pinned; unpin it before replacing it")
        return CACHE4._check_can_admit(self, key, size)


def test_a_bad_size_is_told_before_a_pin() -> None:
    report = failing_report("weight-cache", PinBeforeSize, 4)[0].text
    assert "✗ step 4 · a bad size is told before a pin" in report
    assert "raised EntryPinned, expected a ValueError" in report
    _probe_passes(_bad_size_before_pinned, CACHE4)


SCHED1 = checkpoint("scheduler", 1)


class AdmitInsertsAtFront(SCHED1):
    """running.insert(0, seq): one step's admissions end up newest first."""

    def admit(self, out):
        before = list(self.running)
        SCHED1.admit(self, out)
        added = [s for s in self.running if s not in before]
        self.running.clear()
        self.running.extend(list(reversed(added)) + before)


def test_running_keeps_admission_order() -> None:
    report = failing_report("scheduler", AdmitInsertsAtFront, 1)[0].text
    assert "✗ step 1 · running keeps admission order" in report
    assert "running after the step is [2, 1, 0], expected [0, 1, 2]" in report
    running_in_admission_order(SchedulerScript, SCHED1)


SCHED3 = checkpoint("scheduler", 3)


class PreemptListsAtFront(SCHED3):
    """out.preempted.insert(0, victim): several victims of one step come out reversed."""

    def preempt(self, victim, out):
        SCHED3.preempt(self, victim, out)
        out.preempted.insert(0, out.preempted.pop())


def test_several_victims_are_listed_in_preemption_order() -> None:
    report = failing_report("scheduler", PreemptListsAtFront, 3)[0].text
    assert "✗ step 3 · several victims, in order" in report
    assert "preempted is [1, 2], expected [2, 1]" in report
    victims_in_preemption_order(SchedulerScript, SCHED3)


class PinnedBytesPerPin(CACHE4):
    """The pinned bytes summed once per pin: a model two replicas pin counts twice."""

    def _check_can_admit(self, key, size):
        CACHE4._check_can_admit(self, key, size)
        pinned = [k for k in self._entries if self._pins.get(k)]
        pinned_bytes = sum(self._entries[k][0] * self._pins[k] for k in pinned)
        if size > self.capacity - pinned_bytes:
            raise PinnedCapacityExceeded(f"cannot admit {key!r}: pinned by {pinned}")


class PinnedBytesOfEachKey(CACHE4):
    """The pinned bytes summed over a set of keys: each once, as the rule asks."""

    def _check_can_admit(self, key, size):
        CACHE4._check_can_admit(self, key, size)
        pinned = {k for k, n in self._pins.items() if n}
        if size > self.capacity - sum(self._entries[k][0] for k in pinned):
            raise PinnedCapacityExceeded(f"cannot admit {key!r}: pinned by {sorted(pinned)}")


def test_a_model_pinned_twice_holds_its_bytes_once() -> None:
    report = failing_report("weight-cache", PinnedBytesPerPin, 4)[0].text
    assert "✗ step 4 · a model pinned twice holds its bytes once" in report
    assert "however many pins it has" in report
    _pinned_twice_holds_once(PinnedBytesOfEachKey)


FORK3 = checkpoint("block-manager", 3)


class CopyTakesTheSourceCount(FORK3):
    """The copy takes the source's refcount after the release: right for two sharers only."""

    def append_slot(self, seq):
        table, n = self.tables[seq], self.lens[seq]
        offset, cow_src = n % self.block_size, None
        if offset == 0:
            table.append(self._alloc())
        elif self.ref[table[-1]] > 1:
            new = self._alloc()
            cow_src = table[-1]
            self._release(cow_src)
            self.ref[new] = self.ref[cow_src]
            table[-1] = new
        self.lens[seq] = n + 1
        return Slot(table[-1], offset, cow_src)


def test_a_block_three_share_is_copied_once() -> None:
    report = failing_report("block-manager", CopyTakesTheSourceCount, 3)[0].text
    assert "✗ step 3 · a block three share is copied once" in report
    assert "is (2, 2) after sequence 0 copied block 0, expected (2, 1)" in report
    _copy_of_a_block_three_share(FORK3)


class PreemptListsIds(SCHED3):
    """out.preempted holds each victim's id, not the Sequence."""

    def preempt(self, victim, out):
        SCHED3.preempt(self, victim, out)
        out.preempted.append(out.preempted.pop().seq_id)


PREFIX1 = checkpoint("prefix-cache", 1)


class LookupAnswersNone(PREFIX1):
    """_lookup answers None where it finds no cached block."""

    def _lookup(self, tokens):
        return PREFIX1._lookup(self, tokens) or None


def _probe_fails(probe, impl) -> ProbeFailed:  # type: ignore[no-untyped-def]
    with pytest.raises(ProbeFailed) as failed:
        probe(impl)
    return failed.value


def test_an_answer_of_another_type_is_told_plainly_by_the_order_probes() -> None:
    said = _probe_fails(partial(victims_in_preemption_order, SchedulerScript), PreemptListsIds)
    assert "out.preempted is [2, 1]; expected the preempted Sequence objects" in str(said)
    assert said.hint == "out.preempted lists the preempted Sequence objects, in the order preempted"
    said = _probe_fails(lookup_sees_registers, LookupAnswersNone)
    assert "bm._lookup([1, 2, 3, 4, 5]) returned None; expected a list of block ids" in str(said)
    assert "keep no answer between calls" not in str(said.hint)


class ZeroSizeTooLarge(CACHE4):
    """A size of 0 is refused as EntryTooLarge, a ValueError of another kind."""

    def _check_can_admit(self, key, size):
        if size == 0:
            raise EntryTooLarge(f"{key!r} has no bytes")
        return CACHE4._check_can_admit(self, key, size)


def test_a_bad_size_told_as_too_large_fails() -> None:
    said = _probe_fails(_bad_size_before_pinned, ZeroSizeTooLarge)
    assert "raised EntryTooLarge for a size of 0: a bad size is a plain ValueError" in str(said)
