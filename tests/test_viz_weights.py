"""The weight-cache drawing: read the SVG back and check what a learner would see."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelab.units import GB
from servelab.viz.weights import (
    CacheReplay,
    SnapshotError,
    apply_operation,
    render_cache,
    snapshot,
)
from servelab.weights import WeightCache

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def rects(root: ET.Element, cls: str) -> list[ET.Element]:
    return [r for r in root.iter(f"{SVG}rect") if cls in r.get("class", "").split()]


def visible(text: ET.Element) -> str:
    """The text a viewer sees: without the tooltip in a nested <title>."""
    return (text.text or "") + "".join(child.tail or "" for child in text)


def texts(root: ET.Element, cls: str) -> list[str]:
    return [visible(t) for t in root.iter(f"{SVG}text") if t.get("class") == cls]


def width(element: ET.Element) -> float:
    return float(element.get("width", "nan"))


def seed_cache() -> WeightCache[str]:
    """The seed's 300 GB example: llama and mixtral, touch llama, qwen evicts mixtral."""
    cache: WeightCache[str] = WeightCache(300 * GB)
    cache.put("llama-70b", "w", 140 * GB)
    cache.put("mixtral", "w", 90 * GB)
    cache.get("llama-70b")
    cache.put("qwen-72b", "w", 145 * GB)
    return cache


KNOWN = {
    "capacity": 300 * GB,
    "used": 285 * GB,
    "entries": [
        {"key": "llama-70b", "size": 140 * GB, "pins": 2},
        {"key": "qwen-72b", "size": 100 * GB, "pins": 0},
        {"key": "phi-3", "size": 45 * GB, "pins": 0},
    ],
    "eviction_order": ["qwen-72b", "phi-3"],
}


def test_entries_are_drawn_in_recency_order_and_to_scale() -> None:
    root = parse(render_cache(KNOWN, width=640))
    entries = rects(root, "entry")
    assert [r.get("data-key") for r in entries] == ["llama-70b", "qwen-72b", "phi-3"]
    budget = rects(root, "budget")[0]
    per_byte = width(budget) / (300 * GB)
    for rect, size in zip(entries, (140, 100, 45), strict=True):
        assert width(rect) == pytest.approx(size * GB * per_byte, abs=0.02)
    xs = [float(r.get("x", "nan")) for r in entries]
    assert xs == sorted(xs)
    (free,) = rects(root, "free")
    assert width(free) == pytest.approx(15 * GB * per_byte, abs=0.02)
    assert float(free.get("x", "nan")) == pytest.approx(xs[-1] + width(entries[-1]), abs=0.02)


def test_pinned_entries_are_marked_with_their_count() -> None:
    root = parse(render_cache(KNOWN))
    pinned = rects(root, "pinned")
    assert [r.get("data-key") for r in pinned] == ["llama-70b"]
    assert pinned[0].get("data-pins") == "2"
    assert pinned[0].get("fill") != rects(root, "entry")[1].get("fill")
    assert texts(root, "pin-label") == ["pinned \u00d72"]


def test_next_victims_are_numbered_in_eviction_order() -> None:
    root = parse(render_cache(KNOWN))
    victims = [g for g in root.iter(f"{SVG}g") if g.get("class") == "victim"]
    assert [(g.get("data-key"), g.get("data-rank")) for g in victims] == [
        ("qwen-72b", "1"),
        ("phi-3", "2"),
    ]
    assert texts(root, "rank") == ["1", "2"]
    # the number sits above its own entry
    entry = {r.get("data-key"): r for r in rects(root, "entry")}["phi-3"]
    circle = victims[1].find(f"{SVG}circle")
    assert circle is not None
    left = float(entry.get("x", "nan"))
    assert left <= float(circle.get("cx", "nan")) <= left + width(entry)


def test_eviction_order_is_taken_from_the_cache_not_from_position() -> None:
    state = dict(KNOWN, eviction_order=["phi-3", "qwen-72b"])
    root = parse(render_cache(state))
    ranks = {g.get("data-key"): g.get("data-rank") for g in root.iter(f"{SVG}g")}
    assert ranks == {"phi-3": "1", "qwen-72b": "2"}


def test_summary_says_used_and_free() -> None:
    root = parse(render_cache(KNOWN))
    (summary,) = texts(root, "summary")
    assert "used 285 GB of 300 GB" in summary
    assert "free 15 GB" in summary
    assert "3 entries" in summary and "1 pinned" in summary
    assert texts(root, "budget-label") == ["budget 300 GB"]
    assert "llama-70b" in texts(root, "entry-label")
    assert "140 GB" in texts(root, "entry-label")
    assert texts(root, "warning") == []


def test_reads_a_real_cache_through_the_inspection_api() -> None:
    cache = seed_cache()
    cache.pin("llama-70b")
    state = snapshot(cache)
    assert state == {
        "capacity": 300 * GB,
        "used": 285 * GB,
        "entries": [
            {"key": "llama-70b", "size": 140 * GB, "pins": 1},
            {"key": "qwen-72b", "size": 145 * GB, "pins": 0},
        ],
        "eviction_order": ["qwen-72b"],
    }
    assert render_cache(cache) == render_cache(state)


