"""A call that must raise and change nothing: when it raised but changed something, the
message names what changed, part by part; when the state cannot be read back, which read
failed and for which sequence (not a bare KeyError from the machine)."""

from __future__ import annotations

from typing import Any

import pytest

from servelab import checkpoint
from servelab.kv.blocks import OutOfBlocks
from servelab.testing.block_manager import snapshot
from servelab.testing.core import InvariantViolation
from servelab.testing.expected_error import describe_change, expect_error
from servelab.testing.prefix_cache import prefix_snapshot


class _Log:
    """What expect_error needs of a machine: the log of lines and a way to run one."""

    def __init__(self, bm: Any) -> None:
        self.bm, self.log = bm, ["bm = ..."]

    def do(self, code: str, fn: Any) -> Any:
        self.log.append(code)
        return fn()


def test_a_rollback_that_reorders_the_free_list_is_told_as_the_free_list_it_left() -> None:
    bm = checkpoint("block-manager", 4)(3, 1)
    bm.allocate(0, 3)
    bm.free_seq(0)

    def reorder() -> None:
        bm.free.rotate(1)
        raise OutOfBlocks("no room")

    with pytest.raises(InvariantViolation) as caught:
        expect_error(
            _Log(bm), "bm.allocate(1, 9)", reorder, "OutOfBlocks", "9 > 3", lambda: snapshot(bm)
        )
    assert caught.value.detail == (
        "`bm.allocate(1, 9)` raised OutOfBlocks as it should, but changed the state first (free "
        "list [2, 1, 0] -> [0, 2, 1]): a call that raises changes nothing"
    )


def test_a_half_recorded_sequence_is_named_not_raised() -> None:
    bm = checkpoint("block-manager", 4)(2, 1)

    def half() -> None:
        bm.tables[1] = []
        raise OutOfBlocks("no room")

    with pytest.raises(InvariantViolation) as caught:
        expect_error(
            _Log(bm), "bm.allocate(1, 9)", half, "OutOfBlocks", "9 > 2", lambda: snapshot(bm)
        )
    assert "sequences() lists 1 while seq_len(1) raises KeyError" in caught.value.detail
    assert "half recorded" in caught.value.detail


def test_a_prefix_cache_change_names_the_reclaim_order_and_the_blocks_cached() -> None:
    bm = checkpoint("prefix-cache", 3)(2, 1)
    bm.allocate(0, [1, 2])
    bm.free_seq(0)
    before = prefix_snapshot(bm)
    bm._alloc()  # reclaims block 1, the least recently freed, and forgets it
    said = describe_change(before, prefix_snapshot(bm))
    assert "reclaim order [1, 0] -> [0]" in said
    assert "cached blocks [0, 1] -> [0]" in said
    assert "block 1's refcount 0 -> 1" in said
    assert "blocks with a hash [0, 1] -> [0]" in said
