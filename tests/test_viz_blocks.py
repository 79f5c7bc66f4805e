"""The block-grid renderer draws what the manager holds, and the stepper replays operations."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from servelab.kv.blocks import BlockManager
from servelab.kv.prefix import PrefixCachingBlockManager
from servelab.viz.blocks import (
    BlockSnapshot,
    BlockStepper,
    SnapshotError,
    parse_operation,
    render_blocks,
    snapshot,
)

NS = {"s": "http://www.w3.org/2000/svg"}


def _blocks(svg: str) -> dict[int, dict[str, str]]:
    root = ET.fromstring(svg)
    return {
        int(g.get("data-block", -1)): dict(g.attrib)
        for g in root.iter("{http://www.w3.org/2000/svg}g")
        if g.get("class") == "block"
    }


def test_grid_shows_refcounts_holders_and_free_blocks() -> None:
    bm = BlockManager(6, 4)
    bm.allocate(0, 6)
    bm.fork(0, 1)
    cells = _blocks(render_blocks(bm))
    assert len(cells) == 6
    for b in bm.block_table(0):
        assert cells[b]["data-kind"] == "shared" and cells[b]["data-refcount"] == "2"
        assert cells[b]["data-holders"] == "0 1"
    for b in bm.free_list():
        assert cells[b]["data-kind"] == "free"


def test_tables_are_drawn_as_rows() -> None:
    bm = BlockManager(6, 4)
    bm.allocate(3, 9)
    root = ET.fromstring(render_blocks(bm))
    rows = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "table"]
    assert [(g.get("data-seq"), g.get("data-len")) for g in rows] == [("3", "9")]
    texts = [t.text for t in rows[0].iter("{http://www.w3.org/2000/svg}text")]
    assert [int(t) for t in texts[1:]] == bm.block_table(3)


def test_copy_on_write_is_marked() -> None:
    bm = BlockManager(6, 4)
    bm.allocate(0, 6)
    bm.fork(0, 1)
    slot = bm.append_slot(0)
    root = ET.fromstring(render_blocks(snapshot(bm, slot=slot)))
    (arrow,) = [
        p for p in root.iter("{http://www.w3.org/2000/svg}path") if p.get("class") == "cow-copy"
    ]
    assert (arrow.get("data-src"), arrow.get("data-dst")) == (str(slot.cow_src), str(slot.block))
    (written,) = [
        r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.get("class") == "written-slot"
    ]
    assert written.get("data-offset") == "2"


def test_evictable_blocks_of_a_prefix_cache() -> None:
    bm = PrefixCachingBlockManager(4, 2)
    bm.allocate(0, [1, 2, 3])
    bm.free_seq(0)
    cells = _blocks(render_blocks(bm))
    assert [b for b, c in cells.items() if c["data-kind"] == "evictable"] == bm.evictable()


def test_inconsistent_snapshot_is_rejected() -> None:
    with pytest.raises(SnapshotError):
        render_blocks(BlockSnapshot(2, 4, {0: [5]}, {0: 3}, [0, 0], []))


def test_stepper_replays_the_seed_example() -> None:
    stepper = BlockStepper(
        lambda: BlockManager(8, 4),
        ["allocate(0, 6)", "fork(0, 1)", "append_slot(0)", "append_slot(1)"],
    )
    lines = stepper.run()
    assert "copy block 1 first" in lines[2]
    assert lines[3].endswith("block 1, offset 2")
    assert stepper.done and len(stepper.frames) == 5
    stepper.reset()
    assert stepper.position == 0 and stepper.bm.sequences() == []


def test_stepper_logs_errors_instead_of_raising() -> None:
    stepper = BlockStepper(lambda: BlockManager(1, 4), [("allocate", 0, 9)])
    assert "OutOfBlocks" in stepper.step()


def test_stepper_widget_redraws_and_goes_back() -> None:
    pytest.importorskip("ipywidgets")
    stepper = BlockStepper(lambda: BlockManager(4, 2), ["allocate(0, 3)", "append_slot(0)"])
    view = stepper.widget()
    controls, picture, log = view.children
    _play, back, forward, _reset, slider = controls.children
    start = picture.value
    forward.click()
    assert picture.value != start and "allocate" in log.value and slider.value == 1
    forward.click()
    assert stepper.position == 2 and "append_slot" in log.value
    back.click()
    assert stepper.position == 1 and slider.value == 1 and "append_slot" not in log.value
    slider.value = 0
    assert picture.value == start and stepper.position == 0
    stepper.seek(2)
    assert slider.value == 2


def test_stepper_back_replays_to_the_same_state() -> None:
    ops = ["allocate(0, 6)", "fork(0, 1)", "append_slot(0)", "append_slot(1)"]
    stepper = BlockStepper(lambda: BlockManager(6, 4), ops)
    stepper.run()
    last = stepper.svg()
    stepper.back()
    assert stepper.position == 3 and len(stepper.frames) == 4
    stepper.step()
    assert stepper.svg() == last


@pytest.mark.parametrize("bad", ["grow(1)", "fork(0)", "allocate(a, 1)", ()])
def test_bad_operations_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_operation(bad)  # type: ignore[arg-type]