def test_drawing_does_not_touch_recency_or_stats() -> None:
    cache = seed_cache()
    keys, stats = cache.keys(), cache.stats
    render_cache(cache)
    assert cache.keys() == keys
    assert cache.stats == stats


def test_a_broken_cache_is_drawn_with_warnings() -> None:
    broken = {
        "capacity": 100 * GB,
        "used": 90 * GB,
        "entries": [{"key": "a", "size": 80 * GB, "pins": 1}, {"key": "b", "size": 60 * GB}],
        "eviction_order": ["a", "b", "ghost"],
    }
    root = parse(render_cache(broken))
    warnings = " | ".join(texts(root, "warning"))
    assert "entries add up to 140 GB" in warnings
    assert "over budget" in warnings
    assert "'a' is pinned but listed as a victim" in warnings
    assert "'ghost'" in warnings
    # the bar is scaled to what is held, so the budget outline ends before the entries do
    entries = rects(root, "entry")
    right = float(entries[-1].get("x", "nan")) + width(entries[-1])
    assert width(rects(root, "budget")[0]) < right - float(entries[0].get("x", "nan"))
    assert rects(root, "free") == []


def test_an_unpinned_key_missing_from_the_eviction_order_is_flagged() -> None:
    state = dict(KNOWN, eviction_order=["qwen-72b"])
    warnings = texts(parse(render_cache(state)), "warning")
    assert any("never a victim" in w and "phi-3" in w for w in warnings)


def test_keys_that_need_escaping_round_trip() -> None:
    state = {"capacity": 10, "entries": [{"key": "<a & b>", "size": 9}]}
    root = parse(render_cache(state, title="t<1>"))
    assert rects(root, "entry")[0].get("data-key") == "<a & b>"
    assert texts(root, "title") == ["t<1>"]


def test_long_notes_are_clipped_to_the_picture_with_the_full_text_as_tooltip() -> None:
    caption = "put('big', 200 GB) \u2192 PinnedCapacityExceeded: " + "pinned " * 40
    root = parse(render_cache(KNOWN, width=400, caption=caption))
    (note,) = [t for t in root.iter(f"{SVG}text") if t.get("class") == "caption"]
    title = note.find(f"{SVG}title")
    assert title is not None and title.text == caption
    shown = visible(note)
    assert shown.endswith("\u2026")
    assert len(shown) * 6.6 <= 400
    assert caption.startswith(shown[:-1])


def test_missing_used_and_order_are_derived_from_entries() -> None:
    state = {
        "capacity": 10,
        "entries": [{"key": "x", "size": 3, "pins": 1}, {"key": "y", "size": 4}],
    }
    root = parse(render_cache(state))
    assert "used 7 B of 10 B" in texts(root, "summary")[0]
    assert [g.get("data-key") for g in root.iter(f"{SVG}g")] == ["y"]


@pytest.mark.parametrize(
    ("state", "fragment"),
    [
        ({"entries": []}, "needs 'capacity'"),
        ({"capacity": 0, "entries": []}, "positive"),
        ({"capacity": 1.5, "entries": []}, "int number of bytes"),
        ({"capacity": True, "entries": []}, "int number of bytes"),
        ({"capacity": 10, "entries": [{"key": "a"}]}, "'key' and 'size'"),
        ({"capacity": 10, "entries": [{"key": "a", "size": -1}]}, ">= 0"),
        ({"capacity": 10, "entries": [{"key": "a", "size": 1}] * 2}, "repeated"),
        ({"capacity": 10, "entries": [{"key": "a", "size": 1, "pins": "2"}]}, "pins"),
        ({"capacity": 10, "entries": [], "eviction_order": "ab"}, "list of keys"),
    ],
)
def test_malformed_states_raise_snapshot_error(state: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SnapshotError, match=fragment):
        render_cache(state)


def test_an_object_without_the_inspection_api_is_named() -> None:
    class Half:
        capacity = 10
        used = 0

    with pytest.raises(SnapshotError, match="keys, size_of, pin_count, eviction_order"):
        render_cache(Half())  # type: ignore[arg-type]


def test_width_is_validated() -> None:
    with pytest.raises(ValueError, match="width"):
        render_cache(KNOWN, width=50)


@given(
    sizes=st.lists(st.integers(1, 50), min_size=0, max_size=8),
    pins=st.lists(st.integers(0, 2), min_size=8, max_size=8),
    slack=st.integers(0, 40),
)
def test_any_consistent_state_fills_the_bar_exactly(
    sizes: list[int], pins: list[int], slack: int
) -> None:
    capacity = sum(sizes) + slack + 1
    entries = [
        {"key": f"m{i}", "size": s, "pins": p}
        for i, (s, p) in enumerate(zip(sizes, pins[: len(sizes)], strict=True))
    ]
    root = parse(render_cache({"capacity": capacity, "entries": entries}))
    drawn = rects(root, "entry") + rects(root, "free")
    total_width = sum(width(r) for r in drawn)
    assert total_width == pytest.approx(width(rects(root, "budget")[0]), abs=0.05)
    assert len(rects(root, "pinned")) == sum(1 for e in entries if e["pins"])
    ranks = [g.get("data-rank") for g in root.iter(f"{SVG}g")]
    assert ranks == [str(n) for n in range(1, 1 + sum(1 for e in entries if not e["pins"]))]
    assert texts(root, "warning") == []


