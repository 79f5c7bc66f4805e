"""Draw a scheduler run as a timeline: one row per sequence, one column per step, and a gauge.

Each row shows what happened to a sequence at each step: waiting, prefilled (admitted, or
re-admitted after a preemption), decoding, or preempted in that step. Below the rows, the
free-block gauge plots ``bm.num_free`` after every step against the watermark, so thrashing
shows as red marks where the gauge touches zero. For a token-budget run (frames with a
``budget``, from :func:`~servelab.kv.latency.budget_snapshot`), a token panel between the two
splits each step's bar into decode and prefill tokens against the budget line: chunked prefill
shows as green filling what the blue decodes leave of the budget.

:func:`render_timeline` is a pure function of a list of :class:`~servelab.kv.sim.Frame`
(``simulate(..., record=True).frames``, or ``snapshot(sched, out, step)`` per step of a
learner's own scheduler) and returns SVG text, so it shows in JupyterLab, static exports and on
GitHub, and a test can read it back with ``xml.etree``. Runs of one state are drawn as one
rectangle, so a thousand-step run stays a small picture. :class:`TimelineReplay` adds a
slider and a play button that reveal the run step by step.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from servelab.kv.sim import Frame
from servelab.viz.picture import scoped_ids, with_static_picture

__all__ = ["COLORS", "TimelineReplay", "render_timeline", "states_by_sequence"]

COLORS: dict[str, str] = {
    "waiting": "#d9d9d9",
    "prefill": "#31a354",
    "decode": "#3182bd",
    "preempted": "#de2d26",
}


def _state(frame: Frame, seq_id: int) -> str | None:
    if seq_id in frame.preempted:
        return "preempted"
    if seq_id in frame.prefilled:
        return "prefill"
    if seq_id in frame.decoded:
        return "decode"
    if seq_id in frame.waiting:
        return "waiting"
    return None  # not arrived, finished, or running without a token this step


def states_by_sequence(frames: Sequence[Frame]) -> dict[int, list[tuple[str, int, int]]]:
    """Each sequence's runs of one state as ``(state, first frame, last frame + 1)``."""
    seq_ids = sorted(
        {s for f in frames for s in (*f.running, *f.waiting, *f.preempted, *f.finished)}
    )
    runs: dict[int, list[tuple[str, int, int]]] = {}
    for sid in seq_ids:
        spans: list[tuple[str, int, int]] = []
        for i, frame in enumerate(frames):
            state = _state(frame, sid)
            if state is None:
                continue
            if spans and spans[-1][0] == state and spans[-1][2] == i:
                spans[-1] = (state, spans[-1][1], i + 1)
            else:
                spans.append((state, i, i + 1))
        runs[sid] = spans
    return runs


def forcing_sequences(frames: Sequence[Frame], index: int) -> list[int]:
    """Who needed the blocks that a preemption in ``frames[index]`` freed.

    A running sequence that decoded in that step and holds more blocks than a step before
    crossed a block boundary: it asked for a new block when none was free. Empty when the
    frames carry no block counts.
    """
    frame = frames[index]
    if not frame.preempted or not frame.held:
        return []
    before = dict(frames[index - 1].held) if index > 0 else {}
    now = dict(frame.held)
    return sorted(
        s for s in frame.decoded if s not in frame.preempted and now.get(s, 0) > before.get(s, 0)
    )


def describe_step(frames: Sequence[Frame], upto: int) -> str:
    """The caption under the picture after ``upto`` steps: queues, preemption and its cause."""
    n = len(frames)
    if upto == 0:
        return f"{n} steps recorded; press play or step"
    last = frames[upto - 1]
    text = (
        f"step {upto} of {n}: {len(last.running)} running, {len(last.waiting)} waiting, "
        f"{last.free_blocks}/{last.num_blocks} blocks free (watermark {last.watermark})"
    )
    if last.preempted:
        text += f"; preempted {', '.join(map(str, sorted(last.preempted)))}"
        cause = forcing_sequences(frames, upto - 1)
        if cause:
            text += f" for {', '.join(map(str, cause))} (needed a new block)"
    if last.waiting:
        text += f"; next to admit: {', '.join(map(str, last.waiting[:8]))}"
        text += " \u2026" if len(last.waiting) > 8 else ""
    return text


def _check_frames(frames: Sequence[Frame]) -> None:
    if not all(isinstance(f, Frame) for f in frames):
        raise TypeError("frames must be servelab.kv.sim.Frame objects (simulate(record=True))")


