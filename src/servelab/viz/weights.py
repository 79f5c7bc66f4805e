"""Draw a weight cache: the byte budget as a bar, entries to scale, pins and next victims.

The drawing is a pure function of the cache's state (``render_cache(state) -> SVG text``), so
it shows the same in JupyterLab, in a static export and on GitHub, and a test can read it back
with ``xml.etree``. It reads any cache through the small inspection API that the exercise
skeleton provides and :class:`servelab.weights.WeightCache` shares:

``capacity`` and ``used`` (int bytes), ``keys()`` (resident keys, least recently used first,
pinned ones included), ``size_of(key)``, ``pin_count(key)`` and ``eviction_order()`` (unpinned
keys, next victim first). A plain snapshot dict works as well (see :class:`CacheSnapshot`).

A learner's cache may be wrong, and then the picture should show it rather than refuse:
a well-formed but inconsistent state (used bytes that disagree with the entries, more used
than the budget, a pinned key among the victims) is drawn with a warning line for each
problem. Only a malformed state (missing fields, wrong types) raises :class:`SnapshotError`.

:class:`CacheReplay` adds controls: it replays a list of operations against a fresh cache of
the learner's own class and redraws after each one, so the eviction loop can be watched.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any, Protocol, TypedDict, runtime_checkable

from servelab.units import format_bytes
from servelab.viz.picture import Picture, mark_outline, scoped_ids, with_static_picture

__all__ = [
    "CacheLike",
    "CacheReplay",
    "CacheSnapshot",
    "EntrySnapshot",
    "Operation",
    "Outcome",
    "SnapshotError",
    "apply_operation",
    "render_cache",
    "show_cache",
    "snapshot",
]


class SnapshotError(ValueError):
    """The state handed to the renderer is malformed (a missing field or a wrong type)."""


@runtime_checkable
class CacheLike(Protocol):
    """The inspection API the renderer reads; none of it may change recency."""

    @property
    def capacity(self) -> int: ...

    @property
    def used(self) -> int: ...

    def keys(self) -> Any: ...

    def size_of(self, key: Any) -> int: ...

    def pin_count(self, key: Any) -> int: ...

    def eviction_order(self) -> Any: ...


class EntrySnapshot(TypedDict):
    key: Hashable
    size: int
    pins: int


class CacheSnapshot(TypedDict):
    """A cache's state as plain data; ``entries`` are least recently used first."""

    capacity: int
    used: int
    entries: list[EntrySnapshot]
    eviction_order: list[Hashable]


# --- reading a state -----------------------------------------------------------------------


def snapshot(cache: CacheLike) -> CacheSnapshot:
    """Read a cache through its inspection API into a :class:`CacheSnapshot`."""
    missing = [name for name in _INSPECTION_API if not hasattr(cache, name)]
    if missing:
        raise SnapshotError(
            f"{type(cache).__name__} lacks {', '.join(missing)}: the renderer reads the "
            f"inspection API ({', '.join(_INSPECTION_API)})"
        )
    keys = list(cache.keys())
    return _validated(
        {
            "capacity": cache.capacity,
            "used": cache.used,
            "entries": [
                {"key": k, "size": cache.size_of(k), "pins": cache.pin_count(k)} for k in keys
            ],
            "eviction_order": list(cache.eviction_order()),
        }
    )


_INSPECTION_API = ("capacity", "used", "keys", "size_of", "pin_count", "eviction_order")


def _as_snapshot(state: CacheLike | Mapping[str, Any]) -> CacheSnapshot:
    if isinstance(state, Mapping):
        return _validated(state)
    return snapshot(state)