# --- stepping through operations -----------------------------------------------------------

SEED_OPERATIONS = [
    ("put", "llama-70b", 140 * GB),
    ("put", "mixtral", 90 * GB),
    ("get", "llama-70b"),
    ("put", "qwen-72b", 145 * GB),
    ("pin", "llama-70b"),
    ("put", "falcon-180b", 200 * GB),
    ("put", "giant", 400 * GB),
]


def test_replay_steps_through_the_seed_example() -> None:
    replay = CacheReplay(lambda: WeightCache(300 * GB), SEED_OPERATIONS)
    outcomes = [replay.step() for _ in SEED_OPERATIONS]
    assert replay.step() is None
    lines = [o.text for o in outcomes if o is not None]
    assert lines[2] == "get('llama-70b') \u2192 hit"
    assert lines[3] == "put('qwen-72b', 145 GB) \u2192 evicted mixtral"
    assert lines[5].startswith("put('falcon-180b', 200 GB) \u2192 PinnedCapacityExceeded")
    assert lines[6].startswith("put('giant', 400 GB) \u2192 EntryTooLarge")
    assert [o.raised for o in outcomes if o is not None] == [False] * 5 + [True] * 2
    assert replay.cache.keys() == ["llama-70b", "qwen-72b"]
    root = parse(replay.svg())
    assert [r.get("data-key") for r in rects(root, "pinned")] == ["llama-70b"]
    assert "7/7" in texts(root, "caption")[0]


def test_replay_can_go_back_by_rebuilding_a_fresh_cache() -> None:
    built: list[WeightCache[str]] = []

    def make() -> WeightCache[str]:
        built.append(WeightCache(300 * GB))
        return built[-1]

    replay = CacheReplay(make, SEED_OPERATIONS)
    replay.seek(4)
    assert replay.cache.keys() == ["llama-70b", "qwen-72b"]
    replay.seek(2)
    assert len(built) == 2
    assert replay.cache.keys() == ["llama-70b", "mixtral"]
    assert len(replay.log) == 2
    with pytest.raises(ValueError, match=r"0\.\.7"):
        replay.seek(8)


def test_errors_and_unfinished_methods_are_reported_not_raised() -> None:
    class Unfinished:
        capacity, used = 10, 0

        def keys(self) -> list[str]:
            return []

        def put(self, key: str, value: object, size: int) -> None:
            raise NotImplementedError

    outcome = apply_operation(Unfinished(), ("put", "a", 1))
    assert outcome.raised
    assert outcome.text.endswith("`Unfinished.put` is not written yet")
    assert outcome.not_written == "Unfinished.put"


def test_a_replay_of_an_unfinished_class_says_on_the_picture_what_is_not_written() -> None:
    """A half-built cache with zero counters must not pass for the finished one."""

    class Counting(WeightCache):
        def get(self, key: Any) -> Any:
            raise NotImplementedError()

    operations = [("put", "a", 10 * GB), ("get", "a"), ("put", "b", 10 * GB)]
    replay = CacheReplay(lambda: Counting(100 * GB), operations)
    replay.seek(len(operations))
    expected = "`Counting.get` is not written yet (from operation 2, get('a'))"
    assert replay.not_written()[0].startswith(expected)
    for svg in (replay.svg(), replay.picture(title="yours").data):
        warnings = [t.findtext("{http://www.w3.org/2000/svg}title") for t in _warnings(svg)]
        assert any(w.startswith("\u26a0 " + expected) for w in warnings if w), warnings
    finished = CacheReplay(lambda: WeightCache(100 * GB), operations)
    finished.seek(len(operations))
    assert finished.not_written() == [] and not _warnings(finished.svg())


def _warnings(svg: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    return [e for e in root.iter() if e.get("class") == "warning"]


@pytest.mark.parametrize(
    "operation", [("evict", "a"), ("put", "a"), ("get",), "put a", ("pin", "a", "b")]
)
def test_malformed_operations_are_rejected_up_front(operation: Any) -> None:
    with pytest.raises(ValueError, match=r"operations\[1\]"):
        CacheReplay(lambda: WeightCache(10), [("get", "x"), operation])


def test_widget_slider_drives_the_replay() -> None:
    replay = CacheReplay(lambda: WeightCache(300 * GB), SEED_OPERATIONS)
    box = replay.widget()
    controls, picture, history = box.children
    slider = controls.children[-1]
    slider.value = 4
    assert replay.position == 4
    assert 'data-key="qwen-72b"' in picture.value
    assert "evicted mixtral" in history.value
    slider.value = 1
    assert replay.position == 1
    assert 'data-key="qwen-72b"' not in picture.value