def render_timeline(
    frames: Sequence[Frame],
    *,
    upto: int | None = None,
    width: int = 720,
    title: str | None = None,
) -> str:
    """SVG of ``frames[:upto]`` (all by default), laid out for all of them."""
    _check_frames(frames)
    n = len(frames)
    if upto is None:
        upto = n
    if isinstance(upto, bool) or not isinstance(upto, int) or not 0 <= upto <= n:
        raise ValueError(f"upto must be an int in 0..{n}, got {upto!r}")
    if isinstance(width, bool) or not isinstance(width, int) or width < 200:
        raise ValueError(f"width must be an int of at least 200 pixels, got {width!r}")
    shown = frames[:upto]
    runs = states_by_sequence(frames)
    left, right, top = 56, 12, 40 if title else 22
    plot_w = width - left - right
    rows = len(runs)
    row_h = max(2.0, min(14.0, 360 / max(1, rows)))
    grid_h = rows * row_h
    budget = max((f.budget for f in frames), default=0)
    tokens_top = top + grid_h + 18
    tokens_h = 60 if budget else 0
    gauge_top = tokens_top + tokens_h + (18 if budget else 0)
    gauge_h = 70
    height = int(gauge_top + gauge_h + 44)
    col_w = plot_w / max(1, n)

    def x(i: float) -> float:
        return left + i * col_w

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    if title:
        out.append(
            f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>'
        )
    out.append(f'<text x="4" y="{top + 10}" fill="#555">seq</text>')
    held = dict(shown[-1].held) if shown else {}
    forced = set(forcing_sequences(frames, upto - 1)) if shown else set()
    for r, (sid, spans) in enumerate(runs.items()):
        y = top + r * row_h
        if row_h >= 9:
            label = f"{sid} \u00b7 {held[sid]}b" if sid in held else str(sid)
            weight = ' font-weight="bold"' if sid in forced else ""
            out.append(
                f'<text class="row-label" data-seq="{sid}" data-held="{held.get(sid, "")}" '
                f'x="{left - 4}" y="{y + row_h - 2:.1f}" text-anchor="end"{weight} '
                f'fill="#555">{label}</text>'
            )
        for state, a, b in spans:
            if a >= upto:
                continue
            b = min(b, upto)
            out.append(
                f'<rect class="{state}" data-seq="{sid}" data-from="{a}" data-to="{b}" '
                f'x="{x(a):.2f}" y="{y:.2f}" width="{max(0.5, (b - a) * col_w):.2f}" '
                f'height="{max(1.0, row_h - 1):.2f}" fill="{COLORS[state]}"/>'
            )
    out.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{grid_h:.1f}" '
        'fill="none" stroke="#999"/>'
    )

    if budget:
        out.extend(_token_panel(shown, left, plot_w, tokens_top, tokens_h, budget, col_w))

    # the free-block gauge
    num_blocks = frames[0].num_blocks if frames else 1
    watermark = frames[0].watermark if frames else 0

    def gy(free: float) -> float:
        return gauge_top + gauge_h - gauge_h * free / max(1, num_blocks)

    out.append(
        f'<rect x="{left}" y="{gauge_top}" width="{plot_w}" height="{gauge_h}" '
        'fill="#fafafa" stroke="#999"/>'
    )
    out.append(f'<text x="4" y="{gauge_top + 10}" fill="#555">free</text>')
    out.append(
        f'<text x="{left - 4}" y="{gauge_top + 9}" text-anchor="end" '
        f'fill="#555">{num_blocks}</text>'
    )
    out.append(
        f'<text x="{left - 4}" y="{gauge_top + gauge_h}" text-anchor="end" fill="#555">0</text>'
    )
    out.append(
        f'<line class="watermark" x1="{left}" x2="{left + plot_w}" '
        f'y1="{gy(watermark):.2f}" y2="{gy(watermark):.2f}" stroke="#e6550d" '
        'stroke-dasharray="4 3"/>'
    )
    if shown:
        points = " ".join(f"{x(i + 0.5):.2f},{gy(f.free_blocks):.2f}" for i, f in enumerate(shown))
        out.append(
            f'<polyline class="free-blocks" points="{points}" fill="none" '
            'stroke="#08519c" stroke-width="1.2"/>'
        )
        for i, f in enumerate(shown):
            if f.preempted:
                cause = " ".join(map(str, forcing_sequences(frames, i)))
                out.append(
                    f'<line class="preemption" data-step="{i + 1}" data-forced-by="{cause}" '
                    f'x1="{x(i + 0.5):.2f}" '
                    f'x2="{x(i + 0.5):.2f}" y1="{gauge_top + gauge_h}" '
                    f'y2="{gauge_top + gauge_h - 8}" stroke="{COLORS["preempted"]}"/>'
                )
        out.append(
            f'<line class="cursor" x1="{x(upto):.2f}" x2="{x(upto):.2f}" y1="{top}" '
            f'y2="{gauge_top + gauge_h}" stroke="#333" stroke-width="0.8"/>'
        )
    caption = describe_step(frames, upto)
    legend_y = gauge_top + gauge_h + 16
    lx = left
    for state, color in COLORS.items():
        out.append(f'<rect x="{lx}" y="{legend_y - 9}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{lx + 13}" y="{legend_y}">{state}</text>')
        lx += 90
    out.append(f'<text x="{lx}" y="{legend_y}" fill="#e6550d">- - watermark</text>')
    out.append(f'<text class="caption" x="{left}" y="{legend_y + 18}">{escape(caption)}</text>')
    out.append("</svg>")
    return scoped_ids("\n".join(out))