def _whole_bytes(what: str, value: object, *, positive: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SnapshotError(f"{what} must be an int number of bytes, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise SnapshotError(f"{what} must be {'positive' if positive else '>= 0'}, got {value}")
    return value


def _validated(state: Mapping[str, Any]) -> CacheSnapshot:
    """Check the shape of a snapshot dict; fill ``used`` and ``eviction_order`` if absent."""
    if "capacity" not in state or "entries" not in state:
        raise SnapshotError(
            "a snapshot needs 'capacity' and 'entries' (a list of {'key', 'size', 'pins'}, "
            "least recently used first)"
        )
    capacity = _whole_bytes("capacity", state["capacity"], positive=True)
    entries: list[EntrySnapshot] = []
    seen: set[Hashable] = set()
    for index, raw in enumerate(state["entries"]):
        if not isinstance(raw, Mapping) or "key" not in raw or "size" not in raw:
            raise SnapshotError(f"entries[{index}] must be a dict with 'key' and 'size'")
        key = raw["key"]
        if not isinstance(key, Hashable) or key in seen:
            raise SnapshotError(f"entries[{index}]: key {key!r} is unhashable or repeated")
        seen.add(key)
        size = _whole_bytes(f"size of {key!r}", raw["size"])
        pins = raw.get("pins", 0)
        if isinstance(pins, bool) or not isinstance(pins, int):
            raise SnapshotError(f"pins of {key!r} must be an int, got {pins!r}")
        entries.append({"key": key, "size": size, "pins": pins})
    total = sum(e["size"] for e in entries)
    used = _whole_bytes("used", state.get("used", total))
    order = state.get("eviction_order")
    if order is None:
        order = [e["key"] for e in entries if e["pins"] <= 0]
    elif isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
        raise SnapshotError(f"eviction_order must be a list of keys, got {order!r}")
    return {"capacity": capacity, "used": used, "entries": entries, "eviction_order": list(order)}


def _problems(state: CacheSnapshot) -> list[str]:
    """What is inconsistent in a well-formed state: each line names one broken rule."""
    problems = []
    total = sum(e["size"] for e in state["entries"])
    if state["used"] != total:
        problems.append(
            f"used says {format_bytes(state['used'])} but the entries add up to "
            f"{format_bytes(total)}"
        )
    if max(total, state["used"]) > state["capacity"]:
        problems.append(
            f"over budget: {format_bytes(max(total, state['used']))} held in a "
            f"{format_bytes(state['capacity'])} cache"
        )
    pins = {e["key"]: e["pins"] for e in state["entries"]}
    for key in state["eviction_order"]:
        if key not in pins:
            problems.append(f"eviction_order() names {key!r}, which is not resident")
        elif pins[key] > 0:
            problems.append(f"{key!r} is pinned but listed as a victim")
        elif pins[key] < 0:
            problems.append(f"{key!r} has a negative pin count ({pins[key]})")
    if len(set(state["eviction_order"])) != len(state["eviction_order"]):
        problems.append("eviction_order() lists a key twice")
    unpinned = [k for k, p in pins.items() if p == 0]
    left_out = [k for k in unpinned if k not in set(state["eviction_order"])]
    if left_out:
        problems.append(f"unpinned but never a victim: {', '.join(map(repr, left_out))}")
    return problems


# --- drawing -------------------------------------------------------------------------------

_MARGIN = 12
_BAR_Y = 58
_BAR_HEIGHT = 46
_LINE = 17
_CHAR_WIDTH = 6.6  # average width of one character at the label font size
_COLOURS = {
    "entry": "#9ecae1",
    "entry-stroke": "#3182bd",
    "pinned": "#fdd0a2",
    "pinned-stroke": "#d94801",
    "free": "#f7f7f7",
    "rank": "#cb181d",
    "warning": "#cb181d",
    "text": "#252525",
    "muted": "#737373",
    "touched": "#31a354",
}
_GHOST_HEIGHT = 20
_GHOST_ROW = _GHOST_HEIGHT + 22


def _draw_ghosts(parts: list[str], ghosts: list[tuple[Hashable, int]], scale: float, y: int) -> int:
    """Dashed outlines, to scale, of the entries the last put evicted; returns the next y."""
    parts.append(
        f'<text class="ghost-label" x="{_MARGIN}" y="{y}" fill="{_COLOURS["muted"]}">'
        "evicted by the last put, to scale:</text>"
    )
    x, top = float(_MARGIN), y + 6
    for key, size in ghosts:
        w = size * scale
        label = f"{key} {format_bytes(size)}"
        parts.append(
            f'<rect class="ghost" data-key="{_attr(key)}" data-size="{size}" x="{x:.2f}" '
            f'y="{top:.2f}" width="{w:.2f}" height="{_GHOST_HEIGHT}" fill="none" '
            f'stroke="{_COLOURS["muted"]}" stroke-dasharray="3 2">'
            f"<title>{escape(label)}</title></rect>"
        )
        if _fits(label, w):
            parts.append(
                f'<text class="ghost-key" x="{x + w / 2:.2f}" y="{top + _GHOST_HEIGHT - 6:.2f}" '
                f'text-anchor="middle" fill="{_COLOURS["muted"]}">{escape(label)}</text>'
            )
        x += w
    return y + _GHOST_ROW


def _fits(text: str, width: float) -> bool:
    return len(text) * _CHAR_WIDTH + 6 <= width


def _clip(text: str, width: float) -> str:
    """Shorten ``text`` with an ellipsis so that it fits ``width`` pixels."""
    room = max(int(width / _CHAR_WIDTH), 4)
    return text if len(text) <= room else text[: room - 1].rstrip() + "\u2026"


def _attr(value: object) -> str:
    return escape(str(value), quote=True)


def render_cache(
    state: CacheLike | Mapping[str, Any],
    *,
    width: int = 640,
    title: str | None = None,
    caption: str | None = None,
    evicted: Sequence[tuple[Hashable, int]] = (),
    touched: Hashable | None = None,
    counters: Mapping[str, int] | None = None,
    warnings: Sequence[str] = (),
    marked: Collection[Hashable] = (),
) -> str:
    """Draw a cache (or a snapshot dict) as an SVG document, returned as text.

    Left to right: entries from least to most recently used, each as wide as its share of the
    budget, then the free bytes. Pinned entries are hatched and labelled with their pin count;
    each unpinned entry carries its rank in the eviction order (1 = next victim).

    A replay adds what the last operation did: ``evicted`` (key, size) pairs are drawn as
    dashed ghosts to scale under the bar, so "evict until it fits" shows how much room the
    loop made; ``touched`` outlines the key a ``get`` just read; ``counters`` (for example
    ``{"hits": 3, "misses": 1}``) are printed beside the summary. Each of ``warnings`` is
    drawn as a warning line, like the state's own problems (a replay names a method that is
    not written yet this way, so a half-built cache never passes for a finished one).
    ``marked`` entries get the class ``sl-differs`` and a dashed red outline (a grade's
    picture marks where this state differs from the reference's).
    """
    if isinstance(width, bool) or not isinstance(width, int) or width < 200:
        raise ValueError(f"width must be an int of at least 200 pixels, got {width!r}")
    data = _as_snapshot(state)
    problems = _problems(data)
    capacity, entries = data["capacity"], data["entries"]
    total = sum(e["size"] for e in entries)
    bar_width = width - 2 * _MARGIN
    scale = bar_width / max(capacity, total)
    budget_width = capacity * scale
    ranks = {key: n for n, key in enumerate(data["eviction_order"], start=1)}
    pinned = [e for e in entries if e["pins"] > 0]

    notes = ([caption] if caption else []) + list(warnings) + problems
    ghosts = [(key, size) for key, size in evicted if isinstance(size, int) and size > 0]
    ghost_room = _GHOST_ROW if ghosts else 0
    height = _BAR_Y + _BAR_HEIGHT + 46 + ghost_room + _LINE * len(notes)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" '
        f'class="weight-cache">',
        '<defs><pattern id="pinned-hatch" width="6" height="6" '
        'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        f'<rect width="6" height="6" fill="{_COLOURS["pinned"]}"/>'
        f'<line x1="0" y1="0" x2="0" y2="6" stroke="{_COLOURS["pinned-stroke"]}" '
        'stroke-width="1.5" stroke-opacity="0.45"/></pattern></defs>',
        f'<text class="title" x="{_MARGIN}" y="16" font-size="13" font-weight="bold" '
        f'fill="{_COLOURS["text"]}">{escape(title or "weight cache")}</text>',
        f'<text class="axis" x="{_MARGIN}" y="{_BAR_Y - 24}" fill="{_COLOURS["muted"]}">'
        "least recently used \u2192 most recently used</text>",
        f'<text class="budget-label" x="{_MARGIN + budget_width:.2f}" y="{_BAR_Y - 24}" '
        f'text-anchor="end" fill="{_COLOURS["muted"]}">'
        f"budget {escape(format_bytes(capacity))}</text>",
    ]
    x = float(_MARGIN)
    for entry in entries:
        key, size, pins = entry["key"], entry["size"], entry["pins"]
        w = size * scale
        cls = ("entry pinned" if pins > 0 else "entry") + (" sl-differs" if key in marked else "")
        fill = "url(#pinned-hatch)" if pins > 0 else _COLOURS["entry"]
        stroke = _COLOURS["pinned-stroke"] if pins > 0 else _COLOURS["entry-stroke"]
        tooltip = f"{key}: {format_bytes(size)}" + (f", pinned \u00d7{pins}" if pins else "")
        parts.append(
            f'<rect class="{cls}" data-key="{_attr(key)}" data-size="{size}" '
            f'data-pins="{pins}" x="{x:.2f}" y="{_BAR_Y}" width="{w:.2f}" '
            f'height="{_BAR_HEIGHT}" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="{2 if pins > 0 else 1}"><title>{escape(tooltip)}</title></rect>'
        )
        middle = x + w / 2
        lines = [str(key), format_bytes(size)]
        if pins > 0:
            lines.append(f"pinned \u00d7{pins}")
        lines = [line for line in lines if _fits(line, w)]
        top = _BAR_Y + _BAR_HEIGHT / 2 - (len(lines) - 1) * 6.5 + 4
        for n, line in enumerate(lines):
            cls = "pin-label" if line.startswith("pinned") else "entry-label"
            parts.append(
                f'<text class="{cls}" data-key="{_attr(key)}" x="{middle:.2f}" '
                f'y="{top + 13 * n:.2f}" text-anchor="middle" fill="{_COLOURS["text"]}">'
                f"{escape(line)}</text>"
            )
        if key in marked:
            parts.append(mark_outline(x + 1, _BAR_Y - 20, max(w - 2, 1), _BAR_HEIGHT + 24))
        if touched is not None and key == touched:
            parts.append(
                f'<rect class="touched" data-key="{_attr(key)}" x="{x + 1.5:.2f}" '
                f'y="{_BAR_Y + 1.5}" width="{max(w - 3, 1):.2f}" height="{_BAR_HEIGHT - 3}" '
                f'fill="none" stroke="{_COLOURS["touched"]}" stroke-width="3">'
                f"<title>{escape(f'{key}: read by the last get')}</title></rect>"
            )
        if key in ranks:
            parts.append(
                f'<g class="victim" data-key="{_attr(key)}" data-rank="{ranks[key]}">'
                f'<circle cx="{middle:.2f}" cy="{_BAR_Y - 10}" r="8" '
                f'fill="{_COLOURS["rank"]}"/>'
                f'<text class="rank" x="{middle:.2f}" y="{_BAR_Y - 6}" text-anchor="middle" '
                f'fill="white" font-weight="bold">{ranks[key]}</text></g>'
            )
        x += w
    free = capacity - total
    if free > 0:
        w = free * scale
        parts.append(
            f'<rect class="free" data-size="{free}" x="{x:.2f}" y="{_BAR_Y}" width="{w:.2f}" '
            f'height="{_BAR_HEIGHT}" fill="{_COLOURS["free"]}" stroke="{_COLOURS["muted"]}" '
            f'stroke-dasharray="4 3"><title>free: {format_bytes(free)}</title></rect>'
        )
        label = f"free {format_bytes(free)}"
        if _fits(label, w):
            parts.append(
                f'<text class="free-label" x="{x + w / 2:.2f}" '
                f'y="{_BAR_Y + _BAR_HEIGHT / 2 + 4}" text-anchor="middle" '
                f'fill="{_COLOURS["muted"]}">{escape(label)}</text>'
            )
    parts.append(
        f'<rect class="budget" x="{_MARGIN}" y="{_BAR_Y}" width="{budget_width:.2f}" '
        f'height="{_BAR_HEIGHT}" fill="none" stroke="{_COLOURS["text"]}" stroke-width="1.5"/>'
    )
    summary = (
        f"used {format_bytes(data['used'])} of {format_bytes(capacity)} \u00b7 "
        f"free {format_bytes(max(capacity - data['used'], 0))} \u00b7 {len(entries)} "
        f"{'entry' if len(entries) == 1 else 'entries'} \u00b7 {len(pinned)} pinned"
    )
    y = _BAR_Y + _BAR_HEIGHT + 20
    if ghosts:
        y = _draw_ghosts(parts, ghosts, scale, y)
    parts.append(
        f'<text class="summary" x="{_MARGIN}" y="{y}" fill="{_COLOURS["text"]}">'
        f"{escape(summary)}</text>"
    )
    if counters:
        tally = " \u00b7 ".join(f"{name} {value}" for name, value in counters.items())
        parts.append(
            f'<text class="counters" x="{_MARGIN + bar_width}" y="{y}" text-anchor="end" '
            f'font-weight="bold" fill="{_COLOURS["text"]}">{escape(tally)}</text>'
        )
    y += 6
    legend = "numbered: next victims, in eviction order \u00b7 hatched: pinned, never a victim"
    if touched is not None:
        legend += " \u00b7 green outline: read by the last get"
    parts.append(
        f'<text class="legend" x="{_MARGIN}" y="{y + 14}" fill="{_COLOURS["muted"]}">'
        f"{escape(legend)}</text>"
    )
    for note in notes:
        y += _LINE
        is_caption = caption is not None and note is caption
        cls, colour = ("caption", "text") if is_caption else ("warning", "warning")
        text = note if is_caption else "\u26a0 " + note
        parts.append(
            f'<text class="{cls}" x="{_MARGIN}" y="{y + 14}" fill="{_COLOURS[colour]}">'
            f"<title>{escape(text)}</title>{escape(_clip(text, bar_width))}</text>"
        )
    parts.append("</svg>")
    return scoped_ids("".join(parts))


def show_cache(state: CacheLike | Mapping[str, Any], **options: Any) -> Any:
    """The drawing as an IPython display object: the last line of a cell shows it."""
    return Picture(render_cache(state, **options), alt="weight cache")


# --- stepping through operations -----------------------------------------------------------

Operation = tuple[Any, ...]
"""``("put", key, size)``, ``("get", key)``, ``("pin", key)`` or ``("unpin", key)``."""

_ARITY = {"put": 2, "get": 1, "pin": 1, "unpin": 1}


def _check_operation(index: int, op: object) -> Operation:
    if not isinstance(op, tuple) or not op or op[0] not in _ARITY:
        raise ValueError(
            f"operations[{index}] = {op!r}: expected ('put', key, size), ('get', key), "
            f"('pin', key) or ('unpin', key)"
        )
    if len(op) != 1 + _ARITY[op[0]]:
        raise ValueError(f"operations[{index}] = {op!r}: {op[0]} takes {_ARITY[op[0]]} argument(s)")
    return op


def _describe(op: Operation) -> str:
    if op[0] == "put":
        return f"put({op[1]!r}, {format_bytes(op[2])})"
    return f"{op[0]}({op[1]!r})"


@dataclass(frozen=True)
class Outcome:
    """What one operation did: a short line for the log, and whether it raised.

    ``evicted`` holds the (key, size) of every entry the operation pushed out; ``hit`` is
    True or False after a ``get`` (None for other operations and for errors);
    ``not_written`` names the learner's method that raised NotImplementedError, if one did.
    """

    text: str
    raised: bool
    evicted: tuple[tuple[Hashable, int], ...] = ()
    hit: bool | None = None
    not_written: str | None = None


def _sizes(cache: Any, keys: Any) -> dict[Any, int]:
    sizes: dict[Any, int] = {}
    for key in keys:
        try:
            size = cache.size_of(key)
        except Exception:  # a learner's unfinished size_of: the ghost just has no size
            size = 0
        sizes[key] = size if isinstance(size, int) and not isinstance(size, bool) else 0
    return sizes


def apply_operation(cache: Any, op: Operation) -> Outcome:
    """Run one operation on ``cache`` and describe the result in one line.

    Whatever the cache raises is reported, not propagated: a widget callback has nowhere to
    show a traceback, and seeing the cache unchanged after an error is the lesson.
    """
    before = _sizes(cache, cache.keys())
    hit: bool | None = None
    try:
        if op[0] == "put":
            cache.put(op[1], f"<weights of {op[1]}>", op[2])
            result = ""
        elif op[0] == "get":
            hit = cache.get(op[1]) is not None
            result = " \u2192 hit" if hit else " \u2192 miss"
        else:
            result = f" \u2192 {getattr(cache, op[0])(op[1])!r}"
    except NotImplementedError as error:
        from servelab.unwritten import not_written_yet

        method = not_written_yet(error)
        if method is None:
            return Outcome(f"{_describe(op)} \u2192 NotImplementedError: {error}", True)
        text = f"{_describe(op)} \u2192 `{method}` is not written yet"
        return Outcome(text, True, not_written=method)
    except Exception as error:  # a learner's cache may raise anything; show it
        return Outcome(f"{_describe(op)} \u2192 {type(error).__name__}: {error}", True)
    after = set(cache.keys())
    gone = [key for key in before if key not in after and key != op[1]]  # LRU first
    if gone:
        result += f" \u2192 evicted {', '.join(map(str, gone))}"
    evicted = tuple((key, before[key]) for key in gone)
    return Outcome(_describe(op) + result, False, evicted, hit)


class CacheReplay:
    """Step or replay a list of operations against a fresh cache and draw each state.

    ``make_cache`` builds the cache (for example ``lambda: WeightCache(300 * GB)``), so a
    replay can go back: position ``n`` means "a fresh cache after the first ``n`` operations".
    """

    def __init__(
        self,
        make_cache: Callable[[], Any],
        operations: Sequence[Operation],
        *,
        width: int = 640,
        title: str | None = None,
    ) -> None:
        if not callable(make_cache):
            raise TypeError("make_cache must be a function that returns a fresh cache")
        self.operations = [_check_operation(i, op) for i, op in enumerate(operations)]
        self.make_cache = make_cache
        self.width = width
        self.title = title
        self.position = 0
        self.log: list[Outcome] = []
        self.cache = make_cache()

    def seek(self, position: int) -> None:
        """Rebuild the state after the first ``position`` operations."""
        if isinstance(position, bool) or not isinstance(position, int):
            raise TypeError(f"position must be an int, got {position!r}")
        if not 0 <= position <= len(self.operations):
            raise ValueError(f"position must be in 0..{len(self.operations)}, got {position}")
        if position < self.position:
            self.cache, self.position, self.log = self.make_cache(), 0, []
        while self.position < position:
            self.log.append(apply_operation(self.cache, self.operations[self.position]))
            self.position += 1

    def step(self) -> Outcome | None:
        """Apply the next operation; None when every operation has run."""
        if self.position == len(self.operations):
            return None
        self.seek(self.position + 1)
        return self.log[-1]

    def not_written(self) -> list[str]:
        """A warning line for the first call that reached a method not written yet, if any.

        From that call on the replay shows a half-built cache (its counters may all be zero),
        so the picture must say so rather than pass for the finished one.
        """
        for number, outcome in enumerate(self.log, start=1):
            if outcome.not_written is not None:
                op = _describe(self.operations[number - 1])
                return [
                    f"`{outcome.not_written}` is not written yet (from operation {number}, {op}): "
                    "not your finished cache"
                ]
        return []

    def picture(self, **options: Any) -> Any:
        """The cache as it stands, drawn like :func:`show_cache` (same options), with a
        warning line when a method it called is not written yet."""
        return show_cache(self.cache, warnings=self.not_written(), **options)

    def svg(self) -> str:
        last = self.log[-1] if self.log else None
        caption = (
            f"after {self.position}/{len(self.operations)}: {last.text}"
            if last
            else f"fresh cache, {len(self.operations)} operations to go"
        )
        touched = None
        if last is not None and last.hit:
            touched = self.operations[self.position - 1][1]
        counters = {
            "hits": sum(1 for o in self.log if o.hit is True),
            "misses": sum(1 for o in self.log if o.hit is False),
        }
        return render_cache(
            self.cache,
            width=self.width,
            title=self.title,
            caption=caption,
            evicted=last.evicted if last else (),
            touched=touched,
            counters=counters,
            warnings=self.not_written(),
        )

    def widget(self) -> Any:
        """Controls (play, step, a position slider) over the drawing and the log."""
        import ipywidgets as widgets

        n = len(self.operations)
        picture = widgets.HTML(self.svg())
        history = widgets.HTML()
        slider = widgets.IntSlider(value=self.position, min=0, max=n, description="operation")
        play = widgets.Play(value=self.position, min=0, max=n, interval=900)
        back = widgets.Button(description="\u25c0 back", layout=widgets.Layout(width="90px"))
        forward = widgets.Button(description="step \u25b6", layout=widgets.Layout(width="90px"))
        widgets.jslink((play, "value"), (slider, "value"))

        def redraw(change: Any = None) -> None:
            self.seek(slider.value)
            picture.value = self.svg()
            rows = [
                f"<li style='color:{'#cb181d' if o.raised else 'inherit'}'>{escape(o.text)}</li>"
                for o in self.log
            ]
            style = "font-family:monospace;font-size:12px;line-height:1.35;margin:0"
            history.value = f"<ol style='{style}'>{''.join(rows)}</ol>"

        def nudge(delta: int) -> Callable[[Any], None]:
            return lambda _button: setattr(slider, "value", max(0, min(n, slider.value + delta)))

        slider.observe(redraw, names="value")
        back.on_click(nudge(-1))
        forward.on_click(nudge(+1))
        redraw()
        box = widgets.VBox([widgets.HBox([play, back, forward, slider]), picture, history])
        return with_static_picture(box, self._final_svg, alt="weight cache replay")

    def _final_svg(self) -> str:
        """The state after every operation, on a fresh cache (this replay stays where it is)."""
        whole = CacheReplay(self.make_cache, self.operations, width=self.width, title=self.title)
        whole.seek(len(self.operations))
        return whole.svg()
