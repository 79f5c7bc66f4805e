"""Draw a block manager: the physical block grid, the block tables that point into it.

The grid has one cell per physical block. A cell shows the block id, its refcount, the
sequences that hold it and how many of its slots hold tokens; a shared block (refcount > 1)
is outlined, a free block shows its position in the free list (``#1`` is handed out next),
and a cached block that no sequence holds (prefix caching) is drawn as *evictable*. Below,
each sequence's block table is a row of cells, with a line from each entry to its block.
After an ``append_slot`` the written slot is marked, and a copy-on-write shows as an arrow
from the source block to the copy.

:func:`render_blocks` is a pure function of a :class:`BlockSnapshot` (taken with
:func:`snapshot` from any object with the inspection API) and returns SVG text, so the
picture shows in JupyterLab, static exports and on GitHub, and tests read it back with
``xml.etree``. :class:`BlockStepper` is an ipywidgets controller that applies a list of
operations to the learner's own manager one click at a time and redraws after each.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from servelab.viz.picture import Picture, mark_outline, scoped_ids, with_static_picture

__all__ = [
    "BlockSnapshot",
    "BlockStepper",
    "SnapshotError",
    "parse_operation",
    "render_blocks",
    "show_blocks",
    "snapshot",
]

PALETTE = ["#6baed6", "#fd8d3c", "#74c476", "#9e9ac8", "#e377c2", "#bcbd22", "#17becf", "#c49c94"]
FREE, EVICTABLE, SHARED, WRITE, COPY = "#f0f0f0", "#fff3b0", "#d62728", "#2ca02c", "#d62728"


class SnapshotError(ValueError):
    """A snapshot whose fields contradict each other (the picture would lie)."""


@dataclass(frozen=True)
class BlockSnapshot:
    """What the picture shows, copied out of a manager so later calls cannot change it."""

    num_blocks: int
    block_size: int
    tables: dict[int, list[int]]
    lens: dict[int, int]
    refcounts: list[int]
    free_list: list[int]
    evictable: list[int] = field(default_factory=list)
    slot: tuple[int, int, int | None] | None = None  # the last append_slot result
    caption: str = ""


def snapshot(bm: Any, slot: Sequence[Any] | None = None, caption: str = "") -> BlockSnapshot:
    """Copy the inspection API of ``bm`` (a block manager, learner's or reference)."""
    seqs = list(bm.sequences())
    evictable = list(bm.evictable()) if hasattr(bm, "evictable") else []
    the_slot = None
    if slot is not None:
        block, offset, src = slot
        the_slot = (int(block), int(offset), None if src is None else int(src))
    return BlockSnapshot(
        num_blocks=int(bm.num_blocks),
        block_size=int(bm.block_size),
        tables={s: list(bm.block_table(s)) for s in seqs},
        lens={s: int(bm.seq_len(s)) for s in seqs},
        refcounts=[int(bm.refcount(b)) for b in range(bm.num_blocks)],
        free_list=list(bm.free_list()),
        evictable=evictable,
        slot=the_slot,
        caption=caption,
    )


def _validate(state: BlockSnapshot) -> None:
    n = state.num_blocks
    if n < 1 or state.block_size < 1:
        raise SnapshotError("num_blocks and block_size must be positive")
    if len(state.refcounts) != n:
        raise SnapshotError(f"{len(state.refcounts)} refcounts for {n} blocks")
    for b in [*state.free_list, *(b for t in state.tables.values() for b in t)]:
        if not 0 <= b < n:
            raise SnapshotError(f"block {b} is outside range({n})")
    if set(state.tables) != set(state.lens):
        raise SnapshotError("every sequence needs both a table and a length")


def _fill(state: BlockSnapshot) -> list[int]:
    """Slots that hold a token in each block (the fullest holder's view)."""
    fill = [0] * state.num_blocks
    size = state.block_size
    for seq, table in state.tables.items():
        length = state.lens[seq]
        for i, b in enumerate(table):
            fill[b] = max(fill[b], min(size, max(0, length - i * size)))
    return fill


def render_blocks(
    state: BlockSnapshot | Any,
    *,
    per_row: int = 12,
    cell: int = 58,
    title: str | None = None,
    marked: Collection[int] = (),
    marked_seqs: Collection[Hashable] = (),
) -> str:
    """SVG of the block grid and the block tables. ``state`` is a snapshot or a manager.

    ``marked`` blocks and ``marked_seqs`` table rows get the class ``sl-differs`` and a dashed
    red outline: a grade's picture marks where this state differs from the reference's.

    Text is 12 px so the picture reads at 100 % zoom. Each table entry is joined to its block
    by a line in the sequence's colour that ends at the sequence's own point along the block's
    bottom edge, so lines of different sequences into one shared block never lie on top of
    each other. A legend under the tables explains borders, fill bars and marks.
    """
    snap = state if isinstance(state, BlockSnapshot) else snapshot(state)
    _validate(snap)
    n, size = snap.num_blocks, snap.block_size
    per_row = max(1, min(per_row, n))
    gap, pad = 8, 12
    holders: dict[int, list[int]] = {b: [] for b in range(n)}
    for seq, table in snap.tables.items():
        for b in table:
            holders[b].append(seq)
    color = {seq: PALETTE[i % len(PALETTE)] for i, seq in enumerate(sorted(snap.tables))}
    free_pos = {b: i + 1 for i, b in enumerate(snap.free_list)}
    evictable = set(snap.evictable)
    fill = _fill(snap)
    grid_rows = -(-n // per_row)
    head = 22 if (title or snap.caption) else 0
    grid_top = pad + head + 34  # room for the label and a copy-on-write arrow
    tables_top = grid_top + grid_rows * (cell + gap) + 24
    row_h = 26
    width = pad * 2 + max(
        per_row * (cell + gap),
        105 + max((len(t) for t in snap.tables.values()), default=0) * (row_h + 4),
        _LEGEND_WIDTH,
    )
    legend_top = tables_top + max(1, len(snap.tables)) * (row_h + 6) + 8
    height = legend_top + 2 * _LEGEND_LINE + pad
    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
        f'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{COPY}"/>'
        "</marker></defs>",
    ]
    heading = " · ".join(x for x in (title, snap.caption) if x)
    if heading:
        out.append(f'<text x="{pad}" y="{pad + 12}" font-size="13">{escape(heading)}</text>')
    out.append(
        f'<text x="{pad}" y="{grid_top - 22}" fill="#555">physical blocks '
        f"({len(snap.free_list)} free of {n}; #k = k-th to be allocated)</text>"
    )
    centers: dict[int, tuple[float, float]] = {}
    for b in range(n):
        x = pad + (b % per_row) * (cell + gap)
        y = grid_top + (b // per_row) * (cell + gap)
        centers[b] = (x + cell / 2, y + cell)
        ref, owners = snap.refcounts[b], holders[b]
        if owners:
            fill_color = color[owners[0]]
            kind = "shared" if ref > 1 else "used"
        elif b in evictable:
            fill_color, kind = EVICTABLE, "evictable"
        else:
            fill_color, kind = FREE, "free"
        stroke, width_px = (SHARED, 2.5) if ref > 1 else ("#888", 1)
        differs = b in marked
        out.append(
            f'<g class="block{" sl-differs" if differs else ""}" data-block="{b}" '
            f'data-refcount="{ref}" data-kind="{kind}" '
            f'data-holders="{" ".join(map(str, owners))}">'
            f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" rx="3" fill="{fill_color}" '
            f'stroke="{stroke}" stroke-width="{width_px}"/>'
        )
        if differs:
            out.append(mark_outline(x - 3, y - 3, cell + 6, cell + 6))
        slot_w = (cell - 6) / size
        for j in range(size):
            shade = "#333" if j < fill[b] else "#ffffff"
            out.append(
                f'<rect x="{x + 3 + j * slot_w:.1f}" y="{y + cell - 9}" '
                f'width="{max(slot_w - 1, 1):.1f}" height="6" fill="{shade}" opacity="0.55"/>'
            )
        out.append(f'<text x="{x + 3}" y="{y + 13}" font-weight="bold">{b}</text>')
        label = f"rc {ref}" if owners else (f"#{free_pos[b]}" if b in free_pos else "")
        if ref and not owners:  # a count that no table explains: shown, not hidden
            label = f"{label} rc {ref}".strip()
        if b in evictable:
            label = f"cached #{free_pos.get(b, '?')}"
        out.append(f'<text x="{x + 3}" y="{y + 27}">{escape(label)}</text>')
        if owners:
            names = ",".join(f"s{s}" for s in owners)
            out.append(f'<text x="{x + 3}" y="{y + 41}" fill="#222">{escape(names)}</text>')
        out.append("</g>")
    if snap.slot is not None:
        block, offset, src = snap.slot
        if 0 <= block < n:
            x = pad + (block % per_row) * (cell + gap)
            y = grid_top + (block // per_row) * (cell + gap)
            slot_w = (cell - 6) / size
            out.append(
                f'<rect class="written-slot" data-block="{block}" data-offset="{offset}" '
                f'x="{x + 2 + offset * slot_w:.1f}" y="{y + cell - 10}" width="{slot_w:.1f}" '
                f'height="8" fill="none" stroke="{WRITE}" stroke-width="2"/>'
            )
        if src is not None and 0 <= src < n and 0 <= block < n:
            (x1, y1), (x2, y2) = centers[src], centers[block]
            out.append(
                f'<path class="cow-copy" data-src="{src}" data-dst="{block}" '
                f'd="M{x1:.1f},{y1 - cell + 2:.1f} Q{(x1 + x2) / 2:.1f},{y1 - cell - 16:.1f} '
                f'{x2:.1f},{y2 - cell + 2:.1f}" fill="none" stroke="{COPY}" stroke-width="1.5" '
                'stroke-dasharray="4 2" marker-end="url(#arrow)"/>'
            )
    out.append(f'<text x="{pad}" y="{tables_top - 6}" fill="#555">block tables</text>')
    order = sorted(snap.tables)
    for r, seq in enumerate(order):
        y = tables_top + r * (row_h + 6)
        # this sequence's own landing point along every block's bottom edge
        land = (r + 1) / (len(order) + 1) - 0.5
        differs = seq in marked_seqs
        out.append(
            f'<g class="table{" sl-differs" if differs else ""}" data-seq="{seq}" '
            f'data-len="{snap.lens[seq]}">'
            f'<text x="{pad}" y="{y + 16}">seq {seq} ({snap.lens[seq]} tok)</text>'
        )
        if differs:
            out.append(
                mark_outline(pad - 4, y - 3, 109 + len(snap.tables[seq]) * (row_h + 4), row_h + 6)
            )
        for i, b in enumerate(snap.tables[seq]):
            x = pad + 105 + i * (row_h + 4)
            out.append(
                f'<rect x="{x}" y="{y}" width="{row_h}" height="{row_h}" fill="{color[seq]}" '
                f'stroke="#555"/><text x="{x + 4}" y="{y + 17}">{b}</text>'
            )
            if n <= 64:
                cx, cy = centers[b]
                cx += land * (cell - 8)
                out.append(
                    f'<line class="link" data-seq="{seq}" data-block="{b}" '
                    f'x1="{x + row_h / 2}" y1="{y}" x2="{cx:.1f}" y2="{cy:.1f}" '
                    f'stroke="{color[seq]}" stroke-width="1.5" stroke-opacity="0.7"/>'
                    f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.5" fill="{color[seq]}"/>'
                )
        out.append("</g>")
    out.extend(_legend(pad, legend_top))
    out.append("</svg>")
    return scoped_ids("".join(out))


_LEGEND_LINE = 20
_LEGEND_WIDTH = 480


def _legend(x: int, top: int) -> list[str]:
    """Two lines that name every mark the grid uses."""
    y1, y2 = top + 12, top + 12 + _LEGEND_LINE
    return [
        '<g class="legend">',
        f'<rect x="{x}" y="{y1 - 10}" width="12" height="12" fill="white" stroke="{SHARED}" '
        'stroke-width="2.5"/>',
        f'<text x="{x + 17}" y="{y1}">red border: shared (refcount &gt; 1)</text>',
        f'<rect x="{x + 250}" y="{y1 - 9}" width="12" height="8" fill="none" stroke="{WRITE}" '
        'stroke-width="2"/>',
        f'<text x="{x + 267}" y="{y1}">green slot: the token just written</text>',
        f'<rect x="{x}" y="{y2 - 8}" width="5" height="6" fill="#333" opacity="0.55"/>'
        f'<rect x="{x + 6}" y="{y2 - 8}" width="5" height="6" fill="#ffffff" stroke="#bbb"/>',
        f'<text x="{x + 17}" y="{y2}">fill bar: slots holding tokens</text>',
        f'<rect x="{x + 250}" y="{y2 - 10}" width="12" height="12" fill="{EVICTABLE}" '
        'stroke="#888"/>',
        f'<text x="{x + 267}" y="{y2}">yellow: free but cached (prefix)</text>',
        "</g>",
    ]


def show_blocks(state: BlockSnapshot | Any, **options: Any) -> Any:
    """Display the picture in a notebook (a plain SVG output, kept in static exports)."""
    display: Any = importlib.import_module("IPython.display")
    picture = Picture(render_blocks(state, **options), alt="block manager")
    display.display(picture)
    return picture


Operation = tuple[Any, ...]
_ARITY = {"allocate": 2, "append_slot": 1, "fork": 2, "free_seq": 1}


def parse_operation(op: Operation | str) -> Operation:
    """``("fork", 0, 1)`` or ``"fork(0, 1)"`` -> a checked tuple ``(name, *args)``."""
    if isinstance(op, str):
        name, _, rest = op.partition("(")
        args = [a.strip() for a in rest.rstrip(")").split(",") if a.strip()]
        try:
            op = (name.strip(), *(int(a) for a in args))
        except ValueError:
            raise ValueError(f"operation arguments must be ints: {op!r}") from None
    if not op or op[0] not in _ARITY:
        raise ValueError(f"unknown operation {op!r}; use one of {sorted(_ARITY)}")
    name = op[0]
    if name == "allocate" and len(op) == 3 and isinstance(op[2], (list, tuple)):
        return (name, op[1], list(op[2]))  # prefix caching: allocate(seq, token_ids)
    if name == "append_slot" and len(op) == 3:
        return tuple(op)  # prefix caching: append_slot(seq, token_id)
    if len(op) != _ARITY[name] + 1:
        raise ValueError(f"{name} takes {_ARITY[name]} argument(s): {op!r}")
    return tuple(op)


def _code(op: Operation) -> str:
    return f"bm.{op[0]}({', '.join(repr(a) for a in op[1:])})"


class BlockStepper:
    """Step a list of operations through a block manager, redrawing after each one.

    ``factory()`` builds a fresh manager (the learner's own class); ``ops`` are tuples or
    strings such as ``"fork(0, 1)"``. ``step()`` applies the next operation and returns the
    line it logged; an operation that raises is logged with its error and skipped, so a
    failed copy-on-write can be watched too. ``seek(n)`` shows the state after the first
    ``n`` operations (going back replays from a fresh manager). ``widget()`` returns the
    ipywidgets view: play, back, step, reset and a slider over the positions.
    """

    def __init__(
        self, factory: Callable[[], Any], ops: Sequence[Operation | str], **render_options: Any
    ) -> None:
        if not callable(factory):
            raise TypeError("factory must be a function that returns a fresh block manager")
        self.factory = factory
        self.ops = [parse_operation(op) for op in ops]
        self.render_options = render_options
        self.bm: Any = None
        self.position = 0
        self.log: list[str] = []
        self.frames: list[BlockSnapshot] = []
        self._parts: Any = None
        self.reset()

    def reset(self) -> None:
        """Start over with a fresh manager."""
        self.bm = self.factory()
        self.position = 0
        self.log = []
        self.frames = [snapshot(self.bm, caption="start")]
        self._redraw()

    @property
    def done(self) -> bool:
        return self.position >= len(self.ops)

    def _apply(self, op: Operation) -> str:
        code = _code(op)
        slot = None
        try:
            result = getattr(self.bm, op[0])(*op[1:])
        except NotImplementedError:
            raise  # an unfinished exercise says so, instead of drawing a picture of nothing
        except Exception as exc:  # shown, not raised: watching a failure is the point
            line = f"{code} -> {type(exc).__name__}: {exc}"
        else:
            if op[0] == "append_slot":
                slot = result
                block, offset, src = result
                line = f"{code} -> block {block}, offset {offset}"
                line += f", copy block {src} first" if src is not None else ""
            elif result is not None:
                line = f"{code} -> {result!r}"
            else:
                line = code
        self.frames.append(snapshot(self.bm, slot=slot, caption=f"{self.position + 1}. {line}"))
        return line

    def seek(self, position: int) -> None:
        """Show the state after the first ``position`` operations."""
        if isinstance(position, bool) or not isinstance(position, int):
            raise TypeError(f"position must be an int, got {position!r}")
        if not 0 <= position <= len(self.ops):
            raise ValueError(f"position must be in 0..{len(self.ops)}, got {position}")
        if position < self.position:
            self.bm, self.position, self.log = self.factory(), 0, []
            self.frames = [snapshot(self.bm, caption="start")]
        while self.position < position:
            self.log.append(self._apply(self.ops[self.position]))
            self.position += 1
        self._redraw()

    def step(self) -> str:
        """Apply the next operation; returns its log line ('' when all are done)."""
        if self.done:
            return ""
        self.seek(self.position + 1)
        return self.log[-1]

    def back(self) -> None:
        """Go back one operation (replayed from a fresh manager)."""
        self.seek(max(0, self.position - 1))

    def run(self) -> list[str]:
        """Apply every remaining operation."""
        return [self.step() for _ in range(len(self.ops) - self.position)]

    def svg(self) -> str:
        return render_blocks(self.frames[-1], **self.render_options)

    # ------------------------------------------------------------------ widget
    def widget(self) -> Any:
        """Controls (play, back, step, reset, a position slider) over the picture and the log."""
        widgets: Any = importlib.import_module("ipywidgets")
        n = len(self.ops)
        picture = widgets.HTML()
        log = widgets.HTML()
        slider = widgets.IntSlider(value=self.position, min=0, max=n, description="operation")
        play = widgets.Play(value=self.position, min=0, max=n, interval=1200)
        widgets.jslink((play, "value"), (slider, "value"))
        back = widgets.Button(description="\u25c0 back", layout=widgets.Layout(width="90px"))
        forward = widgets.Button(description="step \u25b6", layout=widgets.Layout(width="90px"))
        again = widgets.Button(description="reset", layout=widgets.Layout(width="70px"))

        def nudge(delta: int) -> Callable[[Any], None]:
            return lambda _b: setattr(slider, "value", max(0, min(n, slider.value + delta)))

        back.on_click(nudge(-1))
        forward.on_click(nudge(+1))
        again.on_click(lambda _b: setattr(slider, "value", 0))
        slider.observe(lambda change: self.seek(change["new"]), names="value")
        self._parts = (picture, log, slider)
        self._redraw()
        box = widgets.VBox([widgets.HBox([play, back, forward, again, slider]), picture, log])
        return with_static_picture(box, self._final_svg, alt="block manager replay")

    def _final_svg(self) -> str:
        """The state after every operation, on a fresh manager (this one stays where it is)."""
        whole = BlockStepper(self.factory, self.ops, **self.render_options)
        try:
            whole.run()
        except NotImplementedError:  # an unfinished exercise: show where it stands
            return self.svg()
        return whole.svg()

    def _redraw(self) -> None:
        if self._parts is None:
            return
        picture, log, slider = self._parts
        picture.value = self.svg()
        rows = "".join(f"<li>{escape(line)}</li>" for line in self.log)
        style = "font-family:monospace;font-size:12px;line-height:1.35;margin:0"
        log.value = f"<ol style='{style}'>{rows}</ol>"
        if slider.value != self.position:
            slider.value = self.position

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget()._repr_mimebundle_(**kwargs)
