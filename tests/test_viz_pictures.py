"""Pictures as a presenter sees them: ids that never collide, fallbacks that show untrusted,
what the last operation did, and a legend. Every check reads the SVG back."""

from __future__ import annotations

import base64
import importlib.util
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from servelab import GB, WeightCache
from servelab.kv.blocks import BlockManager
from servelab.viz import CacheReplay, render_blocks, render_cache, show_cache
from servelab.viz.eviction import render_eviction_order
from servelab.viz.picture import Picture, scoped_ids, with_static_picture
from servelab.weights.policies import LRU

SVG = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parent.parent


def _ids(svg: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', svg))


def _references(svg: str) -> set[str]:
    return set(re.findall(r"url\(#([^)]+)\)", svg))


def _pinned_cache(*keys: str) -> WeightCache:
    cache = WeightCache(100 * GB)
    for key in keys:
        cache.put(key, key, 30 * GB)
    cache.pin(keys[0])
    return cache


def test_ids_are_unique_per_picture_and_references_stay_inside() -> None:
    first = render_cache(_pinned_cache("a", "b"))
    second = render_cache(_pinned_cache("c", "d"))
    policy = LRU()
    policy.update_on_put("x", 1)
    policy.update_on_pin("x")
    third = render_eviction_order(policy)
    fourth = render_blocks(BlockManager(4, 2))
    pictures = [first, second, third, fourth]
    for svg in pictures:
        assert _references(svg) <= _ids(svg)  # every url(#id) resolves in its own picture
    all_ids = [i for svg in pictures for i in _ids(svg)]
    assert len(all_ids) == len(set(all_ids)), "two pictures share an id"
    assert render_cache(_pinned_cache("a", "b")) == first  # same picture, same text


def test_scoped_ids_rewrites_every_reference() -> None:
    svg = (
        '<svg><defs><marker id="arrow"/><pattern id="arrow-2"/></defs>'
        '<path marker-end="url(#arrow)" fill="url(#arrow-2)"/></svg>'
    )
    scoped = scoped_ids(svg)
    assert _references(scoped) == _ids(scoped) and "arrow" not in _ids(scoped)
    assert scoped_ids("<svg/>") == "<svg/>"


def test_picture_renders_untrusted_through_an_img() -> None:
    picture = show_cache(_pinned_cache("a"))
    assert isinstance(picture, Picture)
    bundle = picture._repr_mimebundle_()
    match = re.fullmatch(
        r'<img src="data:image/svg\+xml;base64,([^"]+)" alt="[^"]*"/>', bundle["text/html"]
    )
    assert match is not None
    assert base64.b64decode(match.group(1)).decode() == bundle["image/svg+xml"]
    assert bundle["text/plain"] == "<weight cache>"


def test_widget_keeps_its_view_and_gains_a_static_picture() -> None:
    widgets = pytest.importorskip("ipywidgets")
    box = with_static_picture(widgets.VBox([]), lambda: "<svg/>", alt="x")
    bundle = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "base64," in bundle["text/html"]


def _root(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def test_replay_shows_ghosts_of_what_the_put_evicted_and_the_touched_key() -> None:
    ops = [
        ("put", "a", 40 * GB),
        ("put", "b", 40 * GB),
        ("get", "a"),
        ("put", "c", 70 * GB),  # evicts b (least recent), then a
        ("get", "c"),
        ("get", "zz"),
    ]
    replay = CacheReplay(lambda: WeightCache(100 * GB), ops)
    replay.seek(4)
    root = _root(replay.svg())
    ghosts = [
        (r.get("data-key"), r.get("data-size"))
        for r in root.iter(f"{SVG}rect")
        if r.get("class") == "ghost"
    ]
    assert ghosts == [("b", str(40 * GB)), ("a", str(40 * GB))]
    widths = [
        float(r.get("width", 0)) for r in root.iter(f"{SVG}rect") if r.get("class") == "ghost"
    ]
    bar = next(r for r in root.iter(f"{SVG}rect") if r.get("class") == "budget")
    assert sum(widths) == pytest.approx(float(bar.get("width", 0)) * 0.8, rel=1e-3)  # to scale
    replay.seek(5)
    root = _root(replay.svg())
    assert [r.get("data-key") for r in root.iter(f"{SVG}rect") if r.get("class") == "touched"] == [
        "c"
    ]
    assert not [
        r for r in root.iter(f"{SVG}rect") if r.get("class") == "ghost"
    ]  # a get evicts nothing
    replay.seek(6)
    (counters,) = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "counters"] or [
        None
    ]
    root = _root(replay.svg())
    (counters,) = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "counters"]
    assert counters == "hits 2 \u00b7 misses 1"
    assert not [r for r in root.iter(f"{SVG}rect") if r.get("class") == "touched"]  # a miss


def test_replay_static_fallback_is_the_whole_run() -> None:
    pytest.importorskip("ipywidgets")
    ops = [("put", "a", 40 * GB), ("put", "b", 70 * GB)]
    replay = CacheReplay(lambda: WeightCache(100 * GB), ops)
    html = replay.widget()._repr_mimebundle_()["text/html"]
    svg = base64.b64decode(html.split("base64,")[1].split('"')[0]).decode()
    assert "after 2/2" in svg


def test_blocks_have_a_legend_readable_text_and_separate_lines() -> None:
    bm = BlockManager(8, 4)
    bm.allocate(0, 6)
    bm.fork(0, 1)
    bm.fork(0, 2)
    root = _root(render_blocks(bm))
    assert root.get("font-size") == "12"
    legend = " ".join(
        t.text or ""
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "legend"
        for t in g.iter(f"{SVG}text")
    )
    for words in ("red border", "green slot", "fill bar"):
        assert words in legend
    links = [line for line in root.iter(f"{SVG}line") if line.get("class") == "link"]
    into_shared = [line for line in links if line.get("data-block") == "0"]
    assert len(into_shared) == 3
    ends = {(line.get("x2"), line.get("y2")) for line in into_shared}
    assert len(ends) == 3, "three sequences' lines into one block must end apart"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "servelab_tools_notebooks", ROOT / "tools/notebooks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_tidy_drops_widget_state_and_views_but_keeps_the_fallback() -> None:
    tool = _tool()
    view = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    output = new_output(
        "display_data",
        {
            "application/vnd.jupyter.widget-view+json": view,
            "text/html": "<img/>",
            "text/plain": "VBox()",
        },
    )
    cell = new_code_cell("w", outputs=[output], metadata={"execution": {"iopub.status.busy": "x"}})
    notebook = new_notebook(cells=[cell])
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    assert tool.tidy_outputs(notebook) is True
    assert "widgets" not in notebook.metadata
    assert set(notebook.cells[0].outputs[0]["data"]) == {"text/html", "text/plain"}
    assert "execution" not in notebook.cells[0].metadata  # timestamps churn on every run
    assert tool.tidy_outputs(notebook) is False  # tidy twice changes nothing
