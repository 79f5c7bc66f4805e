"""A prefix-cache check's own message says only what is true of the learner's run: the
reference's arithmetic is labelled as the reference's, what is measured is the learner's, and
a check's rule is shown only where what the learner's code did breaks it. Graded end to end."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.mistakes.prefix_cache.evicts_before_free import Buggy as EvictsBeforeFree

TOPIC = "prefix-cache"
Sharing = checkpoint(TOPIC, 2)
Evicting = checkpoint(TOPIC, 3)


class ReleasePlainLost(Evicting):
    """_release puts a freed cached block on the evictable list, and a plain one nowhere."""

    def _release(self, block: int) -> None:
        self.ref[block] -= 1
        if self.ref[block] == 0 and self.hash[block] is not None:
            self.evictable_lru[block] = None


class ReleaseToBothLists(Evicting):
    """_release puts every freed block on the free list, a cached one on the evictable too."""

    def _release(self, block: int) -> None:
        self.ref[block] -= 1
        if self.ref[block] == 0:
            if self.hash[block] is not None:
                self.evictable_lru[block] = None
            self.free.append(block)


class AllocateCountsHitsTwice(Sharing):
    """allocate claims each hit, then raises every hit's refcount once more."""

    def allocate(self, seq: int, token_ids: list[int]) -> int:
        got = int(super().allocate(seq, token_ids))
        for block in self.tables[seq][: got // self.block_size]:
            self.ref[block] += 1
        return got


class NamesBeforeAppend(Sharing):
    """append_slot names a filled block from the tokens before it appends the new one."""

    def append_slot(self, seq: int, token_id: int) -> Any:
        self._table(seq)
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        if slot.offset == self.block_size - 1:
            table = self.tables[seq]
            block_tokens = tuple(tokens[-self.block_size :])
            parent = self.hash[table[-2]] if len(table) > 1 else 0
            self._register(slot.block, hash((parent, block_tokens)), block_tokens)
        tokens.append(token_id)
        return slot


def _report(impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, impl, step, quiet=True)
    return str(failed.value)


FREED_TWICE = "a block appears twice, so it was freed twice"

# slip, step, what the report must say, what it must no longer say
CASES = {
    "a plain block never returned": (
        ReleasePlainLost,
        3,
        ["free_list() is [2, 3, 0]: block 1 is missing", "your `_release`"],
        [FREED_TWICE],
    ),
    "a cached block on both lists": (
        ReleaseToBothLists,
        3,
        ["free_list() is [2, 3, 1, 0, 0]: block 0 is listed twice", "on the free list"],
        [FREED_TWICE, "is missing"],
    ),
    "hits counted twice": (
        AllocateCountsHitsTwice,
        2,
        ["the shared blocks' refcounts are [3, 3], expected [2, 2]: two tables hold each"],
        ["shared blocks need refcount 2"],
    ),
    "a decoded block named from the wrong tokens": (
        NamesBeforeAppend,
        2,
        [
            "returned 4, expected 6: in the reference block [5, 6], filled by append_slot(0, 6),"
            " is cached"
        ],
        ["should be cached: got"],
    ),
    "cached blocks reclaimed first": (
        EvictsBeforeFree,
        3,
        ["num_cached_tokens([1, 2, 3]) is 0, expected 2: in the reference free_seq(0) leaves"],
        ["two plain free blocks were left"],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_checks_message_and_hint_say_only_what_the_run_shows(case: str) -> None:
    impl, step, says, never = CASES[case]
    text = _report(impl, step)
    for part in says:
        assert part in text, text
    for part in never:
        assert part not in text, text
