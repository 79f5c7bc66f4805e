"""The token-budget grader: passes correct schedulers, fails every known mistake with its hint."""

from __future__ import annotations

import io
from typing import Any

import pytest

from buggy_impls import correct_module, diagnosed_hint, mistakes
from servelab.grading import GradeFailure, grade
from servelab.kv.budget import TokenBudgetScheduler

TOPIC = "token-budget"
MISTAKES = mistakes(TOPIC)


def test_every_mistake_the_course_names_has_a_buggy_implementation() -> None:
    names = {m.name for m in MISTAKES}
    assert {
        "advance_by_budget",
        "waiting_first",
        "budget_spent_twice",
        "preempt_keeps_computed",
        "whole_prompt_blocks",
        "last_chunk_no_sample",
        "prefix_hit_charged",
    } <= names


@pytest.mark.parametrize("step", [2, 3])
def test_the_reference_scheduler_passes_the_chunked_steps(step: int) -> None:
    # step 1 admits prompts whole, a rule of the notebook's first step that the reference,
    # which chunks, does not follow
    report = grade(TOPIC, TokenBudgetScheduler, step=step, out=io.StringIO())
    assert report.passed and report.text.endswith("PASSED")


@pytest.mark.parametrize("step", [1, 2, 3])
def test_each_steps_checkpoint_passes_its_step(step: int) -> None:
    impl = correct_module(TOPIC).STEPS[step]()
    assert grade(TOPIC, impl, step=step, out=io.StringIO()).passed


def test_a_step_1_class_fails_step_2_on_a_long_prompt() -> None:
    # whole-prompt admission cannot pass chunked prefill: the steps really differ
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, correct_module(TOPIC).STEPS[1](), step=2, out=io.StringIO(), quiet=True)
    assert "chunks" in failure.value.report.text


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_fails_with_a_hint_naming_it(mistake: Any) -> None:
    # the hint a learner reads: the mistake diagnosed by matching behaviour, else the check's
    report, hint = diagnosed_hint(TOPIC, mistake.impl)
    assert not report.passed
    assert mistake.hint.lower() in hint.lower(), (mistake.name, hint, report.text)


def test_the_repro_is_code_that_shows_the_mistake() -> None:
    bug = next(m for m in MISTAKES if m.name == "preempt_keeps_computed")
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, bug.impl, out=io.StringIO())
    code = failure.value.report.code
    assert f"sched = {bug.impl.__name__}(bm," in code  # the graded class, by its own name
    namespace: dict[str, Any] = {bug.impl.__name__: bug.impl}
    exec(
        "from servelab.kv.blocks import BlockManager\n"
        "from servelab.kv.prefix import PrefixCachingBlockManager\n"
        "from servelab.kv.scheduler import Sequence\n" + code,
        namespace,
    )
    sched = namespace["sched"]
    assert any(sched.num_computed_tokens(s.seq_id) for s in sched.waiting)


def test_a_schedule_no_rule_explains_says_where_the_chunks_come_from_not_the_difference() -> None:
    from servelab import checkpoint
    from servelab.grading.token_budget import _budget_bounds_the_step
    from servelab.grading.token_budget_hints import PROBE_HINTS
    from servelab.grading.topic import ProbeFailed
    from servelab.kv.blocks import OutOfBlocks
    from servelab.kv.budget import Chunk

    class AdmitsOnePerStep(checkpoint(TOPIC, 1)):  # type: ignore[misc]
        """Admits at most one prompt a step, within the budget: no rule the chunks name."""

        def admit(self, out: Any, budget: int) -> None:
            if not self.waiting or len(self.running) >= self.max_num_seqs:
                return
            seq = self.waiting[0]
            if seq.num_tokens > budget:
                return
            try:
                self.bm.allocate(seq.seq_id, seq.token_ids)
            except OutOfBlocks:
                return
            self.waiting.popleft()
            self.running.append(seq)
            n = seq.num_tokens
            out.scheduled.append(Chunk(seq, 0, n, self.slots(seq, 0, n), True))
            self.computed[seq.seq_id] = n

    with pytest.raises(ProbeFailed) as failed:
        _budget_bounds_the_step(AdmitsOnePerStep)
    hint = failed.value.hint
    assert hint == PROBE_HINTS["no-rule"]
    assert "`schedule_running`" in hint and "`admit`" in hint
    assert "differ from the reference's" not in hint  # the message above says that already
