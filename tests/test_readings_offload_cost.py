"""kv-offload slips at a chunk's and a load's limits, graded end to end: a payload that is no
chunk, a chunk larger than the CPU tier, a load priced over two links or with its latency in
another unit (named only where a second call proves it), and their look-alikes."""

from __future__ import annotations

import re

from buggy_impls import failing_report
from servelab import checkpoint
from unlisted import unlisted

LOAD_RULE = "load_seconds(tokens, tier) is ceil(tokens / chunk_tokens) · latency_s"
ONCE_PER_CHUNK = "a load pays the link's latency once per chunk request"


def _report(name: str) -> str:
    slip = next(u for u in unlisted() if u.name == name)
    return failing_report("kv-offload", slip.impl, slip.step)[0].text


def test_a_payload_sized_by_len_is_caught_at_its_put() -> None:
    report = _report("a payload sized by len")
    assert "✗ step 1 · a chunk is non-empty bytes" in report
    assert "tier.put('e', b'') returned []; the reference raises TypeError" in report
    assert "where: the difference starts in your `put`" in report
    assert "sizes the payload with `self._payload_size(payload)`" in report


def test_a_chunk_too_large_for_the_cpu_tier_is_refused_not_a_miss() -> None:
    report = _report("a chunk too large for the cpu tier taken for a miss")
    assert "✗ step 3 · larger than the cpu tier" in report
    assert "h.store('big', payload('big', 90)) returned False" in report
    assert "where: the difference starts in your `Hierarchy.store`" in report
    assert "`store` raises ChunkTooLarge (the CPU tier's put does) and no tier changes" in report


def test_a_chunk_too_large_for_the_cpu_tier_is_not_written_to_disk() -> None:
    report = _report("a chunk too large for the cpu tier written to disk")
    assert "h.store('big', payload('big', 90)) returned True" in report
    assert "disk.keys ['a'] -> ['a', 'big']" in report


def test_a_disk_load_that_adds_the_host_link_is_told_so() -> None:
    report = _report("a disk load that adds the host link")
    assert "✗ step 4 · a load where latency dominates" in report
    said = "yours prices a load from 'disk' as the load over links['disk'] plus the whole load"
    assert said in report
    assert "while a load from 'cpu' alone agrees" in report
    assert ONCE_PER_CHUNK not in report  # the rule it keeps is stated nowhere


def test_a_load_over_the_bottleneck_link_is_not_told_it_adds_a_link() -> None:
    report = _report("a disk load over the bottleneck link")
    assert "where: the difference starts in your `Hierarchy.load_seconds`" in report
    assert "plus the whole load" not in report
    assert ONCE_PER_CHUNK not in report  # it pays one latency per chunk: not its rule
    assert LOAD_RULE in report


def test_a_latency_read_in_milliseconds_is_told_its_factor() -> None:
    report = _report("a link latency read in milliseconds")
    assert "the bytes part agrees, but yours pays 4e-06 s of latency" in report
    assert "1/1000 of the reference's" in report
    assert ONCE_PER_CHUNK not in report


