"""A retrieve that promotes each lower tier's hit as soon as it reads it, before reading the
CPU tier's hits after it, is caught by the LRU-order check and sent to the rule it breaks;
a retrieve that reads everything first passes that check."""

from __future__ import annotations

import io
from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading import grade

STAGED = checkpoint("kv-offload", 3)
RULE = "retrieve reads every found chunk first (a read from the CPU tier is a use there"


class PromoteWhileReading(STAGED["Hierarchy"]):  # type: ignore[misc]
    """Step 3, retrieve: reads and promotes in one loop."""

    def retrieve(self, found: list[tuple[Any, int]]) -> list[bytes]:
        payloads = []
        top = self.tiers[0]
        for key, i in found:
            self.tiers[i].ref(key)
            payload = self.tiers[i].get(key)
            payloads.append(payload)
            if i > 0 and key not in top and len(payload) <= top.capacity:
                evicted = top.put(key, payload)
                if evicted:
                    self._cascade(1, evicted)
        for key, i in found:
            self.tiers[i].unref(key)
            self.tiers[i].unpin(key)
        return payloads


def test_promoting_while_reading_is_caught_and_sent_to_its_rule() -> None:
    report = failing_report("kv-offload", {**STAGED, "Hierarchy": PromoteWhileReading}, 3)
    text = report[0].text
    assert "✗ step 3 · a retrieve keeps each tier's LRU order" in text
    assert "where: the difference starts in your `Hierarchy.retrieve`" in text
    assert RULE in text


def test_reading_everything_first_passes_the_order_check() -> None:
    grade("kv-offload", STAGED, step=3, out=io.StringIO(), quiet=True)
