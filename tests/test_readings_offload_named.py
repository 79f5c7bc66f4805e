"""kv-offload readings that name a slip from what its first differing call shows, each seen on
a slip it was written for (tests/unlisted/offload_counts.py) and kept silent on a look-alike
whose call shows something else; and the strict-test question, asked only when a chunk a byte
smaller fits under any key."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.readings import Difference
from servelab.grading.readings.kv_offload import kv_offload_reading
from servelab.kv.offload.errors import ChunkTooLarge
from unlisted import offload, offload_counts

T = "kv-offload"
Pinned = checkpoint(T, 1)
Evicting = checkpoint(T, 2)
Final = checkpoint(T, 4)


def _hint(impl: Any, step: int) -> str:
    report, _ = failing_report(T, impl, step)
    return str(report.hint)


def _tier(keys: list[str], used: int) -> dict[str, Any]:
    return {"keys": keys, "used": used, "pins": {}, "refs": {}}


class _RoomCountsKeyBytes(Pinned):  # type: ignore[misc]
    """The room test counts the key's characters too (the bytes recorded are the payload's):
    with a one-letter key an exact fit misses and a byte less stores, as under a strict test."""

    def put(self, key, payload):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} is larger than the tier")
        if key in self._sizes:
            self.get(key)
            return []
        if size + len(str(key)) > self.free:
            return None
        self._data[key] = self._write(key, payload)
        self._sizes[key] = size
        self._used += size
        return []


class _RoomKeepsTwoBytes(Pinned):  # type: ignore[misc]
    """Keeps two bytes of headroom: a chunk a byte under the free bytes misses, one two bytes
    under stores, though no exact fit was tried."""

    def put(self, key, payload):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} is larger than the tier")
        if key in self._sizes:
            self.get(key)
            return []
        if size + 2 > self.free:
            return None
        self._data[key] = self._write(key, payload)
        self._sizes[key] = size
        self._used += size
        return []


class _VictimsKeepTheirBytes(Evicting):  # type: ignore[misc]
    """Drops the victims without taking their bytes off `used`: `used` is wrong after a put
    that evicted, for a reason that is not the new chunk's size."""

    def put(self, key, payload, wait=0):
        size = self._payload_size(payload)
        if size > self.capacity:
            raise ChunkTooLarge(f"{key!r} is larger than the tier")
        if key in self._sizes:
            self.get(key)
            return []
        victims = self._choose_victims(size)
        if victims is None:
            return None
        evicted = [(v, self._read(v)) for v in victims]
        for v in victims:
            self._sizes.pop(v)
            self._drop(v)
        self._data[key] = self._write(key, payload)
        self._sizes[key] = size
        self._used += size
        return evicted


class _VictimsSkipPinnedOnly(Evicting):  # type: ignore[misc]
    """Skips pinned chunks but not referenced ones: a chunk a transfer reads is chosen."""

    def _choose_victims(self, size):
        need = size - self.free
        victims = []
        for key in self._sizes:
            if need <= 0:
                break
            if self.pin_count(key) == 0:
                victims.append(key)
                need -= self._sizes[key]
        return victims if need <= 0 else None


def test_a_victim_a_transfer_reads_is_told_it_is_not_evictable() -> None:
    hint = _hint(_VictimsSkipPinnedOnly, 2)
    assert "with 'a', which 1 GPU transfer(s) still reference: such a chunk is not" in hint


def test_victims_from_the_wrong_end_are_not_told_a_held_chunk_was_chosen() -> None:
    hint = _hint(offload.VictimsFromTheBack, 2)
    assert "not evictable" not in hint


def test_a_strict_room_test_is_asked_about_when_a_byte_less_fits_under_any_key() -> None:
    assert "is your test strict" in _hint(offload.FitNeedsSpare, 1)


def test_a_room_test_that_counts_the_key_is_not_asked_about_a_strict_test() -> None:
    hint = _hint(_RoomCountsKeyBytes, 1)
    assert "strict" not in hint and "that fits in the free bytes" in hint


def test_a_miss_short_of_an_exact_fit_is_not_asked_about_a_strict_test() -> None:
    hint = _hint(_RoomKeepsTwoBytes, 1)
    assert "strict" not in hint and "that fits in the free bytes" in hint


