"""A reading of an LFU whose tick went back: the program replayed on your own class, each put
and hit watched for the tick it records (``reached``). Used where one method's graft fixes
the program yet no call of it differs where localisation looks (a tick that wraps after a
thousand calls shows only in an order read much later, and copying the state at every call
of so long a program costs more than a report may spend)."""

from __future__ import annotations

from typing import Any

from servelab.grading.policy_probes import policy_namespace
from servelab.grading.replay import LINES_PER_REPLAY, OutOfLines, line_budget

__all__ = ["tick_went_back"]

_WATCHED = ("update_on_put", "update_on_hit")


class _Log:
    """Every watched call's tick, in order, and the first one no later than a tick a key held
    just before it: (call number, method, key, new tick, that key, its tick)."""

    def __init__(self) -> None:
        self.ticks: list[Any] = []
        self.back: tuple[int, str, Any, Any, Any, Any] | None = None

    def saw(self, method: str, key: Any, before: dict[Any, Any], after: Any) -> None:
        tick = after.get(key) if isinstance(after, dict) else None
        self.ticks.append(tick)
        if self.back is not None or not isinstance(tick, int) or isinstance(tick, bool):
            return
        held = {k: t for k, t in before.items() if isinstance(t, int) and not isinstance(t, bool)}
        if not held:
            return
        top = max(held, key=lambda k: (held[k], repr(k)))
        if tick < held[top]:
            self.back = (len(self.ticks) - 1, method, key, tick, top, held[top])


def _watched(cls: type, log: _Log) -> type:
    def wrap(name: str) -> Any:
        def call(self: Any, key: Any, *args: Any) -> Any:
            reached = getattr(self, "reached", None)
            before = dict(reached) if isinstance(reached, dict) else {}
            out = getattr(super(watched, self), name)(key, *args)
            log.saw(name, key, before, getattr(self, "reached", None))
            return out

        return call

    watched = type(cls.__name__, (cls,), {name: wrap(name) for name in _WATCHED})
    return watched


def _run(program: str, impl: Any) -> _Log | None:
    """``program`` run on ``impl``'s LFU, every put and hit watched; None when it cannot."""
    log = _Log()
    ns = policy_namespace(impl)
    if "LFU" not in ns:
        return None
    ns["LFU"] = _watched(ns["LFU"], log)
    try:
        with line_budget(LINES_PER_REPLAY):
            for line in program.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    exec(compile(line.strip(), "<reading>", "exec"), ns)
    except Exception:
        pass  # the calls before the error were watched
    except OutOfLines:
        return None
    return log


def tick_went_back(program: str, impl: Any, reference: Any, method: str) -> str | None:
    """Where your LFU's ``method`` (a put or a hit) recorded a tick below one a key already
    held, the first such call, as your class runs ``program``, with the reference's tick at
    the same call beside it where the reference's tick there is later than every one before."""
    name = method.rpartition(".")[2]
    if name not in _WATCHED:
        return None
    mine = _run(program, impl)
    if mine is None or mine.back is None:
        return None
    i, called, key, tick, top, held = mine.back
    if called != name:
        return None
    theirs = _run(program, reference)
    ref = theirs.ticks[i] if theirs is not None and i < len(theirs.ticks) else None
    later = isinstance(ref, int) and ref > held
    beside = f" (the reference records {ref!r} there)" if later else ""
    what = "put" if name == "update_on_put" else "hit"
    return (
        f"yours recorded tick {tick!r} for {key!r} on a {what}{beside}, below tick {held!r}, "
        f"which {top!r} already held: your tick went back. A tick only grows, "
        "however many calls come: each put and each hit takes a fresh tick, later than every "
        "tick before it, so among equal counts the key that reached its count first leaves "
        "first"
    )
