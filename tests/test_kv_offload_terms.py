"""A load_seconds hint shown only where it is true of the learner's load: a check's hint about
the KV bytes (or the latency) follows the place only when calling yours again with the link
cut to its bandwidth alone (its latency alone) shows that term differing; a model number the
bytes part leaves out (or follows where the KV does not) named by doubling it; and the disk
tiers a grade builds keep their files in memory where the system has such a folder."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.kv_offload_script import chunks_in_memory
from servelab.grading.kv_offload_terms import load_terms, own_numbers_missed
from servelab.grading.localise import Divergence
from servelab.grading.mistakes.kv_offload import kv_bytes_keys_only
from servelab.kv.offload.cost import ModelShape

FINAL = checkpoint("kv-offload", 4)
KV_BYTES = "This check was written for: load_seconds: KV bytes per token = 2 (K and V)"


def _kv_bytes(m: Any) -> int:
    return 2 * m.layers * m.kv_heads * m.head_dim * m.bytes_per_value


class ChunksOfAHundredTokens(FINAL["Hierarchy"]):  # type: ignore[misc]
    """load_seconds: counts a chunk request per hundred tokens, unrounded: the bytes are right."""

    def load_seconds(self, tokens: int, tier: str) -> float:
        m, link = self.model, self.links[tier]
        return tokens / 100 * link.latency_s + tokens * _kv_bytes(m) / link.bandwidth


class LoadWithoutLayers(FINAL["Hierarchy"]):  # type: ignore[misc]
    """load_seconds: KV bytes per token without the layers: the latency is right."""

    def load_seconds(self, tokens: int, tier: str) -> float:
        m, link = self.model, self.links[tier]
        kv_bytes = 2 * m.kv_heads * m.head_dim * m.bytes_per_value
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s + tokens * kv_bytes / link.bandwidth


class LoadInHalves(FINAL["Hierarchy"]):  # type: ignore[misc]
    """load_seconds: the KV of a value in two bytes, whatever the model says (fp16 fixed)."""

    def load_seconds(self, tokens: int, tier: str) -> float:
        m, link = self.model, self.links[tier]
        kv_bytes = 2 * m.layers * m.kv_heads * m.head_dim * 2
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s + tokens * kv_bytes / link.bandwidth


def _report(cls: type) -> str:
    return failing_report("kv-offload", {**FINAL, "Hierarchy": cls}, 4)[0].text


def test_a_latency_slip_is_not_sent_to_the_kv_bytes_rule() -> None:
    report = _report(ChunksOfAHundredTokens)
    assert "✗ step 4 · a load moves K and V" in report
    assert "where: the difference starts in your `Hierarchy.load_seconds`" in report
    assert KV_BYTES not in report


class LoadAllHeads(FINAL["Hierarchy"]):  # type: ignore[misc]
    """load_seconds: a token's KV over every query head, d_model wide, not kv_heads."""

    def load_seconds(self, tokens: int, tier: str) -> float:
        m, link = self.model, self.links[tier]
        kv_bytes = 2 * m.layers * m.d_model * m.bytes_per_value
        chunks = -(-tokens // self.chunk_tokens)
        return chunks * link.latency_s + tokens * kv_bytes / link.bandwidth


class LoadWithAHeader(FINAL["Hierarchy"]):  # type: ignore[misc]
    """load_seconds: moves a 16 MiB header with every load, on top of the KV."""

    def load_seconds(self, tokens: int, tier: str) -> float:
        m, link = self.model, self.links[tier]
        chunks = -(-tokens // self.chunk_tokens)
        moved = tokens * _kv_bytes(m) + 16 * 2**20
        return chunks * link.latency_s + moved / link.bandwidth


def test_a_bytes_slip_keeps_the_kv_bytes_rule() -> None:
    report = _report(LoadWithAHeader)
    assert "✗ step 4 · a load moves K and V" in report
    assert KV_BYTES in report


GEOMETRY = "with the link's latency set to 0 (the bytes part alone), doubling model."


def test_a_load_without_the_layers_is_named_by_doubling_them() -> None:
    report = _report(LoadWithoutLayers)
    assert "✗ step 4 · a load moves K and V" in report
    assert GEOMETRY + "layers doubles the reference's load and leaves yours as it was" in report


def test_a_load_over_every_query_head_is_named_by_doubling_the_width() -> None:
    report = _report(LoadAllHeads)
    assert GEOMETRY + "kv_heads or model.head_dim doubles the reference's load" in report
    assert "doubling model.d_model leaves the reference's load as it was" in report


def test_a_load_whose_bytes_agree_names_no_model_number() -> None:
    assert GEOMETRY not in _report(ChunksOfAHundredTokens)
    kv_keys_only = failing_report("kv-offload", kv_bytes_keys_only.Buggy, 4)
    assert GEOMETRY not in kv_keys_only[0].text  # every number followed, a factor of 2 off


def _divergence(cls: type, tokens: int, tier: str, **numbers: Any) -> Divergence:
    h = cls(1000, 1000)
    vars(h).update(numbers)
    reference = type("Reference", (cls,), {"load_seconds": FINAL["Hierarchy"].load_seconds})
    call = f"h.load_seconds({tokens}, {tier!r})"
    return Divergence(
        "Hierarchy.load_seconds", call, {}, ("", {}), ("", {}), 0, (tokens, tier),
        subject=h, reference_class=reference,
    )  # fmt: skip


def test_the_terms_of_a_load_are_told_apart_by_calling_it_again() -> None:
    assert load_terms(_divergence(ChunksOfAHundredTokens, 4096, "cpu")) == (True, False)
    assert load_terms(_divergence(LoadWithoutLayers, 4096, "cpu")) == (False, True)
    assert load_terms(_divergence(FINAL["Hierarchy"], 4096, "cpu")) == (False, False)


def test_a_number_fixed_in_the_code_is_told_from_a_wrong_formula() -> None:
    small = ModelShape(params=1e9, layers=16, d_model=2048, kv_heads=32, head_dim=64,
                       bytes_per_value=4)  # fmt: skip
    assert own_numbers_missed(_divergence(LoadInHalves, 2048, "disk", model=small))
    assert not own_numbers_missed(_divergence(LoadWithoutLayers, 2048, "disk", model=small))
    assert not own_numbers_missed(_divergence(LoadInHalves, 2048, "disk"))  # nothing set


@pytest.mark.skipif(not os.access("/dev/shm", os.W_OK), reason="no memory file system here")
def test_a_grade_makes_its_temporary_folders_in_memory_and_gives_the_folder_back() -> None:
    before = tempfile.gettempdir()
    with chunks_in_memory():
        assert tempfile.gettempdir() == "/dev/shm"
        with tempfile.TemporaryDirectory() as made:
            assert os.path.dirname(made) == "/dev/shm"
    assert tempfile.gettempdir() == before
