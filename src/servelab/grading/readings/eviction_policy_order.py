"""SIEVE's eviction_order read against your own pop_victim, as the failing program runs on your
class: each eviction_order call is watched on copies, for a change it made to the policy (it
only reads) and for an order other than the one popping a copy of yours evicts in."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.policy_probes import policy_namespace
from servelab.grading.replay import LINES_PER_REPLAY, OutOfLines, line_budget
from servelab.weights.policies import NoVictim

__all__ = ["ONLY_READS", "order_watched"]

#: Said only where a replay showed one of your eviction_order calls changing the policy.
ONLY_READS = (
    "yours changed the policy in an eviction_order call (the program under reproduce: run again "
    "on your class, its fields after one such call differ from those before it): "
    "eviction_order only reads, "
    "so it must leave the policy as it was. It trials pop_victim on a deep copy "
    "(copy.deepcopy(self)), once per candidate (len() of them: a pinned key is none): is yours "
    "popping from the policy itself, or from a shallow copy (copy.copy) that shares its queue "
    "and visited bits?"
)


def _fields(p: Any) -> dict[str, Any] | None:
    try:
        return copy.deepcopy(dict(vars(p)))
    except Exception:
        return None


def _len(p: Any) -> int | None:
    try:
        with line_budget(LINES_PER_REPLAY):
            n = len(p)
    except (Exception, OutOfLines):
        return None
    return n if isinstance(n, int) else None


def _popped(p: Any) -> list[Any] | None:
    """What popping a deep copy of ``p`` evicts, until NoVictim; None where that does not end
    with NoVictim within one pop per key, or fails otherwise."""
    try:
        trial = copy.deepcopy(p)
        bound = len(list(getattr(trial, "queue", []))) + 1
        order: list[Any] = []
        for _ in range(bound):
            try:
                order.append(trial.pop_victim())
            except NoVictim:
                return order
    except Exception:
        return None
    return None


def order_watched(program: str, impl: Any) -> str | None:
    """As ``program`` runs on your SIEVE, its order read after each line as the check reads
    it, the first fact its eviction_order calls prove: one that changed the policy (the
    only-reads rule), else, after the last line, a list other than what popping a copy of
    yours evicts (eviction_order must be pop_victim's order); None where neither is shown."""
    ns = policy_namespace(impl)
    base = ns.get("SIEVE")
    original: Any = getattr(base, "eviction_order", None)
    if not isinstance(base, type) or original is None:
        return None
    changed: list[bool] = []
    apart: list[tuple[list[Any], list[Any]]] = []
    beyond: list[tuple[int | None, list[Any]]] = []  # NoVictim out of yours: (len(), your pops)
    last = [False]  # the call after the program's last line: the one the report shows

    def eviction_order(self: Any) -> Any:
        before = _fields(self)
        popped = _popped(self)
        try:
            out = original(self)
        except NoVictim:
            if popped is not None:
                beyond.append((_len(self), popped))
            raise
        listed = list(out) if isinstance(out, list | tuple) else None
        after = _fields(self)
        if before is not None and after is not None and before != after:
            changed.append(True)
        elif last[0] and popped is not None and listed is not None and listed != popped:
            apart.append((listed, popped))
        return out

    watched = type(base.__name__, (base,), {"eviction_order": eviction_order})
    ns["SIEVE"] = watched
    ns[base.__name__] = watched

    def read() -> None:  # as the check reads the order after each line
        made: Any
        for made in [v for v in ns.values() if type(v) is watched]:
            made.eviction_order()

    try:
        with line_budget(LINES_PER_REPLAY):
            for line in program.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    exec(compile(line.strip(), "<reading>", "exec"), ns)
                    read()
            last[0] = True
            read()
    except Exception:
        pass  # the calls before the error were watched
    except OutOfLines:
        return None
    if changed:
        return ONLY_READS
    if beyond:
        size, popped = beyond[0]
        count = f"len() = {size}" if size is not None else "len()"
        return (
            f"your eviction_order raised NoVictim: it asked pop_victim for a victim after the "
            f"last one, where popping a copy of yours evicts {popped!r} and then raises "
            f"NoVictim ({count}: a pinned key is no candidate). eviction_order pops its deep "
            "copy once per candidate, len() times, and stops there"
        )
    if apart:
        listed, popped = apart[0]
        return (
            f"your eviction_order lists {listed!r}; popping a copy of yours (pop_victim until "
            f"NoVictim) evicts {popped!r}: eviction_order must be the order pop_victim would "
            "evict in, so trial pop_victim on a deep copy (copy.deepcopy(self)) rather than "
            "working the order out apart from it"
        )
    return None
