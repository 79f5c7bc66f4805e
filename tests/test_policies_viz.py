"""The eviction-order picture draws exactly the policy's order, and changes nothing."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from servelab.viz.eviction import render_eviction_order
from servelab.weights.policies import LFU, SIEVE


def _keys(svg: str, cls: str) -> list[str]:
    return re.findall(rf'class="{cls}" data-key="([^"]+)"', svg)


def test_boxes_follow_the_eviction_order_and_pinned_keys_come_last() -> None:
    p: LFU[str] = LFU()
    for key in "abcd":
        p.update_on_put(key, 1)
    p.update_on_hit("a")
    p.update_on_pin("b")
    before = p.eviction_order()
    svg = render_eviction_order(p, pinned=["b"], notes={"a": "count 2"})
    ET.fromstring(svg)  # well-formed
    assert _keys(svg, "candidate") == before == ["c", "d", "a"]
    assert _keys(svg, "pinned") == ["b"]
    assert "count 2" in svg
    assert p.eviction_order() == before and len(p) == 3


def test_an_empty_policy_says_so_and_escapes_keys() -> None:
    p: SIEVE[str] = SIEVE()
    assert "no candidates" in render_eviction_order(p)
    p.update_on_put("<7b>", 1)
    svg = render_eviction_order(p)
    ET.fromstring(svg)
    assert "&lt;7b&gt;" in svg


def test_a_non_policy_is_refused() -> None:
    with pytest.raises(TypeError, match="eviction_order"):
        render_eviction_order(object())


def test_a_long_title_widens_the_picture_instead_of_being_cut() -> None:
    p: SIEVE[str] = SIEVE()
    p.update_on_put("a", 1)
    short = ET.fromstring(render_eviction_order(p, title="short"))
    title = "your SIEVE after two evictions and a hit on d, drawn from its own order"
    long = ET.fromstring(render_eviction_order(p, title=title))
    assert int(short.get("width", "0")) == 240
    assert int(long.get("width", "0")) >= 7 * len(title)
