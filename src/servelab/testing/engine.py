"""The engine topic's state machine: random workloads served by a learner's classes, every
token and every KV slot compared with dense generation.

Requests arrive between steps (online); some share a stem (a system prompt), some fork into
parallel samples, some continue every token a running request has so far (so a prompt hits
the block that request's next decode fills, in the step that admits it), and pools are tight
enough to preempt by recompute. The model of what the engine must produce is a dense run of
each request with a contiguous KV cache, sampled as the engine samples.

Three checks, strongest first, so a failure names the first wrong slot, not a late symptom:

1. the engine's :class:`~servelab.kv.ledger.SlotLedger` checks every read as it happens (a
   :class:`~servelab.kv.ledger.KVDivergence` names the step, sequence, position, slot and the
   block tables pointing there);
2. after each step, the KV in the pool at every position of every running sequence equals
   the dense KV of the same tokens (``kv-values``);
3. every sampled token equals dense generation's (``tokens``); a drained engine holds no
   block (``no-leak``).

torch is imported when a machine is built, not when this module is imported, so the course
half still imports without it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from servelab.kv.ledger import KVDivergence, holders_of
from servelab.testing.core import InvariantViolation, RecordingMachine

__all__ = [
    "INVARIANTS",
    "MAX_TOKENS",
    "dense_samples",
    "engine_machine",
    "reference_model",
]

MAX_TOKENS = 16  # prompt + max_new_tokens of one request
STEMS = ([11, 12, 13, 14, 15, 16], [11, 12, 13, 20, 21], [30, 31])  # shared prefixes
INVARIANTS: dict[str, str] = {
    "read-unwritten": "every slot a sequence reads was written before the read",
    "read-foreign": "every slot a sequence reads holds the KV of its own tokens",
    "slot-mapping": "append_slot's slot is where the block table puts the token",
    "double-write": "no two sequences write one slot in one step",
    "kv-overwritten": "after a step, every running sequence's slots still hold its KV",
    "length": "a computed sequence has a slot for each of its tokens",
    "kv-values": "the pool's KV equals a dense run's at every position",
    "tokens": "every sampled token equals dense generation's",
    "no-leak": "a drained engine holds no block",
}
BUILD = (
    "from servelab.kv.engine import Request",
    "from servelab.testing.engine import reference_model",
    "model = reference_model()",
)


@cache
def reference_model() -> Any:
    """The tiny model every engine check serves (seeded: the same weights everywhere)."""
    from servelab.kv.model import ModelConfig, TinyLlama

    return TinyLlama(ModelConfig(max_seq_len=64))


@cache
def dense_samples(request: Any) -> tuple[tuple[int, ...], ...]:
    """Each sample's tokens from a contiguous cache, sampled as the engine samples: greedy at
    temperature 0, else Gumbel-max with noise seeded by (the sample's seed, its position)."""
    import torch

    from servelab.kv.engine import _gumbel
    from servelab.kv.model import DenseKVCache

    model = reference_model()
    prompt, vocab = list(request.prompt), model.config.vocab_size
    samples: list[tuple[int, ...]] = []
    with torch.no_grad():
        for i in range(request.n if request.temperature else 1):
            cache_ = DenseKVCache(model, 1, len(prompt) + request.max_new_tokens)
            logits = cache_.prefill(0, prompt).float()
            tokens: list[int] = []
            for position in range(len(prompt), len(prompt) + request.max_new_tokens):
                if request.temperature:
                    scale = torch.tensor([1.0 / request.temperature])
                    logits = logits * scale + _gumbel(request.seed + i, position, vocab)
                tokens.append(int(logits.argmax()))
                if len(tokens) < request.max_new_tokens:
                    logits = cache_.decode([tokens[-1]])[0].float()
            samples.append(tuple(tokens))
    if not request.temperature:
        samples *= request.n
    return tuple(samples)


@cache
def dense_kv(tokens: tuple[int, ...]) -> Any:
    """The KV of ``tokens`` from a dense prefill: ``[layers, 2, positions, kv_heads, dim]``."""
    import torch

    from servelab.kv.model import DenseKVCache

    model = reference_model()
    dense = DenseKVCache(model, 1, len(tokens))
    with torch.no_grad():
        dense.prefill(0, list(tokens))
    return dense.kv[:, :, 0].transpose(2, 3)


def check_kv_values(engine: Any) -> None:
    """The pool's KV at every position of every running sequence equals the dense KV."""
    import torch

    size = engine.blocks.block_size
    tables = engine.blocks.tables()
    for seq in engine.learner_scheduler.running:
        n = engine.blocks.seq_len(seq.seq_id)
        if n == 0:
            continue
        table = tables[seq.seq_id]
        blocks = torch.tensor([table[p // size] for p in range(n)])
        offsets = torch.tensor([p % size for p in range(n)])
        paged = engine.pool.kv[:, :, blocks, offsets]
        want = dense_kv(tuple(seq.token_ids[:n]))
        wrong = ~torch.isclose(paged, want, atol=1e-4, rtol=1e-4)
        if bool(wrong.any()):
            p = int(wrong.nonzero()[0][2])
            block, offset = table[p // size], p % size
            holders = holders_of(block, tables)
            who = "; ".join(
                f"sequence {s} (entry {', '.join(map(str, e))})" for s, e in holders.items()
            )
            raise InvariantViolation(
                "kv-values",
                f"after step {engine.stats.steps}: sequence {seq.seq_id}'s position {p} in slot "
                f"(block {block}, offset {offset}) does not hold the KV a dense run computes "
                f"for its tokens\nblock tables pointing at block {block}: {who}",
            )


def check_tokens(engine: Any, requests: dict[int, Any]) -> None:
    """Every sample's tokens so far are a prefix of its dense run's."""
    for rid, group in engine._groups.items():
        expected = dense_samples(requests[rid])
        for seq in group.seqs:
            index = engine._samples[seq.seq_id].index
            _same_tokens(engine, rid, seq.seq_id, index, seq.token_ids[seq.prompt_len :], expected)
    for done in engine.completions():
        expected = dense_samples(requests[done.request_id])
        for index, got in enumerate(done.samples):
            _same_tokens(engine, done.request_id, None, index, got, expected)


def _same_tokens(
    engine: Any, rid: int, seq: int | None, index: int, got: list[int], expected: Any
) -> None:
    want = list(expected[index][: len(got)])
    if got == want:
        return
    i = next(j for j, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
    who = f"sequence {seq}" if seq is not None else f"request {rid}"
    raise InvariantViolation(
        "tokens",
        f"after step {engine.stats.steps}: {who} (request {rid}, sample {index}) generated "
        f"token {got[i]} at new token {i}, dense generation gives {want[i]}",
    )


def engine_machine(impl: Any, *, max_spare: int = 3) -> type[RecordingMachine]:
    """A state machine serving random workloads with ``impl`` (an
    :class:`~servelab.kv.learner_engine.EngineSkeleton` subclass)."""
    from servelab.kv.engine import Request

    name = getattr(impl, "__name__", "ServingEngine")

    class EngineMachine(RecordingMachine):
        call_timeout = 4.0

        def __init__(self) -> None:
            super().__init__()
            self.engine: Any = None
            self.requests: dict[int, Any] = {}

        @initialize(
            block_size=st.sampled_from([2, 1, 4]),
            spare=st.integers(0, max_spare),
            watermark=st.integers(0, 1),
        )
        def configure(self, block_size: int, spare: int, watermark: int) -> None:
            for line in BUILD:
                self.record(line)
            blocks = -(-MAX_TOKENS // block_size) + watermark + spare * max(1, 4 // block_size)
            args = f"num_blocks={blocks}, block_size={block_size}, watermark={watermark}"
            self.engine = self.do(
                f"engine = {name}(model, {args})",
                lambda: impl(
                    reference_model(),
                    num_blocks=blocks,
                    block_size=block_size,
                    watermark=watermark,
                ),
            )

        def _add(
            self, prompt: list[int], max_new: int, n: int, temperature: float, seed: int
        ) -> None:
            prompt = prompt[: MAX_TOKENS - 1]
            max_new = min(max_new, MAX_TOKENS - len(prompt))
            request = Request.of(prompt, max_new, n=n, temperature=temperature, seed=seed)
            dense_samples(request)  # before the engine sees it: the reference must not fail
            extra = f", n={n}" if n > 1 else ""
            extra += f", temperature={temperature}, seed={seed}" if temperature else ""
            code = f"engine.add(Request.of({prompt}, {max_new}{extra}))"
            rid = self.do(code, lambda: self.engine.add(request))
            self.requests[rid] = request

        @rule(
            stem=st.sampled_from(range(len(STEMS) + 1)),
            tail=st.lists(st.integers(0, 255), min_size=1, max_size=4),
            max_new=st.integers(1, 6),
            n=st.sampled_from([1, 1, 2, 3]),
            temperature=st.sampled_from([0.0, 0.8]),
            seed=st.integers(0, 3),
        )
        def add(
            self, stem: int, tail: list[int], max_new: int, n: int, temperature: float, seed: int
        ) -> None:
            prefix = list(STEMS[stem]) if stem < len(STEMS) else []
            self._add(prefix + tail, max_new, n, temperature, seed)

        def _decoding(self) -> list[int]:
            """Requests with a sample running and not finished: they decode next step."""
            samples = [self.engine._samples.get(s.seq_id) for s in self.engine.scheduler.running]
            return sorted({s.request_id for s in samples if s is not None})

        @precondition(lambda self: self.engine is not None and self._decoding())
        @rule(
            data=st.data(),
            tail=st.lists(st.integers(0, 255), min_size=1, max_size=2),
            max_new=st.integers(1, 4),
        )
        def add_continuation(self, data: st.DataObject, tail: list[int], max_new: int) -> None:
            """A prompt of every token a running request has so far, and more: it hits the
            block that request's next decode fills, in the step that admits it."""
            rid = data.draw(st.sampled_from(self._decoding()), label="continues")
            group = self.engine._groups[rid]
            tokens = list(group.seqs[0].token_ids)
            self._add(tokens + tail, max_new, 1, 0.0, 0)

        @precondition(lambda self: self.engine is not None and not self.engine.is_idle)
        @rule()
        def step(self) -> None:
            self._step()

        @precondition(lambda self: self.engine is not None)
        @rule()
        def drain(self) -> None:
            steps = 0
            while not self.engine.is_idle and steps < 200:
                self._step()
                steps += 1
            free, total = self.engine.blocks.num_free, self.engine.blocks.num_blocks
            if free != total:
                raise InvariantViolation(
                    "no-leak",
                    f"every request finished, yet only {free} of {total} blocks are free",
                )

        def _step(self) -> None:
            try:
                self.do("engine.step()", self.engine.step)
            except KVDivergence as exc:
                raise InvariantViolation(exc.kind, exc.describe()) from None
            check_kv_values(self.engine)
            check_tokens(self.engine, self.requests)

    return EngineMachine
