"""In a notebook the failing call is drawn by the topic's own renderer: the learner's structure
beside the reference's, exactly the differing blocks, keys, queued sequences and chunks marked;
a topic without a renderer, or a state that cannot be read, gets the table of fields."""

from __future__ import annotations

import base64
import dataclasses
import io
import re
from pathlib import Path
from typing import Any

import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from servelab.grading import GradeFailure, core, grade
from servelab.grading import structure_picture as sp
from servelab.grading.difference_picture import render_difference
from servelab.grading.localise import Divergence
from servelab.grading.mistakes import mistakes

ROOT = Path(__file__).resolve().parent.parent
_TAG = re.compile(r'<(?:g|rect) class="([a-z]+)(?: pinned)?( sl-differs)?"([^>]*)>')
_ATTR = re.compile(r'([\w-]+)="([^"]*)"')


def _entry(kind: str, attrs: dict[str, str]) -> str:
    if kind == "block":
        return f"block {attrs['data-block']}"
    if kind == "table":
        return f"seq {attrs['data-seq']}"
    if kind == "queued":
        return f"queued {attrs['data-seq']}"
    if kind == "chunk":
        return f"chunk {attrs['data-tier']}/{attrs['data-key']}"
    return f"key {attrs['data-key']}"  # a cache entry, a policy's candidate or pinned key


def _marked(side: str) -> set[str]:
    """Every drawn entry of one side that carries the mark."""
    return {
        _entry(kind, dict(_ATTR.findall(attrs)))
        for kind, differs, attrs in _TAG.findall(side)
        if differs and kind != "mark"
    }


def _svgs(cell: str) -> str:
    """The SVG documents of one side, drawn as ``<img>`` data URLs, as text."""
    images = re.findall(r'<img [^>]*src="data:image/svg\+xml;base64,([^"]+)"', cell)
    assert images, "each side is drawn"
    return "".join(base64.b64decode(i).decode("utf-8") for i in images)


def _split(html: str) -> tuple[str, str, str]:
    """(yours, the reference: their SVG text; the table under them)."""
    before, table = html.split('<table class="sl-diff">')
    yours, reference = before.split('data-side="reference"')
    assert 'data-side="yours"' in yours and "<svg" not in before, "drawings as images"
    return _svgs(yours.split('data-side="yours"')[1]), _svgs(reference), table


def _failing(topic: str, name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Divergence, str]:
    """The picture of a catalogue mistake's grade, its divergence, and the printed report."""
    seen: list[Divergence] = []
    real = core.picture

    def spy(topic_name: str, d: Divergence) -> str:
        seen.append(d)
        return real(topic_name, d)

    monkeypatch.setattr(core, "picture", spy)
    impl = next(m.impl for m in mistakes(topic) if m.name == name)
    printed = io.StringIO()
    with pytest.raises(GradeFailure) as failure:
        grade(topic, impl, out=printed)
    picture = failure.value.report.picture
    assert picture is not None and len(seen) == 1
    return picture, seen[0], printed.getvalue()


# What each renderer draws, found in both sides' SVG.
STRUCTURE = {
    "weight-cache": ['class="weight-cache"', 'class="entry'],
    "eviction-policy": ['class="eviction-order"'],
    "block-manager": ['<g class="block', '<g class="table'],
    "prefix-cache": ['<g class="block'],
    "scheduler": ['class="queues"', '<g class="block'],
    "token-budget": ['class="queues"', '<g class="block'],
    "kv-offload": ['class="tiers"', 'class="chunk'],
}

_BLOCKS = {"tables", "lengths", "refcounts", "free"}
# The fields each renderer can show in full; any other field is a row of the table.
DRAWABLE = {
    "weight-cache": {"resident", "pins"},
    "eviction-policy": {"eviction order", "pinned", "counts", "visited"},
    "block-manager": _BLOCKS,
    "prefix-cache": _BLOCKS,
    "scheduler": {"running", "waiting", *_BLOCKS},
    "token-budget": {"running", "waiting", *_BLOCKS},
    "kv-offload": {"keys", "cpu.keys", "disk.keys"},
}