def test_a_chunk_counted_at_more_than_its_bytes_is_told_what_it_added() -> None:
    hint = _hint(offload_counts.PutCountsKeyBytes, 1)
    assert "yours added 21 to `used` for 'a', a chunk of 20 bytes" in hint
    assert "written for" not in hint


def test_used_wrong_after_an_eviction_is_not_put_on_the_chunk_s_bytes() -> None:
    hint = _hint(_VictimsKeepTheirBytes, 2)
    assert "payload's bytes" not in hint


def test_a_pin_that_moves_the_chunk_is_told_a_pin_is_no_use() -> None:
    hint = _hint(offload_counts.PinIsAUse, 1)
    assert "a pin only changes a count; it is not a use" in hint


def test_a_pin_that_changes_which_keys_are_held_is_not_read_as_an_order() -> None:
    d = Difference(
        "pin", "Tier", ("a",), _tier(["a", "b"], 20),
        {**_tier(["a"], 10), "pins": {"a": 1}}, {**_tier(["a", "b"], 20), "pins": {"a": 1}},
        "returned 1", "returned 1", None,
    )  # fmt: skip
    assert "not a use" not in (kv_offload_reading(d) or "")


def test_victims_written_down_last_first_are_told_the_order_given() -> None:
    hint = _hint({**Final, "Hierarchy": offload_counts.CascadeLastFirst}, 3)
    assert "in another order than _cascade was" in hint


def _cascade(mine: list[str], theirs: list[str]) -> str | None:
    chunks = [("c", b"c" * 5), ("b", b"b" * 26)]
    state = {"cpu.keys": ["a"], "cpu.used": 35, "disk.keys": ["a"], "disk.used": 35}
    d = Difference(
        "_cascade", "Hierarchy", (1, chunks), state,
        {**state, "disk.keys": mine}, {**state, "disk.keys": theirs},
        "returned None", "returned None", None,
    )  # fmt: skip
    return kv_offload_reading(d)


def test_a_tier_whose_old_keys_moved_too_is_not_read_as_victims_reordered() -> None:
    assert "than _cascade was given" in (_cascade(["a", "b", "c"], ["a", "c", "b"]) or "")
    # the whole order reversed (the old key moved as well): not the victims' order alone
    assert "than _cascade was given" not in (_cascade(["b", "c", "a"], ["a", "c", "b"]) or "")


def test_a_store_that_drops_the_copy_below_is_told_the_copy_stays() -> None:
    hint = _hint({**Final, "Hierarchy": offload_counts.StoreDropsTheCopyBelow}, 3)
    assert "yours removed 'a' from the disk tier while storing it" in hint


def test_a_copy_below_gone_where_that_tier_had_no_room_is_not_read_as_dropped() -> None:
    h = Final["Hierarchy"](60, 64)
    h.store("a", b"a" * 40)
    h.store("b", b"b" * 24)  # the CPU tier evicts 'a' down: the disk holds 'a', 40 of 64
    state = {"cpu.keys": ["b"], "cpu.used": 24, "disk.keys": ["a"], "disk.used": 40}
    mine = {"cpu.keys": ["a"], "cpu.used": 40, "disk.keys": ["b"], "disk.used": 24}
    theirs = {**mine, "disk.keys": ["a", "b"], "disk.used": 64}
    d = Difference(
        "store", "Hierarchy", ("a", b"a" * 40), state, mine, theirs,
        "returned True", "returned True", h,
    )  # fmt: skip
    assert "while storing it" in (kv_offload_reading(d) or "")
    # a disk tier with no room for 'a' beside what it took: an eviction may explain it
    small = Final["Hierarchy"](60, 50)
    small.store("a", b"a" * 40)
    small.store("b", b"b" * 24)
    d = Difference(
        "store", "Hierarchy", ("a", b"a" * 40), {**state, "disk.used": 40},
        {**mine, "disk.used": 24}, {**theirs, "disk.used": 64},
        "returned True", "returned True", small,
    )  # fmt: skip
    assert "while storing it" not in (kv_offload_reading(d) or "")
