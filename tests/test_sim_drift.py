"""The drifting Zipf trace: seeded, exact length, and popularity that really moves."""

from __future__ import annotations

from collections import Counter

import pytest

from servelab.weights.policies import LFU, LRU
from servelab.weights.sim import (
    GB,
    PolicyNode,
    drifting_zipf_trace,
    model_catalogue,
    replay,
    zipf_trace,
)

MODELS = model_catalogue(30, seed=1)


def test_seeded_and_exact_length() -> None:
    a = drifting_zipf_trace(MODELS, 1001, phases=3, seed=4)
    assert a == drifting_zipf_trace(MODELS, 1001, phases=3, seed=4)
    assert a != drifting_zipf_trace(MODELS, 1001, phases=3, seed=5)
    assert len(a) == 1001
    assert drifting_zipf_trace(MODELS, 0, phases=3) == []


def test_the_favourite_changes_between_phases() -> None:
    trace = drifting_zipf_trace(MODELS, 6000, alpha=1.2, phases=2, seed=0)
    first = Counter(m.name for m in trace[:3000]).most_common(1)[0][0]
    second = Counter(m.name for m in trace[3000:]).most_common(1)[0][0]
    assert first != second


def test_drift_turns_lfu_from_best_to_worse_than_lru() -> None:
    models = model_catalogue(40, seed=0)
    stationary = zipf_trace(models, 12_000, alpha=0.9, seed=0)
    drifting = drifting_zipf_trace(models, 12_000, alpha=0.9, phases=6, seed=0)

    def byte_miss(trace: list, policy: type) -> float:
        return replay(trace, PolicyNode(400 * GB, policy())).byte_miss_ratio

    assert byte_miss(stationary, LFU) < byte_miss(stationary, LRU)
    assert byte_miss(drifting, LFU) > byte_miss(drifting, LRU)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"phases": 0}, "phases"), ({"phases": True}, "phases"), ({"alpha": -1.0}, "alpha")],
)
def test_bad_arguments_raise(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        drifting_zipf_trace(MODELS, 10, **kwargs)