# (topic, mistake, marked in yours, marked in the reference): read off the two after-states
# the report's words show, by hand.
CASES: list[tuple[str, str, set[str], set[str]]] = [
    # put('e', 10) into a full cache of 4: yours evicted 'a', the budget had room for it
    ("weight-cache", "count_based", set(), {"key a"}),
    # put('big', 70): yours evicted one entry and kept b, c, d over budget
    ("weight-cache", "evict_exactly_one", {"key b", "key c", "key d"}, set()),
    # _check_can_admit('c', 40) raised where it must not: the two caches are the same
    ("weight-cache", "admit_check_free_space_only", set(), set()),
    # unpin('a') of an unpinned key: yours drove its count to -1
    ("weight-cache", "negative_unpin", {"key a"}, {"key a"}),
    # pin('a'): yours left 'a' a candidate, the reference holds it pinned
    ("eviction-policy", "lfu_ignores_pins", {"key a"}, {"key a"}),
    # a hit on 'a' left its count at 1 (the reference counts 2)
    ("eviction-policy", "lfu_hit_no_count", {"key a"}, {"key a"}),
    # ties broken newest first: [c, a, b, d] against [a, c, d, b]
    ("eviction-policy", "lfu_newest_tie", {"key a", "key d"}, {"key a", "key d"}),
    # allocate(2, 0): yours gave sequence 2 block 3, the reference gives it none
    ("block-manager", "allocate_zero_takes_block", {"block 3", "seq 2"}, {"block 3", "seq 2"}),
    # a failed allocate(1, 12): yours kept sequence 1 with blocks 2 and 3
    (
        "block-manager",
        "allocate_not_atomic",
        {"block 2", "block 3", "seq 1"},
        {"block 2", "block 3"},
    ),
    # append_slot into a block with room: yours took block 1 early
    ("block-manager", "append_allocates_early", {"block 1", "seq 0"}, {"block 1", "seq 0"}),
    # _alloc reclaimed the newest cached block (0) where the oldest (1) goes first
    ("prefix-cache", "evicts_newest", {"block 0", "block 1"}, {"block 0", "block 1"}),
    ("prefix-cache", "evictable_hit_kept", {"block 0"}, {"block 0"}),
    # decode ordered the running queue by id: sequence 1 out of place, and blocks 2 and 3
    # handed to the other sequence of each pair
    (
        "scheduler",
        "decode_by_id",
        {"queued 1", "seq 0", "seq 1", "block 2", "block 3"},
        {"queued 1", "seq 0", "seq 1", "block 2", "block 3"},
    ),
    # retire kept the finished sequence 0 and its blocks 0 and 2
    ("scheduler", "never_free_finished", {"block 0", "block 2", "seq 0"}, {"block 0", "block 2"}),
    ("scheduler", "no_size_check", {"queued 1"}, set()),
    # admit ignored the cap on running sequences: 2 admitted, with block 2
    ("token-budget", "ignores_cap", {"block 2", "queued 2", "seq 2"}, {"block 2", "queued 2"}),
    ("token-budget", "requeue_back", {"queued 2"}, {"queued 2"}),
    # put('d') evicted 'a' before deciding the chunk cannot fit
    ("kv-offload", "evicts_before_deciding", set(), {"chunk cpu/a"}),
    # retrieve promoted 'a' and left 'c' on disk; the reference promotes 'c'
    ("kv-offload", "promotes_unpinned", {"chunk cpu/a", "chunk disk/c"}, {"chunk cpu/c"}),
]


