"""The script a token-budget probe runs: a fresh scheduler over a reference block manager,
every call written as the line the report shows."""

from __future__ import annotations

from typing import Any

from servelab.grading._script import Script, graded_names
from servelab.grading.token_budget_replay import NAME, REPLAY
from servelab.grading.topic import ProbeFailed
from servelab.kv.budget import BudgetStep

__all__ = ["CHUNKS", "BudgetScript"]


class BudgetScript(Script):
    """A :class:`Script` on a fresh scheduler over a reference block manager: every call runs
    as the line the report shows, the graded class under the learner's own name."""

    def __init__(
        self,
        impl: Any,
        num_blocks: int,
        block_size: int,
        budget: int,
        cap: int = 4,
        prefix: bool = False,
    ) -> None:
        super().__init__(REPLAY.namespace(impl), graded_names(REPLAY, impl))
        manager = "PrefixCachingBlockManager" if prefix else "BlockManager"
        self(f"bm = {manager}(num_blocks={num_blocks}, block_size={block_size})")
        self(f"sched = {NAME}(bm, max_num_batched_tokens={budget}, max_num_seqs={cap})")

    @property
    def bm(self) -> Any:
        return self.ns["bm"]

    @property
    def sched(self) -> Any:
        return self.ns["sched"]

    @property
    def out(self) -> Any:
        return self.ns["out"]

    def add(self, sid: int, prompt: list[int], max_new_tokens: int) -> None:
        self(f"sched.add(Sequence.from_prompt({sid}, {prompt}, {max_new_tokens}))")

    def step(self, emit: bool = True) -> list[tuple[int, int, int, bool]]:
        """One step; its chunks as (seq_id, start, num_tokens, samples)."""
        self("out = sched.step()")
        out = self.out
        if not isinstance(out, BudgetStep):
            raise self.fail(f"step() returned {out!r}; it must return a BudgetStep")
        chunks = [(c.seq.seq_id, c.start, c.num_tokens, c.samples) for c in out.scheduled]
        if emit:
            for seq in out.computed():
                self(f"sched.sequence({seq.seq_id}).append_token(1)")
        return chunks

    def ids(self, name: str) -> list[int]:
        return [s.seq_id for s in getattr(self.sched, name)]

    def computed(self, sid: int) -> int:
        return int(self(f"sched.num_computed_tokens({sid})"))

    def fail(
        self, message: str, rule: str | None = None, *, hint: str | None = None
    ) -> ProbeFailed:
        self.note(
            f"# running {self.ids('running')}, waiting {self.ids('waiting')}, "
            f"free {self.bm.num_free}"
        )
        return super().fail(message, rule, hint=hint)

    def expect(self, got: object, want: object, what: str) -> None:
        if got != want:
            raise self.fail(f"{what} is {got!r}, expected {want!r}")


CHUNKS = "scheduled chunks as (seq_id, start, num_tokens, samples)"
