"""Promotions graded end to end: a retrieve that promotes each lower tier's hit as soon as it
reads it is caught by the LRU-order check and sent to the rule it breaks; a promotion made
only into free bytes, and victims cascaded from the CPU tier itself (in a retrieve or a
store), are named once a replay on copies (the failing call, and fresh states built to part
them) proves it; look-alikes that share the failing call's outcome are not."""

from __future__ import annotations

import io
from typing import Any

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading import grade
from unlisted import unlisted

STAGED = checkpoint("kv-offload", 3)
FREE = "yours promotes a chunk found below only into the cpu tier's free bytes"
FROM_TOP = "if its victims cascaded from the cpu tier itself (`_cascade(0, ...)`)"
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


def _reads(h: Any, found: list[tuple[Any, int]]) -> list[bytes]:
    payloads = []
    for key, i in found:
        h.tiers[i].ref(key)
        payloads.append(h.tiers[i].get(key))
    return payloads


def _done(h: Any, found: list[tuple[Any, int]]) -> None:
    for key, i in found:
        h.tiers[i].unref(key)
        h.tiers[i].unpin(key)


class PromoteIntoFreeRoom(STAGED["Hierarchy"]):  # type: ignore[misc]
    """Step 3, retrieve: promotes a lower tier's hit only when the CPU tier's free bytes
    hold it, never evicting to make room."""

    def retrieve(self, found: list[tuple[Any, int]]) -> list[bytes]:
        payloads = _reads(self, found)
        top = self.tiers[0]
        for (key, i), payload in zip(found, payloads, strict=True):
            if i > 0 and key not in top and len(payload) <= top.free:
                top.put(key, payload)
        _done(self, found)
        return payloads


class PromoteCascadeFromTop(STAGED["Hierarchy"]):  # type: ignore[misc]
    """Step 3, retrieve: cascades a promotion's victims with `_cascade(0, ...)`."""

    def retrieve(self, found: list[tuple[Any, int]]) -> list[bytes]:
        payloads = _reads(self, found)
        top = self.tiers[0]
        for (key, i), payload in zip(found, payloads, strict=True):
            if i > 0 and key not in top and len(payload) <= top.capacity:
                evicted = top.put(key, payload)
                if evicted:
                    self._cascade(0, evicted)
        _done(self, found)
        return payloads


class StoreCascadeFromTop(STAGED["Hierarchy"]):  # type: ignore[misc]
    """Step 3, store: cascades the CPU tier's victims with `_cascade(0, ...)`."""

    def store(self, key: Any, payload: bytes) -> bool:
        evicted = self.tiers[0].put(key, payload)
        if evicted is None:
            return False
        self._cascade(0, evicted)
        return True


def _text(cls: type) -> str:
    return failing_report("kv-offload", {**STAGED, "Hierarchy": cls}, 3)[0].text


def test_a_promotion_only_into_free_bytes_is_named() -> None:
    text = _text(PromoteIntoFreeRoom)
    # the release check meets it first: its lookup finds a chunk on disk that retrieve promotes
    assert "✗ step 3 · a release drops its own pins" in text
    assert FREE in text
    assert FROM_TOP not in text


def test_a_promotion_whose_victims_cascade_from_the_top_is_named() -> None:
    text = _text(PromoteCascadeFromTop)
    assert "where: the difference starts in your `Hierarchy.retrieve`" in text
    assert "reference's retrieve would " + FROM_TOP in text
    assert FREE not in text  # the same tiers on the failing call: a fresh state parts them


def test_a_store_whose_victims_cascade_from_the_top_is_named() -> None:
    text = _text(StoreCascadeFromTop)
    assert "where: the difference starts in your `Hierarchy.store`" in text
    assert "reference's store would " + FROM_TOP in text


@pytest.mark.parametrize("name", ["retrieve never promotes", "promotion only below the CPU size"])
def test_a_retrieve_that_leaves_the_chunk_below_for_another_reason_is_not_named(
    name: str,
) -> None:
    slip = next(u for u in unlisted() if u.name == name)
    text = failing_report("kv-offload", slip.impl, slip.step)[0].text
    assert "yours left 'a' out of the cpu tier" in text
    assert FREE not in text and FROM_TOP not in text