@pytest.mark.parametrize(
    "topic, name, yours, reference", CASES, ids=[f"{t}/{n}" for t, n, _, _ in CASES]
)
def test_the_call_is_drawn_by_the_topics_renderer_with_exactly_the_differences_marked(
    topic: str, name: str, yours: set[str], reference: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    html, d, printed = _failing(topic, name, monkeypatch)
    assert f'data-drawn="{topic}"' in html, "drawn, not the fallback table"
    mine, theirs, table = _split(html)
    for side in (mine, theirs):
        for mark in STRUCTURE[topic]:
            assert mark in side, f"{mark} missing from one side"
    assert (_marked(mine), _marked(theirs)) == (yours, reference)
    if yours or reference:
        assert 'class="mark"' in mine + theirs, "a mark is visible without the page's CSS"
        assert "dashed red outline: differs from the other side" in html
    else:
        assert "the two drawings agree" in html and 'class="mark"' not in mine + theirs
    # every field is in the picture: drawn, or a row of the table under the drawings
    rows = set(re.findall(r"<tr><th>([^<]+)</th>", table))
    assert "outcome" in rows
    assert {*d.mine[1], *d.theirs[1]} - rows <= DRAWABLE[topic]
    assert "sl-differs" not in printed and "<svg" not in printed, "the words stay words"


def test_block_pictures_draw_every_block_on_both_sides(monkeypatch: pytest.MonkeyPatch) -> None:
    html, _, _ = _failing("block-manager", "allocate_zero_takes_block", monkeypatch)
    mine, theirs, table = _split(html)
    assert mine.count('<g class="block') == theirs.count('<g class="block') == 8
    assert "<th>num_free</th>" in table and "<th>tables</th>" not in table


ONE_PER_TOPIC = sorted({t: (t, n) for t, n, _, _ in CASES}.values())


@pytest.mark.parametrize("topic, name", ONE_PER_TOPIC, ids=[t for t, _ in ONE_PER_TOPIC])
def test_the_same_failure_draws_the_same_bytes(
    topic: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _, _ = _failing(topic, name, monkeypatch)
    again, _, _ = _failing(topic, name, monkeypatch)
    assert first == again
    assert "<script" not in first


def test_a_topic_without_a_renderer_gets_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    _, d, _ = _failing("weight-cache", "count_based", monkeypatch)
    assert "paged-kernel" not in sp.DRAWN_TOPICS
    assert sp.structure_picture("paged-kernel", d) is None
    assert sp.picture("paged-kernel", d) == render_difference(d.call, d.mine, d.theirs, d.method)


def test_a_policy_whose_order_cannot_be_read_gets_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every key pinned: a SIEVE's eviction_order() raises NoVictim, so there is no row to draw
    html, d, _ = _failing("eviction-policy", "sieve_len_counts_pinned", monkeypatch)
    assert "data-drawn" not in html
    assert html == render_difference(d.call, d.mine, d.theirs, d.method)


class _Unreadable:
    """A learner's object whose inspection methods raise."""

    capacity = used = 100

    def keys(self) -> Any:
        raise RuntimeError("half-built")

    def size_of(self, key: Any) -> int:
        raise RuntimeError("half-built")

    def pin_count(self, key: Any) -> int:
        raise RuntimeError("half-built")

    def eviction_order(self) -> Any:
        raise RuntimeError("half-built")


class _Endless(_Unreadable):
    def keys(self) -> Any:
        while True:
            pass


@pytest.mark.parametrize(
    "after",
    [None, (_Unreadable(), _Unreadable()), (_Endless(), _Endless())],
    ids=["not-copied", "raises", "never-returns"],
)
def test_a_state_that_cannot_be_read_gets_the_table(
    after: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, d, _ = _failing("weight-cache", "count_based", monkeypatch)
    monkeypatch.setattr(sp, "READ_TIMEOUT_S", 0.2)
    unread = dataclasses.replace(d, after=after)
    assert sp.structure_picture("weight-cache", unread) is None
    table = render_difference(d.call, d.mine, d.theirs, d.method)
    assert sp.picture("weight-cache", unread) == table


def test_renderers_mark_only_what_they_are_given() -> None:
    from servelab.viz.blocks import BlockSnapshot, render_blocks
    from servelab.viz.queues import render_queues

    snap = BlockSnapshot(2, 4, {0: [1]}, {0: 3}, [0, 1], [0])
    assert "sl-differs" not in render_blocks(snap)
    assert _marked(render_blocks(snap, marked={0}, marked_seqs={0})) == {"block 0", "seq 0"}
    assert _marked(render_queues([(0, 3)], [(1, 2)], marked={1})) == {"queued 1"}
    assert _marked(render_queues([], [])) == set()


GRADE_CELL = """
from servelab.grading import grade
from servelab.grading.mistakes import mistakes

BlockManager = next(m.impl for m in mistakes("block-manager")
                    if m.name == "allocate_zero_takes_block")
grade("block-manager", BlockManager, step=1)
"""


def test_a_grade_cell_in_a_jupyter_kernel_shows_the_drawn_picture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path a learner takes: a grade cell run by a real kernel prints the report, then
    shows the picture as an HTML output of its own, then raises."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src"))
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(tmp_path / "hypothesis"))
    notebook = new_notebook(cells=[new_code_cell(GRADE_CELL)])
    NotebookClient(
        notebook, timeout=120, allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = notebook.cells[0].outputs
    kinds = [o.output_type for o in outputs]
    assert kinds == ["stream", "display_data", "error"], kinds
    assert outputs[0].text.rstrip().endswith("FAILED")
    shown = outputs[1].data
    assert set(shown) == {"text/html"}, "HTML only: a terminal or nbval sees the words alone"
    html = shown["text/html"]
    assert 'data-drawn="block-manager"' in html and "data:image/svg+xml;base64," in html
    mine, theirs, _ = _split(html)
    assert (_marked(mine), _marked(theirs)) == ({"block 3", "seq 2"}, {"block 3", "seq 2"})
    assert outputs[2].ename == "GradeFailure"
