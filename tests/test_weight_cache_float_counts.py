"""A counter kept as a float is compared and shown as it is: a float of bytes that an int() would
cut to the right count still fails, and the report shows the learner's own value."""

from __future__ import annotations

from typing import Any

import numpy as np

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading import grade

Counting = checkpoint("weight-cache", 5)


class _HalfByteMore(Counting):  # type: ignore[misc]
    """Adds half a byte to evicted_bytes with each eviction."""

    def _evict(self, key: Any) -> None:
        super()._evict(key)
        self.evicted_bytes += 0.5


class _NumpyCounts(Counting):  # type: ignore[misc]
    """Keeps its counters as numpy integers: the same counts."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.hits, self.misses = np.int64(0), np.int64(0)
        self.evictions, self.evicted_bytes = np.int64(0), np.int64(0)


def test_a_float_count_an_int_would_cut_to_the_right_one_fails_and_is_shown() -> None:
    report = failing_report("weight-cache", _HalfByteMore, 5)[0].text
    assert "60.5" in report


def test_counts_of_another_integer_type_pass() -> None:
    grade("weight-cache", _NumpyCounts, 5, quiet=True)
