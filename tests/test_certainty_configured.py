"""Certainty holds in every configuration, not only in the one the programs build.

The variants of a program change its integer literals; a value the programs take from outside
their text (the hierarchy's model, links, FLOP/s and chunk size) stays as it is, and two slips
that differ only there give the same numbers. With the Llama-shaped model a KV size in values
(bytes per value left out: 2) halves the load time as the catalogue's keys-only mistake (the
K and V factor left out: 2) does. Before "behaves exactly like", the programs are replayed in
a second configuration where every such value is a different prime; each look-alike below
was told "exactly like" before that, and is asked a question now. And a scheduler's request
added while the pool is in use tells "larger than the blocks free now" from "larger than the
whole pool", which a fresh pool (num_free == num_blocks) cannot.
"""

from __future__ import annotations

from typing import Any

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.kv_offload_replay import OTHER_LINKS, OTHER_MODEL, REPLAY
from servelab.grading.mistakes import mistakes
from servelab.kv.offload.cost import HOST_LINK, LLAMA_8B, NVME_LINK, PREFILL_FLOPS
from servelab.kv.scheduler import RequestTooLarge

OFF = "kv-offload"
KV = checkpoint(OFF, 4)
H = KV["Hierarchy"]
Final = checkpoint("scheduler", 3)


class ElementsNotBytes(H):
    """KV per token counted in values, not bytes: bytes_per_value left out."""

    def load_seconds(self, tokens: int, tier: str) -> float:
        m, link = self.model, self.links[tier]
        kv = 2 * m.layers * m.kv_heads * m.head_dim
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s + tokens * kv / link.bandwidth


class BandwidthInValues(H):
    """The link's bandwidth read as values per second (times bytes_per_value)."""

    def load_seconds(self, tokens: int, tier: str) -> float:
        m, link = self.model, self.links[tier]
        kv = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s + tokens * kv / (link.bandwidth * m.bytes_per_value)


