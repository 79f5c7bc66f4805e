"""The timeline renderer: what it draws is what the run recorded."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from servelab.kv.blocks import BlockManager
from servelab.kv.scheduler import Scheduler
from servelab.kv.sim import Frame, random_workload, simulate
from servelab.viz.timeline import (
    TimelineReplay,
    forcing_sequences,
    render_timeline,
    states_by_sequence,
)

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def frames() -> list[Frame]:
    workload = random_workload(
        10, seed=2, prompt_len=(2, 12), max_new_tokens=(2, 16), arrive_within=6
    )
    result = simulate(Scheduler(BlockManager(16, 2), watermark=0), workload, record=True)
    assert result.preemptions > 0  # the picture must have something red to draw
    return result.frames


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def rects(root: ET.Element, cls: str) -> list[ET.Element]:
    return [r for r in root.iter(f"{SVG}rect") if r.get("class") == cls]


def covered_steps(root: ET.Element, cls: str) -> Counter[int]:
    """How many steps each sequence spends in state ``cls``, read back from the picture."""
    steps: Counter[int] = Counter()
    for r in rects(root, cls):
        steps[int(r.get("data-seq", -1))] += int(r.get("data-to", 0)) - int(r.get("data-from", 0))
    return steps


def test_every_state_of_every_step_is_drawn(frames: list[Frame]) -> None:
    root = parse(render_timeline(frames))
    for cls, field in (("prefill", "prefilled"), ("decode", "decoded"), ("preempted", "preempted")):
        want: Counter[int] = Counter()
        for f in frames:
            for sid in getattr(f, field):
                if cls == "preempted" or sid not in f.preempted:
                    want[sid] += 1
        assert covered_steps(root, cls) == want, cls


def test_runs_of_one_state_are_merged(frames: list[Frame]) -> None:
    root = parse(render_timeline(frames))
    runs = states_by_sequence(frames)
    drawn = sum(len(rects(root, cls)) for cls in ("waiting", "prefill", "decode", "preempted"))
    assert drawn == sum(len(spans) for spans in runs.values())
    assert drawn < sum(len(f.running) + len(f.waiting) for f in frames)


def test_the_gauge_plots_free_blocks_and_marks_preemptions(frames: list[Frame]) -> None:
    root = parse(render_timeline(frames))
    (line,) = [p for p in root.iter(f"{SVG}polyline") if p.get("class") == "free-blocks"]
    ys = [float(pt.split(",")[1]) for pt in (line.get("points") or "").split()]
    assert len(ys) == len(frames)
    # more free blocks are drawn higher (smaller y)
    order = sorted(range(len(frames)), key=lambda i: frames[i].free_blocks)
    assert [ys[i] for i in order] == sorted(ys, reverse=True)
    marks = [x for x in root.iter(f"{SVG}line") if x.get("class") == "preemption"]
    assert len(marks) == sum(1 for f in frames if f.preempted)


def test_a_replay_position_hides_later_steps(frames: list[Frame]) -> None:
    upto = len(frames) // 2
    root = parse(render_timeline(frames, upto=upto))
    for cls in ("waiting", "prefill", "decode", "preempted"):
        assert all(int(r.get("data-to", 0)) <= upto for r in rects(root, cls))
    (line,) = [p for p in root.iter(f"{SVG}polyline") if p.get("class") == "free-blocks"]
    assert len((line.get("points") or "").split()) == upto
    caption = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "caption")
    last = frames[upto - 1]
    assert (caption.text or "").startswith(f"step {upto} of {len(frames)}:")  # as the slider says
    assert f"{last.free_blocks}/{last.num_blocks} blocks free" in (caption.text or "")
    assert f"{last.free_blocks}/{last.num_blocks} blocks free" in (caption.text or "")


def test_nothing_shown_yet_is_still_a_picture(frames: list[Frame]) -> None:
    root = parse(render_timeline(frames, upto=0))
    assert not rects(root, "decode")
    assert parse(render_timeline([])).tag == f"{SVG}svg"


@pytest.mark.parametrize("upto", [-1, 10**6, 1.5, True])
def test_bad_positions_raise(frames: list[Frame], upto: object) -> None:
    with pytest.raises(ValueError):
        render_timeline(frames, upto=upto)  # type: ignore[arg-type]


def test_frames_must_be_frames() -> None:
    with pytest.raises(TypeError):
        render_timeline([{"step": 0}])  # type: ignore[list-item]


def test_replay_seeks_and_draws_the_prefix(frames: list[Frame]) -> None:
    replay = TimelineReplay(frames, title="t")
    replay.seek(3)
    assert replay.svg() == render_timeline(frames, upto=3, title="t")
    with pytest.raises(ValueError):
        replay.seek(len(frames) + 1)
    fresh = TimelineReplay(frames)
    assert fresh.position == 0  # a replay opens at its start
    box = replay.widget()
    _play, back, forward, slider = box.children[0].children
    slider.value = 5
    assert replay.position == 5 and box.children[1].value == replay.svg()
    forward.click()
    assert slider.value == 6 and "step 6 of" in box.children[1].value
    back.click()
    back.click()
    assert replay.position == 4


def test_a_preemption_names_who_needed_the_block(frames: list[Frame]) -> None:
    index = next(i for i, f in enumerate(frames) if f.preempted)
    cause = forcing_sequences(frames, index)
    assert cause, "a preemption in the reference scheduler is forced by a decode"
    for sid in cause:
        assert sid in frames[index].decoded and sid not in frames[index].preempted
        assert dict(frames[index].held)[sid] > dict(frames[index - 1].held).get(sid, 0)
    root = parse(render_timeline(frames, upto=index + 1))
    marks = [x for x in root.iter(f"{SVG}line") if x.get("class") == "preemption"]
    assert marks[-1].get("data-forced-by") == " ".join(map(str, cause))
    caption = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "caption")
    assert f"for {', '.join(map(str, cause))} (needed a new block)" in (caption.text or "")


def test_rows_show_the_blocks_each_sequence_holds(frames: list[Frame]) -> None:
    upto = len(frames) // 2
    root = parse(render_timeline(frames, upto=upto))
    held = dict(frames[upto - 1].held)
    assert held, "the frames record block counts"
    labels = {
        int(t.get("data-seq", -1)): t.get("data-held")
        for t in root.iter(f"{SVG}text")
        if t.get("class") == "row-label"
    }
    for sid, blocks in held.items():
        assert labels[sid] == str(blocks)
    # the waiting queue, in re-admission order, is in the caption
    waiting = frames[upto - 1].waiting
    caption = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "caption")
    if waiting:
        assert "next to admit: " + ", ".join(map(str, waiting[:8])) in (caption.text or "")


def test_a_token_budget_run_splits_each_bar_into_decode_and_prefill_tokens() -> None:
    from servelab.kv.budget import TokenBudgetScheduler
    from servelab.kv.latency import TimedArrival, simulate_latency

    work = [TimedArrival(0.0, 30, 6), TimedArrival(0.0, 4, 12), TimedArrival(40.0, 25, 3)]
    sched = TokenBudgetScheduler(BlockManager(40, 4), max_num_batched_tokens=8)
    res = simulate_latency(sched, work, record=True)
    frames = res.frames
    assert sum(f.decode_tokens + f.prefill_tokens for f in frames) == res.tokens_computed
    assert all(f.decode_tokens + f.prefill_tokens <= 8 for f in frames)
    assert any(f.decode_tokens and f.prefill_tokens for f in frames)  # chunks beside decodes
    root = parse(render_timeline(frames))
    (line,) = [e for e in root.iter(f"{SVG}line") if e.get("class") == "budget"]
    assert line.get("data-budget") == "8"
    for cls, field in (("decode-tokens", "decode_tokens"), ("prefill-tokens", "prefill_tokens")):
        drawn = {
            int(r.get("data-step", -1)): int(r.get("data-tokens", 0)) for r in rects(root, cls)
        }
        want = {i: getattr(f, field) for i, f in enumerate(frames) if getattr(f, field)}
        assert drawn == want, cls


def test_a_run_without_a_budget_has_no_token_panel(frames: list[Frame]) -> None:
    root = parse(render_timeline(frames))
    assert not rects(root, "decode-tokens") and not rects(root, "prefill-tokens")
    assert not [e for e in root.iter(f"{SVG}line") if e.get("class") == "budget"]
