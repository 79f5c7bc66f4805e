"""A steady decode step: one mask build, one upload and one host sync (the sampled tokens).

Counted on the CPU with :class:`sync_counter.SyncCounter`, which sees the operations that
stall the host on CUDA. Before these were fixed, a decode step of the 2-layer demo model
did 9 of them (per layer: ``min``, ``max`` and ``unique`` validating slots, and a
``nonzero`` building FlexAttention's mask; then the token fetch) and built the mask twice.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")

import servelab.kv.attention as attention  # noqa: E402
from servelab.kv.engine import Engine, EngineConfig, Request  # noqa: E402
from servelab.kv.model import ModelConfig, TinyLlama  # noqa: E402
from sync_counter import SyncCounter  # noqa: E402

MODEL = TinyLlama(ModelConfig(max_seq_len=256))
DEEP = TinyLlama(ModelConfig(n_layers=5, max_seq_len=256))


@pytest.fixture
def prepares(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times FlexDecoder.prepare (one block-mask build) ran."""
    calls: list[int] = []
    original = attention.FlexDecoder.prepare

    def counted(self: attention.FlexDecoder, batch: attention.DecodeBatch) -> object:
        calls.append(batch.batch)
        return original(self, batch)

    monkeypatch.setattr(attention.FlexDecoder, "prepare", counted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # flex's "not compiled" notice
        yield calls


@pytest.mark.parametrize("model", [MODEL, DEEP], ids=["2-layer", "5-layer"])
def test_one_block_mask_per_decode_step_whatever_the_depth(
    model: TinyLlama, prepares: list[int]
) -> None:
    pool = model.new_pool(8, 4)
    tables, lens, tokens = [[0, 1], [2, 3, 4]], [6, 9], [7, 8]
    for b in (0, 1, 2, 3, 4):
        pool.kv[:, :, b].normal_()
    for step in range(3):
        model.decode(pool, tokens, tables, [n + step for n in lens], backend="flex-eager")
        assert len(prepares) == step + 1
        if lens[0] + step == 8:
            tables[0].append(5)
        if lens[1] + step == 12:
            tables[1].append(6)


def steady_engine(backend: str, temperature: float) -> Engine:
    """Three running requests past their prefill: every later step is a pure decode step."""
    engine = Engine(MODEL, EngineConfig(num_blocks=64, block_size=16, backend=backend))  # type: ignore[arg-type]
    for i in range(3):
        n = 2 if temperature else 1  # forks share a partial block: copy-on-write steps too
        engine.add(Request.of([1 + i, 2, 3, 4, 5], 30, temperature=temperature, n=n, seed=i))
    engine.step()  # prefills
    engine.step()  # first decode: the forks copy their shared block
    return engine


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "sampled"])
@pytest.mark.parametrize("backend", ["gather", "flex-eager"])
def test_a_steady_decode_step_syncs_once_to_fetch_the_sampled_tokens(
    backend: str, temperature: float, prepares: list[int]
) -> None:
    engine = steady_engine(backend, temperature)
    for _ in range(4):
        before = len(prepares)
        with SyncCounter() as counter:
            made = engine.step()
        assert made == (6 if temperature else 3)
        assert dict(counter.syncs) == {"tolist": 1}
        # tables, lengths and tokens in one upload; the sampler adds its 1/T column
        assert counter.uploads == (2 if temperature else 1)
        assert len(prepares) - before == (backend != "gather")


def test_prefill_attention_has_no_explicit_mask_for_a_fresh_prompt() -> None:
    """A fresh prompt goes to SDPA with ``is_causal`` and no mask (which CUDA's flash
    kernel takes); a suffix after a prefix hit gets the lower-right causal shape."""
    seen: list[tuple[object, bool]] = []

    class SdpaLog(SyncCounter):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if "scaled_dot_product" in func.overloadpacket.__name__:
                names = [a.name for a in func._schema.arguments]
                bound = {**dict(zip(names, args, strict=False)), **(kwargs or {})}
                seen.append((bound.get("attn_mask"), bool(bound.get("is_causal"))))
            return super().__torch_dispatch__(func, types, args, kwargs)

    pool = MODEL.new_pool(4, 8)
    with SdpaLog():
        MODEL.prefill(pool, list(range(10, 30)), [2, 0, 3])
    assert seen and all(mask is None and causal for mask, causal in seen)
    q = torch.randn(1, 4, 5, 16)
    k = torch.randn(1, 2, 20, 16)
    got = attention.prefill_attention(q, k, k)
    pos = torch.arange(15, 20)[:, None] >= torch.arange(20)[None, :]
    want = torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=pos, enable_gqa=True)
    torch.testing.assert_close(got, want)
    assert attention.sdpa_backend(q, k, k) in {"flash", "math"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_a_steady_decode_step_has_one_synchronizing_call() -> None:
    """CUDA's own detector: ``set_sync_debug_mode("warn")`` warns at each synchronizing
    call (pageable copies included). One is allowed: the sampled tokens' ``tolist``."""
    model = TinyLlama(ModelConfig(max_seq_len=256), device="cuda")
    engine = Engine(model, EngineConfig(num_blocks=64, block_size=16, backend="flex"))
    for i in range(3):
        engine.add(Request.of([1 + i, 2, 3, 4, 5], 30))
    for _ in range(3):  # prefill, then decode steps that compile and warm every buffer
        engine.step()
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            engine.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    # the detector's own notice ("... is a prototype feature ...") is no synchronisation
    syncs = [w for w in caught if "called a synchronizing" in str(w.message)]
    assert len(syncs) <= 1, [str(w.message) for w in syncs]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_bf16_prefill_runs_without_the_math_backend() -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model = TinyLlama(ModelConfig(max_seq_len=256), device="cuda", dtype=torch.bfloat16)
    pool = model.new_pool(8, 16)
    fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
    with sdpa_kernel(fused):
        model.prefill(pool, list(range(40)), [4, 2, 7])  # fresh prompt: is_causal
        model.prefill(pool, list(range(40)), [4, 2, 7], start=32)  # suffix: lower right
    q = torch.randn(1, 4, 40, 16, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 2, 40, 16, device="cuda", dtype=torch.bfloat16)
    assert attention.sdpa_backend(q, k, k) != "math"
    assert attention.sdpa_backend(q[:, :, 32:], k, k) == "flash"
