"""KV offload tiers side by side: GPU, CPU and disk, each chunk coloured by its state.

:func:`render_tiers` draws a hierarchy (anything with ``tiers``) or one tier as SVG: one
column per tier, its capacity as the column's height, its chunks stacked in policy order (the
next victim on top) with heights to scale. A chunk is *resident* (blue), *pinned* by a lookup
(orange), *referenced* by a transfer (purple) or *in flight*: written into this tier by the
step just taken (green). The GPU column shows the chunks the last retrieve copied up.

:class:`TierReplay` steps a trace (store, lookup, retrieve, release) through a fresh object of
the learner's own class and draws each state; its widget falls back to the final picture as an
``<img>`` where no kernel runs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from html import escape
from typing import Any

from servelab.viz.picture import Picture, mark_outline, scoped_ids, with_static_picture

__all__ = ["TierReplay", "render_tiers", "show_tiers", "tier_states"]

COLOURS = {
    "resident": "#9ecae1",
    "pinned": "#fd8d3c",
    "referenced": "#9e9ac8",
    "in flight": "#74c476",
}


def _read(fn: Callable[[], Any], default: Any) -> Any:
    try:
        return fn()
    except Exception:
        return default


def _call(obj: Any, method: str, key: Any, default: int) -> int:
    try:
        return int(getattr(obj, method)(key))
    except Exception:
        return default


def _tier_state(tier: Any, in_flight: set[Any]) -> dict[str, Any]:
    chunks: list[tuple[Any, int, str]] = []
    for key in _read(lambda: list(tier.keys()), []):
        size = _call(tier, "size_of", key, 0)
        if _call(tier, "ref_count", key, 1) > 1:
            state = "referenced"
        elif _call(tier, "pin_count", key, 0) > 0:
            state = "pinned"
        elif key in in_flight:
            state = "in flight"
        else:
            state = "resident"
        chunks.append((key, size, state))
    return {
        "name": str(getattr(tier, "name", "tier")),
        "capacity": int(_read(lambda: tier.capacity, 1)) or 1,
        "used": _read(lambda: int(tier.used), sum(s for _, s, _ in chunks)),
        "chunks": chunks,
    }


def tier_states(obj: Any) -> list[dict[str, Any]]:
    """Each tier of ``obj`` (a hierarchy, or one tier) as the picture draws it: its name,
    capacity, used bytes and chunks as (key, size, state), next victim first."""
    return [_tier_state(t, set()) for t in getattr(obj, "tiers", [obj])]


def render_tiers(
    obj: Any,
    *,
    gpu: Sequence[Any] | None = (),
    in_flight: Sequence[Any] = (),
    title: str | None = None,
    caption: str | None = None,
    width: int = 640,
    marked: Collection[tuple[str, Hashable]] = (),
) -> str:
    """SVG of ``obj``'s tiers (a hierarchy, or one tier) beside a GPU column holding ``gpu``
    (no GPU column when ``gpu`` is None).

    ``marked`` chunks, as (tier name, key), get the class ``sl-differs`` and a dashed red
    outline (a grade's picture marks where this state differs from the reference's)."""
    tiers = list(getattr(obj, "tiers", [obj]))
    flying = set(in_flight)
    states = [_tier_state(t, flying) for t in tiers]
    columns: list[dict[str, Any]] = []
    if gpu is not None:
        chunks = [(k, 0, "in flight") for k in gpu]
        columns.append({"name": "GPU", "capacity": 0, "used": 0, "chunks": chunks})
    first = len(columns)  # the first tier's column
    columns += states
    col_w = (width - 40) // max(1, len(columns))
    top, height = 48 if title else 28, 220
    per_line = max(1, (width - 20) // 130)  # legend entries on one line
    total = top + height + 64 + 16 * ((len(COLOURS) - 1) // per_line)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" '
        f'viewBox="0 0 {width} {total}" font-family="sans-serif" font-size="11" class="tiers">'
    ]
    if title:
        parts.append(
            f'<text x="20" y="20" font-size="14" font-weight="bold">{escape(title)}</text>'
        )
    for i, col in enumerate(columns):
        x = 20 + i * col_w
        w = col_w - 24
        parts.append(
            f'<rect x="{x}" y="{top}" width="{w}" height="{height}" fill="#f7f7f7" stroke="#444"/>'
        )
        label = col["name"] if i < first else f"{col['name']}: {col['used']} of {col['capacity']} B"
        parts.append(f'<text x="{x}" y="{top - 6}">{escape(label)}</text>')
        y = float(top)
        for n, (key, size, state) in enumerate(col["chunks"]):
            h = 18.0 if i < first else max(3.0, height * size / col["capacity"])
            fill = COLOURS[state]
            differs = (col["name"], key) in marked
            parts.append(
                f'<rect class="chunk{" sl-differs" if differs else ""}" '
                f'data-tier="{escape(col["name"])}" data-key="{escape(str(key))}" '
                f'x="{x + 2}" y="{y:.1f}" width="{w - 4}" height="{h - 1:.1f}" '
                f'fill="{fill}" stroke="#333"><title>{escape(str(key))}: {state}</title></rect>'
            )
            if differs:
                parts.append(mark_outline(x, y - 1, w, h + 1))
            text = str(key) if i < first else f"{n + 1}. {key} ({size} B)"
            if h >= 11:
                parts.append(
                    f'<text x="{x + 6}" y="{y + min(h - 3, 13):.1f}">{escape(text)}</text>'
                )
            y += h
    legend_y = top + height + 20
    for j, (state, fill) in enumerate(COLOURS.items()):
        lx, ly = 20 + (j % per_line) * 130, legend_y + 16 * (j // per_line)
        parts.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{fill}"/>')
        parts.append(f'<text x="{lx + 16}" y="{ly}">{state}</text>')
    if caption:
        caption_y = legend_y + 22 + 16 * ((len(COLOURS) - 1) // per_line)
        parts.append(f'<text x="20" y="{caption_y}">{escape(caption)}</text>')
    parts.append("</svg>")
    return scoped_ids("".join(parts))


def show_tiers(obj: Any, **options: Any) -> Picture:
    """:func:`render_tiers` as a notebook output (SVG, an ``<img>`` fallback, a text line)."""
    return Picture(render_tiers(obj, **options), alt=options.get("title") or "KV tiers")


Operation = tuple[Any, ...]


class TierReplay:
    """Step a trace through a fresh hierarchy: ``("store", key, size)``, ``("lookup", keys)``,
    ``("retrieve",)`` and ``("release",)`` (of the oldest open lookup)."""

    def __init__(
        self,
        make: Callable[[], Any],
        operations: Sequence[Operation],
        payload: Callable[[Any, int], Any],
        *,
        title: str | None = None,
    ) -> None:
        if not callable(make):
            raise TypeError("make must be a function that returns a fresh hierarchy")
        kinds = {"store": 3, "lookup": 2, "retrieve": 1, "release": 1}
        for i, op in enumerate(operations):
            if not isinstance(op, tuple) or not op or kinds.get(op[0]) != len(op):
                raise ValueError(f"operation {i} is {op!r}; expected one of {sorted(kinds)}")
        self.make, self.operations, self.payload, self.title = (
            make,
            list(operations),
            payload,
            title,
        )
        self.seek(0)

    def seek(self, position: int) -> None:
        """The state after the first ``position`` operations, replayed on a fresh object."""
        if not 0 <= position <= len(self.operations):
            raise ValueError(f"position must be in 0..{len(self.operations)}, got {position}")
        self.obj = self.make()
        self.position = 0
        self.log: list[str] = []
        self.gpu: list[Any] = []
        self.in_flight: list[Any] = []
        self._open: list[Any] = []
        for _ in range(position):
            self._apply(self.operations[self.position])
            self.position += 1

    def _where(self) -> set[tuple[str, Any]]:
        where: set[tuple[str, Any]] = set()
        for t in self.obj.tiers:
            try:
                where.update((t.name, k) for k in t.keys())
            except Exception:
                continue
        return where

    def _apply(self, op: Operation) -> None:
        before = self._where()
        self.gpu = []
        try:
            if op[0] == "store":
                ok = self.obj.store(op[1], self.payload(op[1], op[2]))
                text = f"store {op[1]!r} ({op[2]} B): {'stored' if ok else 'a miss'}"
            elif op[0] == "lookup":
                found = self.obj.lookup(list(op[1]))
                self._open.append(found)
                text = f"lookup {list(op[1])}: pinned {[f[0] for f in found]}"
            else:
                found = self._open.pop(0) if self._open else []
                if op[0] == "retrieve":
                    self.obj.retrieve(found)
                    self.gpu = [f[0] for f in found]
                    text = f"retrieve: {self.gpu} copied to the GPU"
                else:
                    self.obj.release(found)
                    text = f"release: unpinned {[f[0] for f in found]}"
        except NotImplementedError as error:
            from servelab.unwritten import not_written_yet

            method = not_written_yet(error)
            unwritten = (
                f"`{method}` is not written yet"
                if method
                else "a method it calls is not written yet"
            )
            text = f"{op[0]}: {unwritten}; not your finished class"
        except Exception as exc:
            text = f"{op[0]} raised {type(exc).__name__}: {exc}"
        self.in_flight = [k for _, k in self._where() - before]
        self.log.append(text)

    def svg(self) -> str:
        caption = self.log[-1] if self.log else f"{len(self.operations)} operations to go"
        return render_tiers(
            self.obj, gpu=self.gpu, in_flight=self.in_flight, title=self.title, caption=caption
        )

    def picture(self) -> Picture:
        return Picture(self.svg(), alt=self.title or "KV tiers")

    def widget(self) -> Any:
        """Play, back, step and a slider over the drawing and the log."""
        import ipywidgets as widgets

        n = len(self.operations)
        picture = widgets.HTML(self.svg())
        history = widgets.HTML()
        slider = widgets.IntSlider(value=self.position, min=0, max=n, description="operation")
        play = widgets.Play(value=self.position, min=0, max=n, interval=900)
        back = widgets.Button(description="\u25c0 back", layout=widgets.Layout(width="90px"))
        forward = widgets.Button(description="step \u25b6", layout=widgets.Layout(width="90px"))
        widgets.jslink((play, "value"), (slider, "value"))

        def nudge(delta: int) -> Callable[[Any], None]:
            return lambda _button: setattr(slider, "value", max(0, min(n, slider.value + delta)))

        def redraw(change: Any = None) -> None:
            self.seek(slider.value)
            picture.value = self.svg()
            rows = "".join(f"<li>{escape(t)}</li>" for t in self.log)
            history.value = f"<ol style='font-family:monospace;font-size:12px'>{rows}</ol>"

        slider.observe(redraw, names="value")
        back.on_click(nudge(-1))
        forward.on_click(nudge(+1))
        redraw()
        box = widgets.VBox([widgets.HBox([play, back, forward, slider]), picture, history])
        return with_static_picture(box, self._final_svg, alt=self.title or "KV tiers replay")

    def _final_svg(self) -> str:
        whole = TierReplay(self.make, self.operations, self.payload, title=self.title)
        whole.seek(len(self.operations))
        return whole.svg()
