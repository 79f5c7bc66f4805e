"""The engine under the token-budget scheduler: chunked prefill produces exactly dense tokens."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from servelab.kv.blocks import InvalidConfig  # noqa: E402
from servelab.kv.engine import Engine, EngineConfig, InvalidSamplingRequest, Request  # noqa: E402
from servelab.kv.model import ModelConfig, TinyLlama  # noqa: E402

torch.set_num_threads(1)  # tiny tensors: threads only add contention on a shared machine
MODEL = TinyLlama(ModelConfig(max_seq_len=256))
BLOCK = 4


def workload(seed: int, n: int = 8, shared: int = 13) -> list[Request]:
    """Requests whose prompts share a prefix of ``shared`` tokens, with mixed lengths."""
    rng = random.Random(seed)
    prefix = [rng.randrange(256) for _ in range(shared)]
    return [
        Request.of(
            prefix + [rng.randrange(256) for _ in range(rng.randrange(1, 12))],
            rng.randrange(1, 16),
        )
        for _ in range(n)
    ]


REQUESTS = workload(0)
EXPECTED = [MODEL.generate_dense([list(r.prompt)], r.max_new_tokens)[0] for r in REQUESTS]


def serve(budget: int, **config: object) -> Engine:
    cfg = {"num_blocks": 96, "block_size": BLOCK, "scheduler": "token-budget"} | config
    engine = Engine(MODEL, EngineConfig(max_num_batched_tokens=budget, **cfg))  # type: ignore[arg-type]
    got = engine.run(REQUESTS)
    assert [c.samples[0] for c in got] == EXPECTED
    assert engine.stats.generated_tokens == sum(r.max_new_tokens for r in REQUESTS)
    engine.step()  # retire the last finished requests
    assert engine.is_idle and engine.bm.num_free == engine.config.num_blocks
    return engine


# 1, 2, 3 and block_size +- 1 make chunks that end mid-block; 1000 takes every prompt whole
BUDGETS = [1, 2, 3, BLOCK - 1, BLOCK + 1, 1000]


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("prefix_caching", [False, True], ids=["plain", "prefix"])
def test_chunked_prefill_equals_dense(budget: int, prefix_caching: bool) -> None:
    engine = serve(budget, prefix_caching=prefix_caching)
    if prefix_caching:
        assert engine.stats.cached_tokens > 0  # the shared prefix was hit
    if budget < 13:
        assert engine.stats.steps > len(REQUESTS) + max(r.max_new_tokens for r in REQUESTS)


@pytest.mark.parametrize("budget", [3, BLOCK + 1, 1000])
@pytest.mark.parametrize("prefix_caching", [False, True], ids=["plain", "prefix"])
def test_preemption_in_a_tight_pool_equals_dense(budget: int, prefix_caching: bool) -> None:
    engine = serve(budget, num_blocks=12, prefix_caching=prefix_caching)
    assert engine.stats.preemptions > 0


def test_watermark_and_sequence_cap_change_no_token() -> None:
    engine = serve(5, num_blocks=14, budget_watermark=0.2, max_num_seqs=3)
    assert engine.stats.steps > 0


def test_the_token_budget_engine_rejects_what_it_does_not_serve() -> None:
    with pytest.raises(InvalidConfig):
        EngineConfig(scheduler="fifo")  # type: ignore[arg-type]
    with pytest.raises(InvalidConfig):
        EngineConfig(scheduler="token-budget", preemption="swap", num_host_blocks=4)
    engine = Engine(MODEL, EngineConfig(num_blocks=8, block_size=4, scheduler="token-budget"))
    with pytest.raises(InvalidSamplingRequest):
        engine.add(Request.of([1, 2], 3, n=0))
    assert engine.is_idle


SAMPLED = [
    Request.of(list(r.prompt), r.max_new_tokens, n=3, temperature=0.8, seed=10 * i)
    for i, r in enumerate(REQUESTS[:4])
]


def independent(request: Request) -> list[list[int]]:
    """Each sample as its own n=1 request with seed + i: what every scheduler must produce."""
    engine = Engine(MODEL, EngineConfig(num_blocks=96, block_size=BLOCK))
    return [
        engine.run(
            [
                Request.of(
                    request.prompt, request.max_new_tokens, temperature=0.8, seed=request.seed + i
                )
            ]
        )[0].samples[0]
        for i in range(request.n)
    ]


SAMPLED_EXPECTED = [independent(r) for r in SAMPLED]


@pytest.mark.parametrize("budget", [2, BLOCK + 1, 1000])
@pytest.mark.parametrize("prefix_caching", [False, True], ids=["plain", "prefix"])
@pytest.mark.parametrize("num_blocks", [96, 12], ids=["roomy", "tight"])
def test_parallel_sampling_fans_out_and_equals_independent_samples(
    budget: int, prefix_caching: bool, num_blocks: int
) -> None:
    # vLLM v1 serves n > 1 as n requests of one prompt; the v0 engine forks. Both must give
    # every sample the tokens of an independent request with its seed.
    cfg = EngineConfig(
        num_blocks=num_blocks,
        block_size=BLOCK,
        scheduler="token-budget",
        max_num_batched_tokens=budget,
        prefix_caching=prefix_caching,
    )
    engine = Engine(MODEL, cfg)
    got = engine.run(SAMPLED)
    assert [c.samples for c in got] == SAMPLED_EXPECTED
    v0 = Engine(MODEL, EngineConfig(num_blocks=96, block_size=BLOCK)).run(SAMPLED)
    assert [c.samples for c in v0] == SAMPLED_EXPECTED
    if prefix_caching and num_blocks == 96:
        # samples 1 and 2 of each request hit the prompt blocks sample 0 registered
        assert engine.stats.cached_tokens >= 2 * sum(
            (len(r.prompt) - 1) // BLOCK * BLOCK for r in SAMPLED
        )
    if num_blocks == 12:
        assert engine.stats.preemptions > 0
    engine.step()
    assert engine.is_idle and engine.bm.num_free == num_blocks
