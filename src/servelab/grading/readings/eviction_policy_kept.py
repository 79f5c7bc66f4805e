"""Readings of an LFU that keeps what it should have dropped or pushes what it should not:
a count resumed when a key that left is put again, and an entry pushed by update_on_unpin
whose tick is not the one the key reached its count at (pop_victim then skips it as stale).
The first is proven on new policies of the learner's class; the second is read off the
learner's own heap, the program replayed on the learner's class."""

from __future__ import annotations

from collections import Counter
from typing import Any

from servelab.grading.policy_probes import policy_namespace
from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, LINES_PER_REPLAY, OutOfLines, line_budget

__all__ = ["count_resumed", "unpin_pushed_stale"]

_PROBE = "~left"


def _count_after_return(cls: type, leave: str) -> Any:
    """On a new policy of ``cls``: a key put, hit twice, taken out by ``leave`` (``remove``
    or ``pop``), then put again: its count then (None where that cannot run)."""
    try:
        p = cls()
        with line_budget(LINES_PER_CALL):
            p.update_on_put(_PROBE, 1)
            p.update_on_hit(_PROBE)
            p.update_on_hit(_PROBE)
            if leave == "pop":
                if p.pop_victim() != _PROBE:
                    return None
            else:
                p.update_on_remove(_PROBE)
            p.update_on_put(_PROBE, 1)
            count = p.count
            return count.get(_PROBE) if isinstance(count, dict) else None
    except (Exception, OutOfLines):
        return None


def count_resumed(d: Difference) -> str | None:
    """An LFU put that started its key above count 1: said where, on new policies of your
    class, a key put, hit twice, taken out and put again starts at 4 (its 3 uses kept)."""
    key = d.args[0] if d.args else None
    mine, theirs = d.mine.get("counts"), d.theirs.get("counts")
    if d.method != "update_on_put" or not isinstance(mine, dict) or not isinstance(theirs, dict):
        return None
    if theirs.get(key) != 1 or not isinstance(mine.get(key), int) or mine[key] <= 1:
        return None
    cls = type(d.subject)
    ways = [
        way
        for way, leave in (("evicted by pop_victim", "pop"), ("removed", "remove"))
        if (leave == "remove" or hasattr(cls, "pop_victim"))
        and _count_after_return(cls, leave) == 4
    ]
    if not ways:
        return None
    return (
        f"yours starts {key!r} at count {mine[key]}, where the reference starts it afresh at "
        f"1. On a new policy of your class, a key put, hit twice (count 3), "
        f"{' or '.join(ways)}, then put again starts at 4: yours resumes the count a key had "
        "when it left. A key put again is a new entry: the uses it had before it left are "
        "forgotten, and it starts at count 1 like any new key"
    )


def _entry_ok(entry: Any, count: Any, reached: Any, key: Any) -> bool:
    return isinstance(entry, tuple) and entry == (count.get(key), reached.get(key), key)


def unpin_pushed_stale(program: str, impl: Any) -> str | None:
    """The first update_on_unpin of your LFU, as ``program`` runs on your class, that pushed
    an entry for its key other than (its count, the tick it reached it, key), and none that
    matches: pop_victim skips such an entry as stale."""
    ns = policy_namespace(impl)
    if "LFU" not in ns:
        return None
    found: list[tuple[Any, Any, Any, Any, Any]] = []
    base = ns["LFU"]

    def update_on_unpin(self: Any, key: Any) -> Any:
        heap = getattr(self, "heap", None)
        before = Counter(heap) if isinstance(heap, list) else None
        out = base.update_on_unpin(self, key)
        heap, count, reached = (getattr(self, n, None) for n in ("heap", "count", "reached"))
        if found or before is None or not isinstance(heap, list):
            return out
        if not isinstance(count, dict) or not isinstance(reached, dict):
            return out
        pushed = [e for e in (Counter(heap) - before).elements() if e[-1] == key]
        if pushed and not any(_entry_ok(e, count, reached, key) for e in pushed):
            clock = getattr(self, "clock", None)
            found.append((key, pushed[0], count.get(key), reached.get(key), clock))
        return out

    ns["LFU"] = type(base.__name__, (base,), {"update_on_unpin": update_on_unpin})
    try:
        with line_budget(LINES_PER_REPLAY):
            for line in program.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    exec(compile(line.strip(), "<reading>", "exec"), ns)
    except Exception:
        pass  # the calls before the error were watched
    except OutOfLines:
        return None
    if not found:
        return None
    key, entry, count, reached, clock = found[0]
    if not isinstance(entry, tuple) or len(entry) != 3:
        return None
    now = ", the clock now" if entry[1] == clock and clock != reached else ""
    return (
        f"yours pushed {entry!r} on update_on_unpin({key!r}), but {key!r} has count {count!r}, "
        f"reached at tick {reached!r}: the entry's tick is {entry[1]!r}{now}. pop_victim takes "
        "an entry only while its count and tick are the key's own, so it skips yours as stale "
        f"and never evicts {key!r} until its next hit. On update_on_unpin push the key's "
        "current entry, (count, reached, key): the time it reached its count, not a new one"
    )