class HeadsHalved(H):
    """kv_heads // bytes_per_value heads per layer (a GQA group of 2 taken for the heads)."""

    def load_seconds(self, tokens: int, tier: str) -> float:
        m, link = self.model, self.links[tier]
        kv = 2 * m.layers * (m.kv_heads // m.bytes_per_value) * m.head_dim * m.bytes_per_value
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s + tokens * kv / link.bandwidth


class ChunkInHeadValues(H):
    """A chunk taken as chunk_tokens * head_dim tokens: up to 32768 tokens make one request."""

    def load_seconds(self, tokens: int, tier: str) -> float:
        m, link = self.model, self.links[tier]
        kv = 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value
        chunks = -(-tokens // (self.chunk_tokens * m.head_dim))
        return chunks * link.latency_s + tokens * kv / link.bandwidth


class AttentionScaledByHeads(H):
    """The attention term scaled by (kv_heads - 8) / kv_heads: zero with 8 KV heads."""

    def recompute_seconds(self, tokens: int) -> float:
        m = self.model
        attention = 2 * m.layers * m.d_model * tokens * tokens * (m.kv_heads - 8) // m.kv_heads
        return (2 * m.params * tokens + attention) / self.flops


PromotesUnpinned = next(m for m in mistakes(OFF) if m.name == "promotes_unpinned").impl


class RefreshesEveryRead(PromotesUnpinned["Hierarchy"]):
    """Unpins before promoting, as promotes_unpinned does, and refreshes each lower tier's copy
    it reads by hand, whatever the policy: under LRU that is the reference's refresh, under
    FIFO it is not. No program spells the hierarchy's policy: only the second configuration,
    where each tier takes the other policy, tells the two apart."""

    def retrieve(self, found: Any) -> list[Any]:
        self.release(found)
        payloads, top = [], self.tiers[0]
        for key, i in found:
            tier = self.tiers[i]
            payload = tier._read(key) if key in tier else None
            if payload is not None:
                tier._sizes.move_to_end(key)
            payloads.append(payload)
            if i > 0 and payload is not None and key not in top:
                evicted = top.put(key, payload)
                if evicted:
                    self._cascade(1, evicted)
        return payloads


class TooLargeForFreeBlocks(Final):
    """A request is too large when it needs more than the blocks free now."""

    def add(self, seq: Any) -> None:
        need = self.blocks_needed(seq.prompt_len + seq.max_new_tokens)
        if need > self.bm.num_free:
            raise RequestTooLarge(f"sequence {seq.seq_id} needs {need} blocks")
        self.waiting.append(seq)


LOOK_ALIKES = [
    # (topic, implementation, step, the catalogue mistake it gave the same numbers as)
    (OFF, {**KV, "Hierarchy": ElementsNotBytes}, 4, "kv_bytes_keys_only"),
    (OFF, {**KV, "Hierarchy": BandwidthInValues}, 4, "kv_bytes_keys_only"),
    (OFF, {**KV, "Hierarchy": HeadsHalved}, 4, "kv_bytes_keys_only"),
    (OFF, {**KV, "Hierarchy": ChunkInHeadValues}, 4, "latency_once"),
    (OFF, {**KV, "Hierarchy": AttentionScaledByHeads}, 4, "recompute_no_attention"),
    (OFF, {**KV, "Hierarchy": RefreshesEveryRead}, 3, "promotes_unpinned"),
    ("scheduler", TooLargeForFreeBlocks, 3, "too_large_ignores_watermark"),
]


def _mistake(topic: str, name: str) -> Any:
    return next(m for m in mistakes(topic) if m.name == name)


@pytest.mark.parametrize(
    "case", LOOK_ALIKES, ids=[c[3] + f"-{i}" for i, c in enumerate(LOOK_ALIKES)]
)
def test_a_look_alike_in_the_usual_configuration_is_asked_not_told(case: tuple[Any, ...]) -> None:
    topic, impl, step, twin = case
    report, _ = failing_report(topic, impl, step)
    assert "exactly like" not in report.hint, report.hint
    like = _mistake(topic, twin).like
    if like in report.hint:  # the symptom it shares may be asked about, as a question
        noun = REPLAY.noun if topic == OFF else "scheduler"
        assert f"comes from a {noun} that {like}: does yours do that?" in report.hint


@pytest.mark.parametrize(
    "case", LOOK_ALIKES, ids=[c[3] + f"-{i}" for i, c in enumerate(LOOK_ALIKES)]
)
def test_the_mistake_itself_is_still_named_with_certainty(case: tuple[Any, ...]) -> None:
    topic, _, step, twin = case
    m = _mistake(topic, twin)
    report, _ = failing_report(topic, m.impl, step)
    assert f"behaves exactly like one that {m.like}" in report.hint, report.hint


def test_the_second_configuration_changes_every_figure_to_a_distinct_one() -> None:
    configured = REPLAY.configured
    assert configured is not None
    h = configured(KV)["Hierarchy"]
    assert issubclass(h, H)
    assert (h.model, h.links, h.chunk_tokens) == (OTHER_MODEL, OTHER_LINKS, 13)
    assert h.flops != PREFILL_FLOPS and OTHER_MODEL != LLAMA_8B
    assert OTHER_LINKS["cpu"] != HOST_LINK and OTHER_LINKS["disk"] != NVME_LINK
    figures = [
        OTHER_MODEL.params,
        OTHER_MODEL.layers,
        OTHER_MODEL.d_model,
        OTHER_MODEL.kv_heads,
        OTHER_MODEL.head_dim,
        OTHER_MODEL.bytes_per_value,
        h.flops,
        h.chunk_tokens,
        *[x for link in OTHER_LINKS.values() for x in (link.bandwidth, link.latency_s)],
    ]
    assert len(set(figures)) == len(figures) and 2 not in figures
    tier = configured(checkpoint(OFF, 1))  # a lone tier: the other policy than the program's
    assert issubclass(tier, checkpoint(OFF, 1))
    assert [tier(100).policy, tier(100, "LRU").policy, tier(100, "FIFO").policy] == [
        "FIFO",
        "FIFO",
        "LRU",
    ]
    disk = configured(KV)["DiskTier"](100)
    assert disk.policy == "FIFO" and disk.root.is_dir()