def _token_panel(
    shown: Sequence[Frame],
    left: float,
    plot_w: float,
    top: float,
    height: float,
    budget: int,
    col_w: float,
) -> list[str]:
    """Each step's decode (bottom) and prefill (top) tokens as one stacked bar, with the
    budget as a dashed line at 80% of the panel's height."""
    scale = 0.8 * height / budget
    bottom = top + height
    out = [
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{height}" fill="#fafafa" '
        'stroke="#999"/>',
        f'<text x="4" y="{top + 10}" fill="#555">tokens</text>',
        f'<line class="budget" data-budget="{budget}" x1="{left}" x2="{left + plot_w}" '
        f'y1="{bottom - budget * scale:.2f}" y2="{bottom - budget * scale:.2f}" '
        'stroke="#e6550d" stroke-dasharray="4 3"/>',
        f'<text x="{left - 4}" y="{bottom - budget * scale + 4:.2f}" text-anchor="end" '
        f'fill="#555">{budget}</text>',
    ]
    for i, f in enumerate(shown):
        x = left + i * col_w
        w = max(0.5, col_w - (1 if col_w > 3 else 0))
        y = bottom
        for cls, n in (("decode-tokens", f.decode_tokens), ("prefill-tokens", f.prefill_tokens)):
            if n:
                h = min(n * scale, y - top)
                y -= h
                color = COLORS["decode" if cls == "decode-tokens" else "prefill"]
                out.append(
                    f'<rect class="{cls}" data-step="{i}" data-tokens="{n}" x="{x:.2f}" '
                    f'y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" fill="{color}"/>'
                )
    return out


class TimelineReplay:
    """Reveal a recorded run step by step, with a slider, step buttons and a play button.

    It opens at the start (``position`` 0: nothing drawn yet), so a presenter plays the run
    forward; the slider's value is the number of steps shown, and the caption names the same
    step. Saved without a kernel, the output falls back to the picture of the whole run.
    """

    def __init__(self, frames: Sequence[Frame], *, width: int = 720, title: str | None = None):
        _check_frames(frames)
        self.frames = list(frames)
        self.width = width
        self.title = title
        self.position = 0

    def seek(self, position: int) -> None:
        if isinstance(position, bool) or not isinstance(position, int):
            raise TypeError(f"position must be an int, got {position!r}")
        if not 0 <= position <= len(self.frames):
            raise ValueError(f"position must be in 0..{len(self.frames)}, got {position}")
        self.position = position

    def svg(self) -> str:
        return render_timeline(self.frames, upto=self.position, width=self.width, title=self.title)

    def widget(self) -> Any:
        """Controls (play, back, step, a step slider) over the drawing."""
        import ipywidgets as widgets

        n = len(self.frames)
        picture = widgets.HTML(self.svg())
        slider = widgets.IntSlider(value=self.position, min=0, max=n, description="step")
        play = widgets.Play(value=self.position, min=0, max=n, interval=150)
        widgets.jslink((play, "value"), (slider, "value"))
        back = widgets.Button(description="\u25c0 back", layout=widgets.Layout(width="90px"))
        forward = widgets.Button(description="step \u25b6", layout=widgets.Layout(width="90px"))

        def redraw(change: Any = None) -> None:
            self.seek(slider.value)
            picture.value = self.svg()

        def nudge(delta: int) -> Any:
            return lambda _b: setattr(slider, "value", max(0, min(n, slider.value + delta)))

        slider.observe(redraw, names="value")
        back.on_click(nudge(-1))
        forward.on_click(nudge(+1))
        box = widgets.VBox([widgets.HBox([play, back, forward, slider]), picture])
        whole = render_timeline(self.frames, width=self.width, title=self.title)
        return with_static_picture(box, lambda: whole, alt="scheduler timeline")

    def _repr_html_(self) -> str:
        return self.svg()
