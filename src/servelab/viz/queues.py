"""Draw a scheduler's two queues at one moment: running (oldest first) and waiting (next first).

The timeline (:mod:`servelab.viz.timeline`) shows the queues over a whole run; this is one
instant of it, small enough to stand beside the block grid. Each sequence is a box with its id
and its token count, in queue order. A pure renderer (queues -> SVG), like the others.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from html import escape

from servelab.viz.picture import mark_outline, scoped_ids

__all__ = ["render_queues"]

_LABEL_W, _BOX_W, _BOX_H, _GAP, _PAD = 150, 64, 30, 6, 12
_FILL = {"running": "#3182bd", "waiting": "#d9d9d9"}


def render_queues(
    running: Sequence[tuple[Hashable, int]],
    waiting: Sequence[tuple[Hashable, int]],
    *,
    marked: Collection[Hashable] = (),
) -> str:
    """SVG of the running and waiting queues as rows of ``(sequence id, tokens)`` boxes.

    ``marked`` sequence ids get the class ``sl-differs`` and a dashed red outline (a grade's
    picture marks where this state differs from the reference's)."""
    longest = max(len(running), len(waiting), 1)
    width = 2 * _PAD + _LABEL_W + longest * (_BOX_W + _GAP)
    height = 2 * _PAD + 2 * (_BOX_H + 14)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" '
        'class="queues">'
    ]
    rows = (
        ("running", "running (oldest first)", running),
        ("waiting", "waiting (next first)", waiting),
    )
    for r, (name, label, queue) in enumerate(rows):
        y = _PAD + r * (_BOX_H + 14)
        out.append(f'<text x="{_PAD}" y="{y + 19}">{escape(label)}</text>')
        if not queue:
            out.append(f'<text x="{_PAD + _LABEL_W}" y="{y + 19}" fill="#737373">none</text>')
        for i, (seq, tokens) in enumerate(queue):
            x = _PAD + _LABEL_W + i * (_BOX_W + _GAP)
            differs = seq in marked
            text = "white" if name == "running" else "#252525"
            out.append(
                f'<g class="queued{" sl-differs" if differs else ""}" data-queue="{name}" '
                f'data-seq="{escape(str(seq))}" data-tokens="{tokens}">'
                f'<rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="4" '
                f'fill="{_FILL[name]}" stroke="#555"/>'
                f'<text x="{x + 5}" y="{y + 13}" fill="{text}" font-weight="bold">'
                f"seq {escape(str(seq))}</text>"
                f'<text x="{x + 5}" y="{y + 26}" fill="{text}">{tokens} tok</text></g>'
            )
            if differs:
                out.append(mark_outline(x - 3, y - 3, _BOX_W + 6, _BOX_H + 6))
    out.append("</svg>")
    return scoped_ids("".join(out))
