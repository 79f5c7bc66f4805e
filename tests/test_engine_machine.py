"""The engine under a state machine: every token it samples is the token dense generation gives.

Requests arrive between steps (online), share prefixes with each other and continue the
tokens an earlier request has generated so far (so a prompt can hit a block that a decode
fills in the very step the prompt is admitted), fork into parallel samples, and run in pools
tight enough to preempt, by recompute or by swap, under watermarks. After every step each
live sample's tokens must be a prefix of what a dense, contiguous-cache run of the same
request gives, and a drained engine must hold no block.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from hypothesis import Phase, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (  # noqa: E402
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from servelab.kv.engine import Engine, EngineConfig, Request, _gumbel  # noqa: E402
from servelab.kv.model import DenseKVCache, ModelConfig, TinyLlama  # noqa: E402
from servelab.testing.core import thoroughness  # noqa: E402
from servelab.testing.prefix_cache import check_prefix_cache_invariants  # noqa: E402

torch.set_num_threads(1)
MODEL = TinyLlama(ModelConfig(max_seq_len=64))
MAX_TOKENS = 20  # prompt + max_new_tokens of one request
STEMS = [[11, 12, 13, 14, 15, 16], [11, 12, 13, 20, 21], [30, 31]]  # shared prefixes

_dense_cache: dict[Request, list[list[int]]] = {}


@torch.no_grad()
def dense_samples(request: Request) -> list[list[int]]:
    """Each sample's tokens from a contiguous cache, sampled as the engine samples: greedy at
    temperature 0, else Gumbel-max with noise seeded by (the sample's seed, its position)."""
    if request in _dense_cache:
        return _dense_cache[request]
    prompt, vocab = list(request.prompt), MODEL.config.vocab_size
    samples: list[list[int]] = []
    for i in range(request.n if request.temperature else 1):
        cache = DenseKVCache(MODEL, 1, len(prompt) + request.max_new_tokens)
        logits = cache.prefill(0, prompt).float()
        tokens: list[int] = []
        for position in range(len(prompt), len(prompt) + request.max_new_tokens):
            if request.temperature:
                scale = torch.tensor([1.0 / request.temperature])
                logits = logits * scale + _gumbel(request.seed + i, position, vocab)
            tokens.append(int(logits.argmax()))
            if len(tokens) < request.max_new_tokens:
                logits = cache.decode([tokens[-1]])[0].float()
        samples.append(tokens)
    if not request.temperature:
        samples *= request.n
    _dense_cache[request] = samples
    return samples


class EngineMachine(RuleBasedStateMachine):
    """Online requests against an engine; the model of what it must produce is dense runs."""

    def __init__(self) -> None:
        super().__init__()
        self.engine: Engine
        self.requests: dict[int, Request] = {}

    @initialize(
        block_size=st.sampled_from([1, 2, 4]),
        spare=st.integers(0, 12),  # blocks beyond what the longest request needs
        watermark=st.integers(0, 2),
        prefix_caching=st.booleans(),
        swap=st.sampled_from([0, 3, 64]),  # host blocks; 0: preempt by recompute
    )
    def configure(
        self, block_size: int, spare: int, watermark: int, prefix_caching: bool, swap: int
    ) -> None:
        need = -(-MAX_TOKENS // block_size)
        config = EngineConfig(
            num_blocks=need + watermark + spare * (4 // block_size),
            block_size=block_size,
            prefix_caching=prefix_caching,
            preemption="swap" if swap else "recompute",
            num_host_blocks=swap,
            watermark=watermark,
        )
        self.engine = Engine(MODEL, config)

    def _add(self, prompt: list[int], max_new: int, n: int, temperature: float, seed: int) -> None:
        prompt = prompt[: MAX_TOKENS - 1]
        request = Request.of(
            prompt, min(max_new, MAX_TOKENS - len(prompt)), n=n, temperature=temperature, seed=seed
        )
        dense_samples(request)  # before the engine sees it: the reference must not fail
        self.requests[self.engine.add(request)] = request

    @rule(
        stem=st.sampled_from(range(len(STEMS) + 1)),
        tail=st.lists(st.integers(0, 255), min_size=1, max_size=6),
        max_new=st.integers(1, 8),
        n=st.sampled_from([1, 1, 2, 3]),
        temperature=st.sampled_from([0.0, 0.8]),
        seed=st.integers(0, 3),
    )
    def add(
        self, stem: int, tail: list[int], max_new: int, n: int, temperature: float, seed: int
    ) -> None:
        prefix = STEMS[stem] if stem < len(STEMS) else []
        self._add(prefix + tail, max_new, n, temperature, seed)

    def _decoding(self) -> list[int]:
        """Requests with a sample that is running and not finished: decoded next step."""
        samples = [self.engine._samples.get(s.seq_id) for s in self.engine.scheduler.running]
        return sorted({s.request_id for s in samples if s is not None})

    def _continue(self, rid: int, k: int | None, tail: list[int], max_new: int) -> None:
        """A prompt of request ``rid``'s prompt, its first ``k`` tokens (None: every token
        its first sample has so far) and ``tail``."""
        request = self.requests[rid]
        expected = dense_samples(request)[0]
        if k is None:
            group = self.engine._groups.get(rid)
            k = len(group.seqs[0].token_ids) - len(request.prompt) if group else len(expected)
        self._add(list(request.prompt) + expected[:k] + tail, max_new, 1, 0.0, 0)

    @precondition(lambda self: self.requests)
    @rule(
        data=st.data(),
        tail=st.lists(st.integers(0, 255), max_size=2),
        max_new=st.integers(1, 6),
    )
    def add_continuation(self, data: st.DataObject, tail: list[int], max_new: int) -> None:
        """A prompt that continues the tokens of an earlier request, finished or not."""
        rid = data.draw(st.sampled_from(sorted(self.requests)), label="continues")
        k = data.draw(st.integers(0, MAX_TOKENS), label="tokens")
        self._continue(rid, k, tail, max_new)

    @precondition(lambda self: self._decoding())
    @rule(
        data=st.data(),
        tail=st.lists(st.integers(0, 255), min_size=1, max_size=2),
        max_new=st.integers(1, 6),
    )
    def add_continuation_of_a_running_request(
        self, data: st.DataObject, tail: list[int], max_new: int
    ) -> None:
        """A prompt of every token a running request has so far, and more: it hits the block
        that the request's next decode fills (with one-token blocks, every decode fills one),
        in the step that admits it."""
        rid = data.draw(st.sampled_from(self._decoding()), label="continues")
        self._continue(rid, None, tail, max_new)

    @precondition(lambda self: not self.engine.is_idle)
    @rule()
    def step(self) -> None:
        self._step()

    @rule()
    def drain(self) -> None:
        steps = 0
        while not self.engine.is_idle:
            self._step()
            steps += 1
            assert steps < 1000, "the engine did not drain"
        self.engine.step()  # retire the last finished sequences
        assert self.engine.bm.num_free == self.engine.config.num_blocks

    def _step(self) -> None:
        """One engine step, then its tokens, and the KV of every sequence it started (a
        prefill, a swap-in, a fork): a wrong slot read changes a token only now and then,
        but it always changes the KV computed after it."""
        running = self.engine.scheduler.running
        before = {s.seq_id for s in running}
        self.engine.step()
        self._check_tokens()
        for seq in running:
            if seq.seq_id not in before:
                self._check_kv(seq.seq_id, seq.token_ids)

    def _check_kv(self, seq_id: int, tokens: list[int]) -> None:
        """The sequence's KV in the paged pool equals a dense prefill of the same tokens."""
        engine = self.engine
        n = engine.bm.seq_len(seq_id)
        table, size = engine.bm.block_table(seq_id), engine.config.block_size
        blocks = torch.tensor([table[p // size] for p in range(n)])
        offsets = torch.tensor([p % size for p in range(n)])
        paged = engine.pool.kv[:, :, blocks, offsets]  # [layers, 2, n, kv_heads, head_dim]
        dense = DenseKVCache(MODEL, 1, n)
        with torch.no_grad():
            dense.prefill(0, tokens[:n])
        want = dense.kv[:, :, 0].transpose(2, 3)  # [layers, 2, n, kv_heads, head_dim]
        torch.testing.assert_close(paged, want, atol=1e-4, rtol=1e-4, msg=f"KV of {seq_id}")

    def _check_tokens(self) -> None:
        engine = self.engine
        for rid, group in engine._groups.items():
            expected = dense_samples(self.requests[rid])
            for seq in group.seqs:
                index = engine._samples[seq.seq_id].index
                got = seq.token_ids[seq.prompt_len :]
                assert got == expected[index][: len(got)], (rid, index)
        for done in engine.completions():
            assert done.samples == dense_samples(self.requests[done.request_id])
        if engine.prefix is not None:
            check_prefix_cache_invariants(engine.prefix)


def test_engine_state_machine_matches_dense_generation() -> None:
    """Dev: 15 programs, a few seconds; thorough (CI): 400, under a minute on two cores.
    Without shrinking: a failing program is reported as found (each step printed), since
    shrinking one took over five minutes on two busy cores."""
    scale = thoroughness()
    phases = [p for p in settings().phases if p is not Phase.shrink]
    run_state_machine_as_test(
        EngineMachine,
        settings=settings(
            settings(),
            max_examples=15 if scale == 1 else 40 * scale,
            stateful_step_count=25,
            phases=phases,
        ),
    )


class BudgetEngineMachine(EngineMachine):
    """The same programs served by the token-budget scheduler: chunked prefills of 1 to 9
    tokens (ending mid-block), prefix hits, preemption by recompute in tight pools, the
    watermark and the sequence cap; one sample per request."""

    @initialize(
        block_size=st.sampled_from([1, 2, 4]),
        spare=st.integers(0, 3),  # tight: requests preempt each other
        budget=st.integers(1, 9),
        max_num_seqs=st.integers(1, 4),
        watermark=st.sampled_from([0.0, 0.0, 0.2]),
        prefix_caching=st.booleans(),
    )
    def configure_budget(
        self,
        block_size: int,
        spare: int,
        budget: int,
        max_num_seqs: int,
        watermark: float,
        prefix_caching: bool,
    ) -> None:
        need = -(-MAX_TOKENS // block_size)
        config = EngineConfig(
            num_blocks=need + spare * (4 // block_size),
            block_size=block_size,
            prefix_caching=prefix_caching,
            scheduler="token-budget",
            max_num_batched_tokens=budget,
            max_num_seqs=max_num_seqs,
            budget_watermark=watermark,
        )
        self.engine = Engine(MODEL, config)

    def configure(self, *args: object, **kwargs: object) -> None:  # type: ignore[override]
        """Replaced by ``configure_budget``: this machine never builds a v0 engine."""

    def _add(self, prompt: list[int], max_new: int, n: int, temperature: float, seed: int) -> None:
        assert self.engine.config.scheduler == "token-budget"
        super()._add(prompt, max_new, 1, temperature, seed)


def test_token_budget_engine_state_machine_matches_dense_generation() -> None:
    """As the v0 machine: 15 programs in dev, 40 x the thoroughness in CI, no shrinking."""
    scale = thoroughness()
    phases = [p for p in settings().phases if p is not Phase.shrink]
    run_state_machine_as_test(
        BudgetEngineMachine,
        settings=settings(
            settings(),
            max_examples=15 if scale == 1 else 40 * scale,
            stateful_step_count=25,
            phases=phases,
        ),
    )