def test_two_latencies_per_chunk_are_counted_not_taken_for_a_unit() -> None:
    class DiskLatencyTwice(checkpoint("kv-offload", 4)["Hierarchy"]):
        def load_seconds(self, tokens, tier):
            seconds = super().load_seconds(tokens, tier)
            if tier != "cpu":
                seconds += -(-tokens // self.chunk_tokens) * self.links[tier].latency_s
            return seconds

    impl = {**checkpoint("kv-offload", 4), "Hierarchy": DiskLatencyTwice}
    report = failing_report("kv-offload", impl, 4)[0].text
    assert "as if 8 chunk request(s) paid one where the 4 chunk request(s)" in report
    assert "the bytes part agrees" not in report
    assert "plus the whole load" not in report


def test_a_retrieve_that_rereads_from_the_top_tier_is_told_the_payload_is_lost() -> None:
    hierarchy = checkpoint("kv-offload", 3)["Hierarchy"]

    class RetrieveRereadsFromTop(hierarchy):
        def retrieve(self, found):
            payloads = []
            for key, i in found:
                self.tiers[i].ref(key)
                payloads.append(self.tiers[i].get(key))
            top = self.tiers[0]
            for (key, i), payload in zip(found, payloads, strict=True):
                if i > 0 and key not in top and len(payload) <= top.capacity:
                    evicted = top.put(key, payload)
                    if evicted:
                        self._cascade(1, evicted)
            pairs = zip(found, payloads, strict=True)
            payloads = [top.get(k) if i > 0 else p for (k, i), p in pairs]
            for key, i in found:
                self.tiers[i].unref(key)
                self.tiers[i].unpin(key)
            return payloads

    impl = {**checkpoint("kv-offload", 3), "Hierarchy": RetrieveRereadsFromTop}
    report = failing_report("kv-offload", impl, 3)[0].text
    assert "yours returned None for 'a', which the lookup found in the disk tier" in report
    assert "retrieve returns the payload each transfer read" in report


def test_a_retrieve_that_returns_the_found_keys_is_not_told_a_payload_is_lost() -> None:
    hierarchy = checkpoint("kv-offload", 3)["Hierarchy"]

    class RetrieveReturnsKeys(hierarchy):
        def retrieve(self, found):
            super().retrieve(found)
            return [key for key, _ in found]

    impl = {**checkpoint("kv-offload", 3), "Hierarchy": RetrieveReturnsKeys}
    report = failing_report("kv-offload", impl, 3)[0].text
    assert "where: the difference starts in your `Hierarchy.retrieve`" in report
    assert "yours returned None for" not in report


def test_a_cascade_that_stops_at_a_refused_victim_is_caught() -> None:
    report = _report("a cascade that stops at a refused victim")
    assert "✗ step 3 · a cascade goes on past a refused victim" in report
    assert "h.where('y') after storing 'd' is [], expected ['disk']" in report
    assert "where: the difference starts in your `Hierarchy._cascade`" in report


def test_a_chunk_held_below_and_not_stored_again_is_told_so() -> None:
    report = _report("a chunk held below not stored again")
    assert "where: the difference starts in your `Hierarchy.store`" in report
    said = "yours returned True and changed nothing: 'a', which the disk tier holds, is not in"
    assert said in report
    assert "yours put 'b' in `cpu.keys`" not in report


def test_a_store_that_drops_the_copy_below_is_not_told_it_changed_nothing() -> None:
    hierarchy = checkpoint("kv-offload", 3)["Hierarchy"]

    class StoreDropsTheCopyBelow(hierarchy):
        def store(self, key, payload):
            stored = super().store(key, payload)
            if stored and key in self.tiers[1] and self.tiers[1].can_evict(key):
                self.tiers[1].remove(key)
            return stored

    impl = {**checkpoint("kv-offload", 3), "Hierarchy": StoreDropsTheCopyBelow}
    report = failing_report("kv-offload", impl, 3)[0].text
    assert "where: the difference starts in your `Hierarchy.store`" in report
    assert "changed nothing" not in report


def test_a_put_that_keeps_its_victims_bytes_is_told_so() -> None:
    report = _report("a put that keeps its victims' bytes")
    assert "where: the difference starts in your `put`" in report
    assert "but left its bytes in `used`" in report


def test_a_put_that_counts_the_new_chunk_twice_is_not_told_it_kept_victim_bytes() -> None:
    class PutCountsNewTwiceOnEviction(checkpoint("kv-offload", 2)):
        def put(self, key, payload, wait=0):
            got = super().put(key, payload, wait)
            if got:
                self._used += len(payload)
            return got

    report = failing_report("kv-offload", PutCountsNewTwiceOnEviction, 2)[0].text
    assert "where: the difference starts in your `put`" in report
    assert "but left its bytes in `used`" not in report


def test_a_lookup_that_is_a_use_is_told_it_moved_the_chunk() -> None:
    report = _report("a lookup that is a use")
    assert "where: the difference starts in your `Hierarchy.lookup`" in report
    # the chunk is found in whichever tier the failing program left it in: the hint names the
    # tier whose order yours changed in this call
    moved = re.search(r"yours moved 'a' to the newest end of `(cpu|disk)\.keys`", report)
    assert moved, report
    yours = next(line for line in report.splitlines() if line.strip().startswith("yours "))
    assert f"{moved[1]}.keys [" in yours.split(";", 1)[1], yours
    assert "a lookup only finds and pins a chunk; it is not a use" in report


def test_a_cascade_that_refreshes_the_copy_below_is_told_so() -> None:
    report = _report("a cascade that refreshes the copy below")
    assert "where: the difference starts in your `Hierarchy._cascade`" in report
    assert "a victim the tier below already holds is not put there again" in report


def test_a_cascade_that_writes_newest_first_is_not_told_it_moved_one_chunk() -> None:
    hierarchy = checkpoint("kv-offload", 3)["Hierarchy"]

    class CascadeLastFirst(hierarchy):
        def _cascade(self, start, chunks):
            super()._cascade(start, list(reversed(chunks)))

    impl = {**checkpoint("kv-offload", 3), "Hierarchy": CascadeLastFirst}
    report = failing_report("kv-offload", impl, 3)[0].text
    assert "where: the difference starts in your `Hierarchy._cascade`" in report
    assert "to the newest end of" not in report
