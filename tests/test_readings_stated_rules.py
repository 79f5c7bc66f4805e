"""Readings that state, from the first diverging call, the rule it breaks for certain (a put of
a held key changes no bytes, a store that misses writes nowhere, a pin leaves the bits alone,
decode appends no token, ...), and the proofs that keep a cause for the slips that have it:
each rule shown for a real slip graded end to end, and not shown for a look-alike."""

from __future__ import annotations

from typing import Any

import pytest

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.mistakes.kv_offload.lookup_skips_gaps import Buggy as SkipsGaps
from servelab.grading.mistakes.kv_offload.no_cascade import Buggy as NoCascade
from servelab.grading.mistakes.kv_offload.promotes_unpinned import Buggy as PromotesUnpinned
from servelab.grading.mistakes.kv_offload.recompute_no_attention import Buggy as NoAttention
from servelab.grading.readings import Difference
from servelab.grading.readings.kv_offload_rules import rule_reading
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.offload.errors import ChunkTooLarge
from servelab.kv.scheduler import Decode, Prefill

OFF = "kv-offload"
S = "scheduler"
P = "eviction-policy"
Tier1, Tier2 = checkpoint(OFF, 1), checkpoint(OFF, 2)
H3, H4 = checkpoint(OFF, 3), checkpoint(OFF, 4)
Decoding, Final = checkpoint(S, 2), checkpoint(S, 3)
Sieve3 = checkpoint(P, 3)


class PutResidentOverwrites(Tier1):
    """A put of a key already held overwrites its copy in place, with the new size."""

    def put(self, key: Any, payload: Any) -> Any:
        size = self._payload_size(payload)
        if key in self._sizes and size <= self.capacity:
            self._used += size - self._sizes[key]
            self._sizes[key] = size
            self._data[key] = self._write(key, payload)
            return []
        return super().put(key, payload)


class VictimsCountSkipped(Tier2):
    """Takes every chunk's bytes off the need before asking can_evict: a pinned chunk it
    skips counts as room made."""

    def _choose_victims(self, size: int) -> Any:
        need, victims = size - self.free, []
        for key in self._sizes:
            if need <= 0:
                break
            need -= self._sizes[key]
            if self.can_evict(key):
                victims.append(key)
        return victims if need <= 0 else None


class PutResidentMisses(Tier2):
    """A key already held answers None before the size is checked."""

    def put(self, key: Any, payload: Any, wait: int = 0) -> Any:
        if key in self._sizes:
            return None
        return super().put(key, payload, wait)


class StoreFallsToDisk(H3["Hierarchy"]):  # type: ignore[misc]
    """A store the CPU tier cannot take goes straight into the disk tier."""

    def store(self, key: Any, payload: Any) -> Any:
        evicted = self.tiers[0].put(key, payload)
        if evicted is None:
            return self.tiers[1].put(key, payload) is not None
        self._cascade(1, evicted)
        return True


class LookupStopsAtDisk(H3["Hierarchy"]):  # type: ignore[misc]
    """A chunk found only on disk ends the lookup's prefix, once pinned."""

    def lookup(self, keys: Any) -> Any:
        found = []
        for key in keys:
            where = next((i for i, t in enumerate(self.tiers) if key in t), None)
            if where is None:
                break
            self.tiers[where].pin(key)
            found.append((key, where))
            if where > 0:
                break
        return found


class PromoteMoves(H3["Hierarchy"]):  # type: ignore[misc]
    """A promoted chunk is moved up: its disk copy is removed once unpinned."""

    def retrieve(self, found: Any) -> Any:
        payloads = super().retrieve(found)
        for key, i in found:
            moved = i > 0 and key in self.tiers[0] and key in self.tiers[i]
            if moved and self.tiers[i].can_evict(key):
                self.tiers[i].remove(key)
        return payloads


class RecomputeLinearAttention(H4["Hierarchy"]):  # type: ignore[misc]
    """The attention term grows linearly with the tokens (t, not t * t)."""

    def recompute_seconds(self, tokens: int) -> float:
        m = self.model
        return float((2 * m.params * tokens + 2 * m.layers * m.d_model * tokens) / self.flops)


class RecomputeLinearUpTo256(H4["Hierarchy"]):  # type: ignore[misc]
    """Attention linear up to 256 tokens, squared above: not linear at twice the tokens."""

    def recompute_seconds(self, tokens: int) -> float:
        m = self.model
        t2 = tokens if tokens <= 256 else tokens * tokens
        return float((2 * m.params * tokens + 2 * m.layers * m.d_model * t2) / self.flops)


class DecodeAppendsToken(Decoding):
    """decode also appends a token to each sequence it decodes."""

    def decode(self, out: Any) -> None:
        for seq in self.running:
            out.decodes.append(Decode(seq, self.bm.append_slot(seq.seq_id)))
            if not seq.is_finished:
                seq.append_token(0)


class RetireReportsNewestFirst(Decoding):
    """retire walks running newest first: the finished are listed newest first."""

    def retire(self, out: Any) -> None:
        still: list[Any] = []
        for seq in reversed(self.running):
            if seq.is_finished:
                self.bm.free_seq(seq.seq_id)
                out.finished.append(seq)
            else:
                still.insert(0, seq)
        self.running = still


