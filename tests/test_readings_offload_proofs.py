"""kv-offload causes a second call proves (readings/kv_offload_proofs.py), and the disk tier's
`_write` answer checked where it is made: each shown for its own slip, graded end to end,
and not for a look-alike whose first differing call looks the same."""

from __future__ import annotations

import os

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.kv.offload.errors import ChunkTooLarge
from unlisted import unlisted

OFF = "kv-offload"
Evicting = checkpoint(OFF, 2)
Final = checkpoint(OFF, 4)
READ_LATE = "after this same put had taken it out of `keys`"
TOUCHED_BELOW = "yours moved the disk tier's copy of 'x' to its newest end"
WRITE_PATH = "`DiskTier._write` returns the path of the chunk's own file"


class ReadsVictimsAfterDiscard(Evicting):
    """Step 2, put: discards the victims, then reads their payloads for the answer."""

    def put(self, key, payload, wait=0):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} too large")
        if key in self._sizes:
            self.get(key)
            return []
        victims = self._choose_victims(size)
        if victims is None:
            return None
        copy = self._write(key, payload)
        for v in victims:
            self._discard(v)
        evicted = [(v, self._read(v)) for v in victims]
        self._data[key] = copy
        self._sizes[key] = size
        self._used += size
        return evicted


class SizesTheOldCopy(Evicting):
    """Step 2, put: looks up the key's old size first (`self._sizes[key]`), which a new key
    does not have: KeyError on every new chunk, nothing read late."""

    def put(self, key, payload, wait=0):
        old = self._sizes[key]
        if old:
            self.get(key)
            return []
        return super().put(key, payload, wait)


class StoreWritesThrough(Final["Hierarchy"]):
    """Step 3, store: also writes the chunk into the disk tier when that tier holds it."""

    def store(self, key, payload):
        stored = super().store(key, payload)
        if stored and key in self.tiers[1]:
            self.tiers[1].put(key, payload)
        return stored


class WriteReturnsTemporary(Final["DiskTier"]):
    """Step 3, DiskTier._write: replaces correctly but returns the temporary path."""

    def _write(self, key, payload):
        final = self.path(key)
        temporary = final.with_name(final.name + ".tmp")
        with open(temporary, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, final)
        return temporary


def test_a_put_that_reads_a_victim_after_discarding_it_is_told_so() -> None:
    report = failing_report(OFF, ReadsVictimsAfterDiscard, 2)[0].text
    assert "where: the difference starts in your `put`" in report
    assert f"yours read 'a' with `_read` {READ_LATE}" in report


def test_a_put_that_raises_keyerror_for_another_cause_is_not_told_it_read_late() -> None:
    report = failing_report(OFF, SizesTheOldCopy, 2)[0].text
    assert "where: the difference starts in your `put`" in report
    assert READ_LATE not in report


def test_a_store_that_writes_through_is_told_it_touches_the_copy_below() -> None:
    report = failing_report(OFF, {**Final, "Hierarchy": StoreWritesThrough}, 3)[0].text
    assert "where: the difference starts in your `Hierarchy.store`" in report
    assert TOUCHED_BELOW in report


def test_a_store_that_loses_victims_is_not_told_it_touches_the_copy_below() -> None:
    slip = next(u for u in unlisted() if u.name == "store writes one victim down")
    report = failing_report(OFF, slip.impl, slip.step)[0].text
    assert "your `Hierarchy.store`" in report
    assert TOUCHED_BELOW not in report


def test_a_write_that_returns_the_temporary_path_is_caught_where_it_returns() -> None:
    report = failing_report(OFF, {**Final, "DiskTier": WriteReturnsTemporary}, 3)[0].text
    assert "✗ step 3 · one file per chunk" in report
    assert "returned the path 'a.chunk.tmp'; the chunk's file is 'a.chunk'" in report
    assert "where: the difference is in your `DiskTier._write`" in report
    assert WRITE_PATH in report


def test_a_write_that_leaves_its_temporary_file_is_not_told_about_the_path() -> None:
    slip = next(u for u in unlisted() if u.name == "a temporary file left behind")
    report = failing_report(OFF, slip.impl, slip.step)[0].text
    assert "your `DiskTier._write`" in report
    assert WRITE_PATH not in report


class VictimsListedTwice(Evicting):
    """Step 2, _choose_victims: appends each victim twice: 'a' is the reference's victim too,
    listed once there, so no victim is one the reference leaves out."""

    def _choose_victims(self, size):
        need, victims = size - self.free, []
        for key in self._sizes:
            if need <= 0:
                break
            if self.can_evict(key):
                victims += [key, key]
                need -= self._sizes[key]
        return victims if need <= 0 else None


def test_a_victim_listed_twice_is_told_how_often_not_that_the_reference_leaves_it_out() -> None:
    report = failing_report(OFF, VictimsListedTwice, 2)[0].text
    assert "yours returned ['a', 'a', 'b', 'b'], with 'a' 2 times: the reference returns" in report
    assert "the reference leaves out" not in report
