"""Two prefix-cache slips only a rare program shows, graded end to end: a lookup that keeps its
answer for a prompt after a block of it is cached (step 1), and a decode with blocks of one
token that names the block it opens over the block before its parent (step 2). Each beside a
look-alike that keeps the rule and must pass."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.kv.prefix import PrefixCachingBlockManager

TOPIC = "prefix-cache"
Lookup = checkpoint(TOPIC, 1)
Sharing = checkpoint(TOPIC, 2)


class LookupRemembers(Lookup):
    """_lookup answers a prompt it has seen with the hits it found the first time."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        super().__init__(num_blocks, block_size)
        self.seen: dict[tuple[int, ...], list[int]] = {}

    def _lookup(self, tokens: list[int]) -> list[int]:
        if tuple(tokens) not in self.seen:
            self.seen[tuple(tokens)] = super()._lookup(tokens)
        return list(self.seen[tuple(tokens)])


class LookupRemembersUntilRegister(LookupRemembers):
    """The same memo, dropped whenever a block is cached: every answer reads map as it is."""

    def _register(self, block: int, h: Any, block_tokens: tuple[int, ...]) -> None:
        self.seen.clear()
        super()._register(block, h, block_tokens)


class ChainRemembers(Lookup):
    """_chain remembers each prompt's names: they depend on the tokens alone."""

    def _chain(self, tokens: list[int]) -> list[tuple[Any, tuple[int, ...]]]:
        memo = self.__dict__.setdefault("names", {})
        if tuple(tokens) not in memo:
            memo[tuple(tokens)] = super()._chain(tokens)
        return list(memo[tuple(tokens)])


class CountRemembers(PrefixCachingBlockManager):
    """num_cached_tokens answers a prompt it has seen as it did the first time."""

    def num_cached_tokens(self, token_ids: Any, *, extra_key: object = None) -> int:
        memo = self.__dict__.setdefault("counts", {})
        key = (tuple(token_ids), extra_key)
        if key not in memo:
            memo[key] = super().num_cached_tokens(token_ids, extra_key=extra_key)
        return int(memo[key])


class TableReadEarly(Sharing):
    """append_slot copies the table before reserving the slot, and reads the parent off it."""

    def append_slot(self, seq: int, token_id: int) -> Any:
        table = list(self.block_table(seq))
        slot = self._reserve_slot(seq)
        tokens = self.seq_tokens[seq]
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:
            block_tokens = tuple(tokens[-self.block_size :])
            parent = self.hash[table[-2]] if len(table) > 1 else 0
            h = self._chain(tokens)[-1][0] if parent is None else hash((parent, block_tokens))
            self._register(slot.block, h, block_tokens)
        return slot


class TableReadAfter(Sharing):
    """The same, with the table copied once the slot is reserved: the parent is right."""

    def append_slot(self, seq: int, token_id: int) -> Any:
        self._table(seq)
        slot = self._reserve_slot(seq)
        table = list(self.block_table(seq))
        tokens = self.seq_tokens[seq]
        tokens.append(token_id)
        if slot.offset == self.block_size - 1:
            block_tokens = tuple(tokens[-self.block_size :])
            parent = self.hash[table[-2]] if len(table) > 1 else 0
            h = self._chain(tokens)[-1][0] if parent is None else hash((parent, block_tokens))
            self._register(slot.block, h, block_tokens)
        return slot


def _report(impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failed:
        grade(TOPIC, impl, step, quiet=True)
    return str(failed.value)


# slip, step, what the report must say, what it must not say
CASES = {
    "a lookup keeps its answer": (
        LookupRemembers,
        1,
        [
            "a lookup finds what was cached since the last one",
            "bm._lookup([1, 2, 3, 4, 5]) returned []; expected [0]",
            "as it did for the same prompt before block 0 was cached; a fresh object given the "
            "same `_register` calls and no earlier lookup answers [0]",
            "yours answered [] from `seen`, kept under (1, 2, 3, 4, 5) since an earlier call: "
            "with that entry taken out, on a copy, yours answers [0]",
        ],
        ["cap is one block short", "one block short"],
    ),
    "a count keeps its answer": (
        CountRemembers,
        1,
        ["bm.num_cached_tokens([1, 2, 3]) returned 0, expected 2"],
        ["cap is one block short"],
    ),
    "a one-token block over the block before its parent": (
        TableReadEarly,
        2,
        [
            "a one-token block is named over its parent",
            "bm.allocate(1, [1, 2, 3, 4, 5]) returned 3, expected 4",
            "over block 1's hash, but its parent is block 2",
        ],
        [],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_report_names_the_slip(case: str) -> None:
    impl, step, says, never = CASES[case]
    text = _report(impl, step)
    for part in says:
        assert part in text, text
    for part in never:
        assert part not in text, text


@pytest.mark.parametrize(
    ("impl", "step"),
    [(LookupRemembersUntilRegister, 1), (ChainRemembers, 1), (TableReadAfter, 2)],
)
def test_a_look_alike_that_keeps_the_rule_passes(impl: Any, step: int) -> None:
    grade(TOPIC, impl, step, quiet=True)