class AdmitRoomForFirstToken(checkpoint(S, 1)):  # type: ignore[misc]
    """admit asks fits(num_tokens + 1), keeping room for the first generated token."""

    def admit(self, out: Any) -> None:
        while self.waiting and self.fits(self.waiting[0].num_tokens + 1):
            seq = self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


class PreemptReportsIds(Final):
    """preempt lists the victim's seq_id in out.preempted, not the sequence."""

    def preempt(self, victim: Any, out: Any) -> None:
        self.bm.free_seq(victim.seq_id)
        self.waiting.appendleft(victim)
        out.preempted.append(victim.seq_id)


class AskerNewestToBack(Final):
    """When the asker is itself the newest running, it goes to the back of waiting."""

    def decode(self, out: Any) -> None:
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            try:
                slot = self.bm.append_slot(seq.seq_id)
            except OutOfBlocks:
                victim = self.running.pop()
                if victim is seq:
                    self.bm.free_seq(seq.seq_id)
                    self.waiting.append(seq)
                    out.preempted.append(seq)
                else:
                    self.preempt(victim, out)
                continue
            out.decodes.append(Decode(seq, slot))
            i += 1


class PinClearsVisit(Sieve3["SIEVE"]):  # type: ignore[misc]
    """A pin clears the key's visited bit."""

    def update_on_pin(self, key: Any) -> None:
        self.pinned.add(key)
        self.visited[key] = False


def _h(cls: type, step: int) -> Any:
    return {**checkpoint(OFF, step), "Hierarchy": cls}


CASES = [
    (OFF, PutResidentOverwrites, 1, "a put of a resident key is a use", ()),
    (OFF, VictimsCountSkipped, 2, "returns None and the put misses", ()),
    (OFF, PutResidentMisses, 2, "raises ChunkTooLarge whatever the tier holds", ()),
    (OFF, _h(StoreFallsToDisk, 3), 3, "store writes into the cpu tier only", ()),
    (OFF, _h(LookupStopsAtDisk, 3), 3, "stops only at the first key that no tier holds", ()),
    (OFF, _h(PromoteMoves, 3), 3, "the copy below stays", ()),
    (OFF, _h(RecomputeLinearAttention, 4), 4, "grows with their square", ("exactly like",)),
    (S, DecodeAppendsToken, 2, "leaves its tokens alone", ("written for",)),
    (S, RetireReportsNewestFirst, 2, "lists each finished sequence in that order", ()),
    # one token to generate: your admit, asked again about a shorter sequence with two to
    # generate, tells a slot for the first decode from prompt + max_new_tokens
    (S, AdmitRoomForFirstToken, 1, "a token more than it allocates", ("max_new_tokens?",)),
    (S, PreemptReportsIds, 3, "the victim's seq_id", ("did not put",)),
    (S, AskerNewestToBack, 3, "each victim goes to the front of waiting", ("their ids",)),
    (P, {**Sieve3, "SIEVE": PinClearsVisit}, 3, "a pin leaves the visited bits alone", ()),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_a_slip_gets_the_rule_its_call_breaks(case: tuple[Any, ...]) -> None:
    topic, impl, step, said, unsaid = case
    report, _ = failing_report(topic, impl, step)
    assert said in report.hint, report.hint
    assert not any(u in report.hint for u in unsaid), report.hint


@pytest.mark.parametrize(
    "impl, step, unsaid",
    [
        (NoAttention, 4, "grows with their square"),  # the term left out: not a linear one
        (PromotesUnpinned, 3, "the copy below stays"),  # a chunk evicted, not moved
        (NoCascade, 3, "store writes into the cpu tier only"),  # dropped, not written below
        (SkipsGaps, 3, "stops only at the first key"),  # went on past a gap: not short
    ],
)
def test_a_look_alike_does_not_get_that_rule(impl: Any, step: int, unsaid: str) -> None:
    report, _ = failing_report(OFF, impl, step)
    assert unsaid not in report.hint, report.hint


def _recompute_difference(cls: type, tokens: int) -> Difference:
    h = cls(1000, 1000)
    ref = H4["Hierarchy"](1000, 1000)
    mine, theirs = h.recompute_seconds(tokens), ref.recompute_seconds(tokens)
    return Difference(
        "recompute_seconds",
        "Hierarchy",
        (tokens,),
        {},
        {},
        {},
        f"returned {mine!r}",
        f"returned {theirs!r}",
        h,
    )


def test_a_linear_attention_term_is_stated_only_where_twice_the_tokens_prove_it() -> None:
    linear = rule_reading(_recompute_difference(RecomputeLinearAttention, 256))
    assert linear is not None and "grows with their square" in linear
    # linear at 256 tokens but squared at 512: the second call refutes it, nothing is said
    assert rule_reading(_recompute_difference(RecomputeLinearUpTo256, 256)) is None


def test_a_chunk_too_large_is_read_only_where_the_reference_raised_it() -> None:
    tier = Tier2(100)
    before = {"keys": [], "used": 0, "pins": {}, "refs": {}}
    d = Difference(
        "put",
        "",
        ("a", b"a" * 101),
        before,
        before,
        before,
        "returned None",
        "raised ChunkTooLarge",
        tier,
    )
    assert "raises ChunkTooLarge" in (rule_reading(d) or "")
    other = Difference(
        "put",
        "",
        ("a", b"a" * 10),
        before,
        before,
        before,
        "returned None",
        "returned []",
        tier,
    )
    assert rule_reading(other) is None
    assert issubclass(ChunkTooLarge, ValueError)
