"""The failing call drawn by the topic's own renderer: yours beside the reference's, marked.

Where a topic has a picture of its structure (the block grid and tables, a weight cache's
budget bar, a policy's eviction order, a scheduler's queues, the offload tiers), the first
diverging call's two after-states are drawn with that picture, side by side, and the entries
that differ (a block, a key, a queued sequence, a chunk) carry the class ``sl-differs`` and a
dashed red outline. Under them, a table holds the call's outcome and every field the drawing
does not show, so the picture never says less than the report's words.

Reading a state runs the learner's inspection methods once more, under a hang guard. Where a
topic has no renderer, or either state cannot be read or drawn, the picture is the generic
table of fields (:mod:`servelab.grading.difference_picture`). Everything drawn depends only
on the two states, so the same failure draws the same bytes.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import redirect_stdout
from dataclasses import dataclass
from typing import Any

from servelab.grading.difference_picture import (
    STYLE,
    difference_table,
    differing_entries,
    heading,
    render_difference,
)
from servelab.grading.localise import Divergence
from servelab.grading.observe import policy_history
from servelab.testing.core import ImplementationHung, hang_guard
from servelab.viz.blocks import BlockSnapshot, render_blocks
from servelab.viz.blocks import snapshot as block_snapshot
from servelab.viz.eviction import render_eviction_order
from servelab.viz.picture import img_tag
from servelab.viz.queues import render_queues
from servelab.viz.tiers import render_tiers, tier_states
from servelab.viz.weights import render_cache
from servelab.viz.weights import snapshot as cache_snapshot

__all__ = ["DRAWN_TOPICS", "picture", "structure_picture"]

_log = logging.getLogger(__name__)

READ_TIMEOUT_S = 2.0
# What the block grid shows in full. A cached block shows its free-list place, not its place
# in the reclaim order, so that order stays a row of the table (its blocks are still marked).
_BLOCK_FIELDS = ("tables", "lengths", "refcounts", "free")


@dataclass(frozen=True)
class _Drawing:
    """One side drawn: its SVGs, and the fields they show in full."""

    svgs: tuple[str, ...]
    fields: frozenset[str]


# ----------------------------------------------------------------------------- marks


def misaligned(mine: Sequence[Any], theirs: Sequence[Any]) -> tuple[set[Any], set[Any]]:
    """The items of two orders that the other order does not hold at an aligned place (a
    list that lost its head differs in that one item, not in every position after it)."""
    left, right = differing_entries(list(mine), list(theirs))
    if "" in left:  # pragma: no cover - two lists always align entry by entry
        return set(mine), set(theirs)
    return {mine[int(i)] for i in left}, {theirs[int(j)] for j in right}


def _facts_differ(mine: Mapping[Any, Any], theirs: Mapping[Any, Any]) -> tuple[set[Any], set[Any]]:
    """The keys of each side whose facts the other side does not share (or lacks)."""
    missing = object()
    return (
        {k for k, v in mine.items() if theirs.get(k, missing) != v},
        {k for k, v in theirs.items() if mine.get(k, missing) != v},
    )


# ----------------------------------------------------------------------------- block grids


def _block_facts(s: BlockSnapshot) -> dict[int, Any]:
    holders: dict[int, list[Any]] = {b: [] for b in range(s.num_blocks)}
    for seq, table in sorted(s.tables.items(), key=lambda item: repr(item[0])):
        for b in table:
            holders[b].append(seq)
    free, cached = set(s.free_list), set(s.evictable)
    return {
        b: (s.refcounts[b], tuple(holders[b]), b in free, b in cached) for b in range(s.num_blocks)
    }


def _block_marks(a: BlockSnapshot, b: BlockSnapshot) -> tuple[tuple[set[Any], set[Any]], ...]:
    """(blocks, sequences) marked on each side: a block whose refcount, holders, free-list or
    cached place differs; a sequence whose table or length differs."""
    blocks = _facts_differ(_block_facts(a), _block_facts(b))
    for order in ((a.free_list, b.free_list), (a.evictable, b.evictable)):
        left, right = misaligned(*order)
        blocks[0].update(left)
        blocks[1].update(right)
    seqs = _facts_differ(
        {s: (t, a.lens[s]) for s, t in a.tables.items()},
        {s: (t, b.lens[s]) for s, t in b.tables.items()},
    )
    return blocks, seqs


def _draw_blocks(a: BlockSnapshot, b: BlockSnapshot) -> tuple[str, str]:
    blocks, seqs = _block_marks(a, b)
    return (
        render_blocks(a, per_row=8, marked=blocks[0], marked_seqs=seqs[0]),
        render_blocks(b, per_row=8, marked=blocks[1], marked_seqs=seqs[1]),
    )


def _blocks(mine: Any, theirs: Any, fields: frozenset[str]) -> tuple[_Drawing, _Drawing]:
    a, b = block_snapshot(mine), block_snapshot(theirs)
    left, right = _draw_blocks(a, b)
    shown = fields & frozenset(_BLOCK_FIELDS)
    return _Drawing((left,), shown), _Drawing((right,), shown)


# ----------------------------------------------------------------------------- the others


def _weights(mine: Any, theirs: Any, fields: frozenset[str]) -> tuple[_Drawing, _Drawing]:
    a, b = cache_snapshot(mine), cache_snapshot(theirs)
    keys = [[e["key"] for e in s["entries"]] for s in (a, b)]
    marks = _facts_differ(
        {e["key"]: (e["size"], e["pins"]) for e in a["entries"]},
        {e["key"]: (e["size"], e["pins"]) for e in b["entries"]},
    )
    for order in ((keys[0], keys[1]), (a["eviction_order"], b["eviction_order"])):
        left, right = misaligned(*order)
        marks[0].update(left)
        marks[1].update(right)
    shown = {"resident"}
    sides = ((mine, keys[0]), (theirs, keys[1]))
    if all(n > 0 and key in k for obj, k in sides for key, n in _pins(obj)):
        # each count shows on its entry as "pinned ×n"
        shown.add("pins")
    svgs = [render_cache(s, width=420, marked=marks[i]) for i, s in enumerate((a, b))]
    return _Drawing((svgs[0],), frozenset(shown)), _Drawing((svgs[1],), frozenset(shown))


def _pins(cache: Any) -> list[tuple[Any, int]]:
    """Every non-zero pin count, resident or not (the report's ``pins`` field)."""
    keys = list(cache.keys())
    pins = getattr(cache, "_pins", None)
    extra = [k for k in pins if k not in keys] if isinstance(pins, dict) else []
    counts = [(k, cache.pin_count(k)) for k in [*keys, *extra]]
    return [(k, n) for k, n in counts if n]


class _Order:
    """A policy's eviction order as read once, for the renderer."""

    def __init__(self, order: list[Hashable]) -> None:
        self.order = order

    def eviction_order(self) -> list[Hashable]:
        return self.order


def _policy_state(policy: Any) -> tuple[list[Any], list[Any], dict[Any, str]]:
    order = list(policy.eviction_order())
    history = policy_history(policy)
    notes: dict[Any, str] = {k: f"count {n}" for k, n in history.get("counts", {}).items()}
    for key in history.get("visited", []):
        notes[key] = f"{notes[key]}, visited" if key in notes else "visited"
    return order, list(history.get("pinned", [])), notes


def _policy(mine: Any, theirs: Any, fields: frozenset[str]) -> tuple[_Drawing, _Drawing]:
    (oa, pa, na), (ob, pb, nb) = _policy_state(mine), _policy_state(theirs)
    marks = misaligned(oa, ob)
    marks[0].update(k for k in (*oa, *pa) if (k in pa) != (k in pb))
    marks[1].update(k for k in (*ob, *pb) if (k in pa) != (k in pb))
    left, right = _facts_differ(na, nb)
    marks[0].update(k for k in left if k in (*oa, *pa))
    marks[1].update(k for k in right if k in (*ob, *pb))
    shown = {"eviction order"}
    if not set(pa) & set(oa) and not set(pb) & set(ob):  # a pinned candidate shows no pin
        shown.add("pinned")
    if all(set(n) <= {*o, *p} for o, p, n in ((oa, pa, na), (ob, pb, nb))):
        shown |= {"counts", "visited"}
    title = "next victims, left to right"
    svgs = [
        render_eviction_order(_Order(o), title=title, notes=n, pinned=p, marked=marks[i])
        for i, (o, p, n) in enumerate(((oa, pa, na), (ob, pb, nb)))
    ]
    return _Drawing((svgs[0],), frozenset(shown)), _Drawing((svgs[1],), frozenset(shown))


def _queue(sched: Any, name: str) -> list[tuple[Any, int]]:
    return [(s.seq_id, int(s.num_tokens)) for s in getattr(sched, name)]


def _scheduler(mine: Any, theirs: Any, fields: frozenset[str]) -> tuple[_Drawing, _Drawing]:
    queues = [(_queue(s, "running"), _queue(s, "waiting")) for s in (mine, theirs)]
    marks: tuple[set[Any], set[Any]] = (set(), set())
    for q in (0, 1):
        left, right = misaligned(queues[0][q], queues[1][q])
        marks[0].update(seq for seq, _ in left)
        marks[1].update(seq for seq, _ in right)
    shown = {"running", "waiting"}
    sides: list[list[str]] = [[], []]
    bms = [getattr(s, "bm", None) for s in (mine, theirs)]
    if bms[0] is not None and bms[1] is not None:
        left_svg, right_svg = _draw_blocks(block_snapshot(bms[0]), block_snapshot(bms[1]))
        sides[0].append(left_svg)
        sides[1].append(right_svg)
        shown |= fields & frozenset(_BLOCK_FIELDS)
    for i, (running, waiting) in enumerate(queues):
        sides[i].insert(0, render_queues(running, waiting, marked=marks[i]))
    return _Drawing(tuple(sides[0]), frozenset(shown)), _Drawing(tuple(sides[1]), frozenset(shown))


def _tiers(mine: Any, theirs: Any, fields: frozenset[str]) -> tuple[_Drawing, _Drawing]:
    a, b = tier_states(mine), tier_states(theirs)
    marks: tuple[set[Any], set[Any]] = (set(), set())
    names = [t["name"] for t in a]
    if names != [t["name"] for t in b]:
        raise ValueError("the two objects have different tiers")
    for ta, tb in zip(a, b, strict=True):
        name = ta["name"]
        left, right = misaligned([c[0] for c in ta["chunks"]], [c[0] for c in tb["chunks"]])
        facts = _facts_differ(
            {c[0]: c[1:] for c in ta["chunks"]}, {c[0]: c[1:] for c in tb["chunks"]}
        )
        marks[0].update((name, k) for k in left | facts[0])
        marks[1].update((name, k) for k in right | facts[1])
    shown = frozenset({"keys"} if len(names) == 1 else {f"{n}.keys" for n in names})
    svgs = [
        render_tiers(obj, gpu=None, width=420, marked=marks[i])
        for i, obj in enumerate((mine, theirs))
    ]
    return _Drawing((svgs[0],), shown), _Drawing((svgs[1],), shown)


_Drawer = Callable[[Any, Any, frozenset[str]], tuple[_Drawing, _Drawing]]

#: The topics whose structure has a renderer, and how each draws a state.
_DRAWERS: dict[str, _Drawer] = {
    "weight-cache": _weights,
    "eviction-policy": _policy,
    "block-manager": _blocks,
    "prefix-cache": _blocks,
    "scheduler": _scheduler,
    "token-budget": _scheduler,
    "kv-offload": _tiers,
}
DRAWN_TOPICS = frozenset(_DRAWERS)


# ----------------------------------------------------------------------------- the page


def _side(side: str, svgs: Sequence[str]) -> str:
    """One side's drawings as ``<img>`` data URLs: a notebook saved and opened again (untrusted)
    drops inline SVG and styles but keeps these, and the marks are drawn in the SVG itself."""
    images = "".join(
        img_tag(svg, alt=f"{side}: drawing {n + 1}").replace(
            "<img ", '<img style="max-width:100%;height:auto;display:block;margin-bottom:6px" ', 1
        )
        for n, svg in enumerate(svgs)
    )
    return f'<td data-side="{side}" style="width:50%;vertical-align:top">{images}</td>'


def structure_picture(topic: str, d: Divergence) -> str | None:
    """The two after-states drawn by ``topic``'s renderer, marked, over the table of what the
    drawing does not show; None where the topic has no renderer or a state cannot be drawn."""
    drawer = _DRAWERS.get(topic)
    if drawer is None or d.after is None:
        return None
    mine, theirs = d.after
    fields = frozenset(d.mine[1]) | frozenset(d.theirs[1])
    try:
        with hang_guard("picture", READ_TIMEOUT_S), redirect_stdout(io.StringIO()):
            left, right = drawer(mine, theirs, fields)
    except (Exception, ImplementationHung) as error:
        _log.info("the %s picture falls back to the table of fields: %r", topic, error)
        return None
    names = list(d.mine[1]) + [n for n in d.theirs[1] if n not in d.mine[1]]
    rest = [n for n in names if n not in left.fields]
    if any("sl-differs" in svg for svg in (*left.svgs, *right.svgs)):
        key = "dashed red outline: differs from the other side"
    else:
        key = "the two drawings agree; the table below compares the rest"
    return (
        f'{STYLE}<div class="sl-difference" data-drawn="{topic}">{heading(d.call, d.method)}'
        '<table class="sl-sides" style="width:100%;table-layout:fixed">'
        '<tr><th style="text-align:left">yours</th>'
        '<th style="text-align:left">the reference</th></tr><tr>'
        + _side("yours", left.svgs)
        + _side("reference", right.svgs)
        + f"</tr></table><div>{key}</div>"
        + difference_table(d.mine, d.theirs, rest)
        + "</div>"
    )


def picture(topic: str, d: Divergence) -> str:
    """The report's picture of the first diverging call: drawn by the topic's renderer where
    it has one and both states can be read, else the generic table of fields."""
    return structure_picture(topic, d) or render_difference(d.call, d.mine, d.theirs, d.method)
