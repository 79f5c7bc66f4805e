"""Slips that once passed their step's grade, each a one-statement change of the notebook's own
method: the probe added for it must fail the slip with its rule in the report, and a class of
the same look that keeps the rule must not meet it."""

from __future__ import annotations

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.policy_probes_heap import lfu_unpinned_key_found

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
