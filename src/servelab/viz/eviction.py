"""Draw a policy's eviction order: the candidates as a row of boxes, next victim first.

A pure renderer (policy -> SVG text), so the picture shows in JupyterLab, static exports and on
GitHub alike. It reads only the interface every policy has (``eviction_order()`` and
``len()``, neither of which changes state); per-key notes (an LFU count, a SIEVE visited bit)
are passed in by the caller, so a learner's policy draws the same way as the reference.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from html import escape
from typing import Any

from servelab.viz.picture import Picture, mark_outline, scoped_ids

__all__ = ["render_eviction_order", "show_eviction_order"]

_BOX_W, _BOX_H, _GAP, _MARGIN = 74, 38, 8, 12


def render_eviction_order(
    policy: Any,
    *,
    title: str | None = None,
    notes: Mapping[Hashable, str] | None = None,
    pinned: Iterable[Hashable] = (),
    highlight: Iterable[Hashable] = (),
    marked: Iterable[Hashable] = (),
) -> str:
    """An SVG of ``policy.eviction_order()``: box 1 is the next victim.

    ``notes`` adds a short line under a key's name; ``pinned`` keys are drawn hatched after the
    candidates (they are not in the order); ``highlight`` keys get a thick outline; ``marked``
    keys the class ``sl-differs`` and a dashed red outline (where a grade's picture finds this
    state differs from the reference's).
    """
    order_fn = getattr(policy, "eviction_order", None)
    if not callable(order_fn):
        raise TypeError(f"{type(policy).__name__} has no eviction_order(): not a policy?")
    order = list(order_fn())
    notes = dict(notes or {})
    held = [k for k in pinned if k not in order]
    thick, differing = set(highlight), set(marked)
    n = len(order) + len(held)
    name = getattr(policy, "name", type(policy).__name__)
    head = title if title is not None else f"{name}: next victims, left to right"
    # Wide enough for the boxes and for the title (13 px bold: about 7.5 px a character).
    width = max(2 * _MARGIN + n * (_BOX_W + _GAP), 240, 2 * _MARGIN + round(len(head) * 7.5))
    height = 2 * _MARGIN + 22 + _BOX_H + 34
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" '
        f'class="eviction-order">',
        '<defs><pattern id="pinned-hatch-order" width="6" height="6" '
        'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="6" height="6" fill="#fdd0a2"/><line x1="0" y1="0" x2="0" y2="6" '
        'stroke="#d94801" stroke-width="1.5" stroke-opacity="0.45"/></pattern></defs>',
        f'<text x="{_MARGIN}" y="{_MARGIN + 8}" font-size="13" font-weight="bold" '
        f'fill="#252525">{escape(head)}</text>',
    ]
    y = _MARGIN + 22
    for i, key in enumerate([*order, *held]):
        x = _MARGIN + i * (_BOX_W + _GAP)
        is_pinned = i >= len(order)
        fill = "url(#pinned-hatch-order)" if is_pinned else ("#fcbba1" if i == 0 else "#deebf7")
        stroke = "3" if key in thick else "1"
        label = "pinned" if is_pinned else str(i + 1)
        kind = ("pinned" if is_pinned else "candidate") + (
            " sl-differs" if key in differing else ""
        )
        parts.append(
            f'<rect class="{kind}" data-key="{escape(str(key))}" '
            f'x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="4" fill="{fill}" '
            f'stroke="#252525" stroke-width="{stroke}"/>'
        )
        if key in differing:
            parts.append(mark_outline(x - 3, y - 3, _BOX_W + 6, _BOX_H + 6))
        parts.append(
            f'<text x="{x + _BOX_W / 2}" y="{y + 15}" text-anchor="middle" '
            f'fill="#252525">{escape(str(key))}</text>'
        )
        note = notes.get(key, "")
        if note:
            parts.append(
                f'<text x="{x + _BOX_W / 2}" y="{y + 30}" text-anchor="middle" font-size="10" '
                f'fill="#525252">{escape(note)}</text>'
            )
        parts.append(
            f'<text x="{x + _BOX_W / 2}" y="{y + _BOX_H + 14}" text-anchor="middle" '
            f'fill="#737373">{escape(label)}</text>'
        )
    if n == 0:
        parts.append(
            f'<text x="{_MARGIN}" y="{y + 20}" fill="#737373">no candidates: every key is '
            f"pinned, or none is resident</text>"
        )
    parts.append(
        f'<text x="{_MARGIN}" y="{height - 6}" fill="#737373">{len(order)} candidates'
        f"{f', {len(held)} pinned' if held else ''} · 1 = next victim</text>"
    )
    parts.append("</svg>")
    return scoped_ids("".join(parts))


def show_eviction_order(policy: Any, **options: Any) -> Any:
    """Display :func:`render_eviction_order` in a notebook (returns the IPython object)."""
    return Picture(render_eviction_order(policy, **options), alt="eviction order")
