"""Readings that name a slip at a list's front or end only where a re-call proves it: the LFU
heap taken from the list's front, the chain short of a prompt's last whole block, the _alloc
that never reclaims, and the SIEVE unpin found by the queue a check reads. Each is kept on a
real slip graded end to end and held back on a look-alike whose first differing call is alike."""

from __future__ import annotations

import heapq
from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks
from servelab.weights.policies import NoVictim
from unlisted.policies_front import REMOVALS, LFUPopsListFront, SIEVEUnpinRequeues
from unlisted.prefix_ends import AllocPlainFreeOnly, ChainStopBeforeLastBlock

FRONT = "the first live entry in the heap list's order"
EARLY = "stops one block early exactly when the last full block ends the prompt"
REFUSED = "yours raised OutOfBlocks with no plain free block left"


class _PopsStaleToo(checkpoint("eviction-policy", 2)):  # type: ignore[misc]
    """heappop in heap order, but an entry of a resident key is taken as live, stale or not."""

    def pop_victim(self) -> Any:
        while self.heap:
            _, _, key = heapq.heappop(self.heap)
            if key in self.count and key not in self.pinned:
                self.update_on_remove(key)
                return key
        raise NoVictim("every resident key is pinned")


class _ChainDropsLast(checkpoint("prefix-cache", 1)):  # type: ignore[misc]
    """Takes the last block for a partial one, whatever the length: one block short always."""

    def _chain(self, tokens: list[int]) -> list[tuple[int, tuple[int, ...]]]:
        chain, parent = [], 0
        for i in range(len(tokens) // self.block_size - 1):
            block_tokens = tuple(tokens[i * self.block_size : (i + 1) * self.block_size])
            parent = hash((parent, block_tokens))
            chain.append((parent, block_tokens))
        return chain


class _ReclaimsNewest(checkpoint("prefix-cache", 3)):  # type: ignore[misc]
    """Reclaims the most recently freed cached block, not the least."""

    def _alloc(self) -> int:
        if self.free:
            block = self.free.popleft()
        elif self.evictable_lru:
            block, _ = self.evictable_lru.popitem()
            self._forget(block)
        else:
            raise OutOfBlocks("no free block")
        self.ref[block] = 1
        return block


def test_a_heap_taken_from_its_front_is_said_where_a_fresh_policy_does_it_again() -> None:
    report, _ = failing_report("eviction-policy", LFUPopsListFront, 2)
    assert "start at your `pop_victim`" in report.hint, report.hint
    assert FRONT in report.hint and "evicts 'b', then 'a' (count 3)" in report.hint, report.hint
    report, _ = failing_report("eviction-policy", _PopsStaleToo, 2)
    assert "start at your `pop_victim`" in report.hint, report.hint
    assert FRONT not in report.hint, report.hint


def test_a_chain_short_of_its_last_whole_block_is_said_only_where_longer_ones_are_whole() -> None:
    report, _ = failing_report("prefix-cache", ChainStopBeforeLastBlock, 1)
    assert "start at your `_chain`" in report.hint and EARLY in report.hint, report.hint
    report, _ = failing_report("prefix-cache", _ChainDropsLast, 1)
    assert "start at your `_chain`" in report.hint, report.hint
    assert EARLY not in report.hint, report.hint


def test_an_alloc_that_raised_with_an_evictable_block_is_told_so_a_wrong_reclaim_not() -> None:
    report, _ = failing_report("prefix-cache", AllocPlainFreeOnly, 3)
    assert "start at your `_alloc`" in report.hint and REFUSED in report.hint, report.hint
    report, _ = failing_report("prefix-cache", _ReclaimsNewest, 3)
    assert REFUSED not in report.hint, report.hint


def test_an_unpin_that_moves_its_key_is_placed_by_the_queue_the_check_reads() -> None:
    impl = {**REMOVALS, "SIEVE": SIEVEUnpinRequeues}
    report, program = failing_report("eviction-policy", impl, 3)
    assert program.splitlines()[-1] == "list(p.queue)", program
    assert "the difference is in your `SIEVE.update_on_unpin`" in report.text, report.text
    assert "no one method" not in report.text, report.text
