"""The engine: paged serving produces exactly the tokens of dense generation."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from servelab.kv.engine import (  # noqa: E402
    Engine,
    EngineConfig,
    InvalidSamplingRequest,
    Request,
)
from servelab.kv.model import ModelConfig, TinyLlama, compare_greedy  # noqa: E402
from servelab.kv.scheduler import RequestTooLarge  # noqa: E402

torch.set_num_threads(1)  # tiny tensors: threads only add contention on a shared machine
MODEL = TinyLlama(ModelConfig(max_seq_len=256))


def workload(seed: int, n: int = 10, shared: int = 13) -> list[Request]:
    """Requests whose prompts share a prefix of ``shared`` tokens, with mixed lengths."""
    rng = random.Random(seed)
    prefix = [rng.randrange(256) for _ in range(shared)]
    return [
        Request.of(
            prefix + [rng.randrange(256) for _ in range(rng.randrange(1, 12))],
            rng.randrange(1, 25),
        )
        for _ in range(n)
    ]


def dense(requests: list[Request]) -> list[list[int]]:
    return [MODEL.generate_dense([list(r.prompt)], r.max_new_tokens)[0] for r in requests]


def run(requests: list[Request], **config: object) -> tuple[Engine, list[list[list[int]]]]:
    return run_with(MODEL, requests, **config)


def run_with(
    model: TinyLlama, requests: list[Request], **config: object
) -> tuple[Engine, list[list[list[int]]]]:
    engine = Engine(model, EngineConfig(**config))  # type: ignore[arg-type]
    out = engine.run(requests)
    return engine, [c.samples for c in out]


def assert_drained(engine: Engine) -> None:
    """Nothing running or waiting, and every block back in the free pool."""
    assert engine.is_idle
    engine.step()  # retire the last finished sequences
    assert engine.bm.num_free == engine.config.num_blocks
    assert engine.scheduler.running == []


REQUESTS = workload(0)
EXPECTED = dense(REQUESTS)


@pytest.mark.parametrize(
    "config",
    [
        {"num_blocks": 96, "block_size": 4, "prefix_caching": False},
        {"num_blocks": 96, "block_size": 4},
        {"num_blocks": 60, "block_size": 1},
        {"num_blocks": 12, "block_size": 16},
    ],
    ids=["plain", "prefix-cache", "bs1", "bs16"],
)
def test_greedy_paged_generation_equals_dense(config: dict[str, object]) -> None:
    engine, got = run(REQUESTS, **config)
    assert [s[0] for s in got] == EXPECTED
    assert engine.stats.generated_tokens == sum(r.max_new_tokens for r in REQUESTS)
    assert_drained(engine)


def test_prefix_cache_hits_change_no_token() -> None:
    engine, got = run(REQUESTS, num_blocks=96, block_size=4, prefix_caching=True)
    assert engine.stats.cached_tokens >= 12 * (len(REQUESTS) - 1)  # 3 shared blocks each
    assert [s[0] for s in got] == EXPECTED


@pytest.mark.parametrize("prefix_caching", [False, True])
def test_recompute_preemption_mid_run_changes_no_token(prefix_caching: bool) -> None:
    engine, got = run(REQUESTS, num_blocks=14, block_size=4, prefix_caching=prefix_caching)
    assert engine.stats.preemptions > 0
    assert [s[0] for s in got] == EXPECTED
    assert_drained(engine)


def test_swap_preemption_changes_no_token() -> None:
    engine, got = run(
        REQUESTS,
        num_blocks=14,
        block_size=4,
        preemption="swap",
        num_host_blocks=64,
        prefix_caching=False,
    )
    assert engine.stats.preemptions > 0
    assert engine.stats.swapped_out_blocks > 0
    assert engine.stats.swapped_in_blocks == engine.stats.swapped_out_blocks
    assert [s[0] for s in got] == EXPECTED
    assert_drained(engine)


@pytest.mark.parametrize("prefix_caching", [False, True])
def test_parallel_sampling_forks_and_matches_independent_runs(prefix_caching: bool) -> None:
    prompt = list(range(30, 48))  # 18 tokens: 4 full blocks of 4 and a shared partial one
    fan = Request.of(prompt, 12, n=4, temperature=1.0, seed=7)
    engine, (samples,) = run([fan], num_blocks=64, block_size=4, prefix_caching=prefix_caching)
    assert len(samples) == 4
    assert len({tuple(s) for s in samples}) > 1  # real sampling, not four greedy copies
    assert engine.stats.forks == 3
    assert engine.stats.cow_copies == 3  # the partial block: all but its last holder copy
    assert engine.stats.sharing_saving > 0.3  # the 4 full prompt blocks stay shared
    for i, sample in enumerate(samples):
        alone = Request.of(prompt, 12, temperature=1.0, seed=7 + i)
        assert run([alone], num_blocks=64, block_size=4)[1][0][0] == sample
    assert_drained(engine)


def test_parallel_sampling_survives_preemption() -> None:
    fans = [Request.of(list(range(i, i + 9)), 15, n=3, temperature=0.8, seed=i) for i in range(3)]
    _, roomy = run(fans, num_blocks=128, block_size=4)
    engine, tight = run(fans, num_blocks=16, block_size=4)
    assert engine.stats.preemptions > 0
    assert tight == roomy


@settings(max_examples=5, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    num_blocks=st.integers(10, 40),
    block_size=st.sampled_from([2, 4, 8]),
    prefix_caching=st.booleans(),
)
def test_random_workloads_match_dense(
    seed: int, num_blocks: int, block_size: int, prefix_caching: bool
) -> None:
    requests = workload(seed, n=5, shared=seed % 9)
    limit = (num_blocks - 1) * block_size
    requests = [r for r in requests if len(r.prompt) + r.max_new_tokens <= limit]
    engine, got = run(
        requests, num_blocks=num_blocks, block_size=block_size, prefix_caching=prefix_caching
    )
    assert [s[0] for s in got] == dense(requests)
    assert_drained(engine)


def test_invalid_requests_raise_and_change_nothing() -> None:
    engine = Engine(MODEL, EngineConfig(num_blocks=8, block_size=4))
    with pytest.raises(InvalidSamplingRequest):
        Request.of([], 3)
    with pytest.raises(InvalidSamplingRequest):
        Request.of([1], 0)
    with pytest.raises(InvalidSamplingRequest):
        Request.of([1], 3, temperature=-1.0)
    with pytest.raises(InvalidSamplingRequest):
        engine.add(Request.of([256], 3))  # outside the vocabulary
    with pytest.raises(InvalidSamplingRequest):
        engine.add(Request.of([1] * 250, 10))  # past max_seq_len
    with pytest.raises(RequestTooLarge):
        engine.add(Request.of([1] * 40, 10))  # more blocks than the pool can ever give
    assert engine.is_idle
    assert engine.completions() == []
    rid = engine.add(Request.of([1, 2, 3], 4))
    while not engine.is_idle:
        engine.step()
    (done,) = engine.completions()
    assert done.request_id == rid
    assert done.samples == [MODEL.generate_dense([[1, 2, 3]], 4)[0]]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_engine_on_cuda_with_compiled_flex_equals_dense() -> None:
    model = TinyLlama(ModelConfig(max_seq_len=256), device="cuda")
    engine = Engine(model, EngineConfig(num_blocks=24, block_size=16, backend="flex"))
    got = [c.samples[0] for c in engine.run(REQUESTS)]
    assert got == [model.generate_dense([list(r.prompt)], r.max_new_tokens)[0] for r in REQUESTS]


def test_bf16_engine_matches_bf16_dense_generation_up_to_near_ties() -> None:
    """In bf16 a token may differ where two logits are within rounding: such a difference
    must be a near-tie (compare_greedy, BF16_TIE_RTOL), never a real mismatch."""
    model = TinyLlama(ModelConfig(max_seq_len=256), dtype=torch.bfloat16)
    engine, got = run_with(model, REQUESTS, num_blocks=96, block_size=4)
    assert engine.pool.kv.dtype == torch.bfloat16
    results = [
        compare_greedy(model, r.prompt, s[0], model.generate_dense([list(r.prompt)], len(s[0]))[0])
        for r, s in zip(REQUESTS, got, strict=True)
    ]
    assert all(c.equal or c.near_tie for c in results), results
    assert sum(c.equal for c in results) >= len(results) - 2


# --- a block filled by a decode is hit by a prompt admitted in the same step -----------------
# Block size 4: request A's 3-token prompt is prefilled in step 1; in step 2 its decode writes
# the KV of its first sampled token into slot 3 and so fills block 0, which the block manager
# enters in the prefix cache. A prompt that starts with A's 4 tokens, admitted in step 2, hits
# that block: its prefill must read slot 3 only after the decode wrote it.
FILLER = [5, 6, 7]
FIRST = MODEL.generate_dense([FILLER], 1)[0][0]
HITTER = [*FILLER, FIRST, 9]


def test_a_prompt_hitting_a_block_a_decode_fills_in_the_same_step_online() -> None:
    engine = Engine(MODEL, EngineConfig(num_blocks=16, block_size=4, watermark=0))
    a, b = Request.of(FILLER, 4), Request.of(HITTER, 4)
    engine.add(a)
    engine.step()  # A's prefill
    engine.add(b)  # admitted in the step where A's decode fills block 0
    while not engine.is_idle:
        engine.step()
    assert engine.stats.cached_tokens == 4  # B hit the block A's decode filled
    assert [c.samples[0] for c in engine.completions()] == dense([a, b])
    assert_drained(engine)


def test_a_prompt_hitting_a_block_a_decode_fills_in_the_same_step_in_one_run() -> None:
    """The same in one ``run`` of three requests: C, finished after its prefill, holds the
    blocks that keep B waiting until the step where A's decode fills block 0."""
    a, c, b = Request.of(FILLER, 4), Request.of(range(20, 30), 1), Request.of(HITTER, 4)
    engine, got = run([a, c, b], num_blocks=5, block_size=4, watermark=0)
    assert engine.stats.cached_tokens == 4
    assert [s[0] for s in got] == dense([a, c, b])
    assert_drained(engine)
