"""A check's hint follows the place only where it is about every action of the call found.

A slip can fail a check while keeping the check's rule: the same method also did something
the reference did not do at all (preempted one request too many), and that action is another
rule's. The hint then stays out of the report (the place and the difference stand alone); a
slip that breaks the hint's own rule keeps it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import servelab
from buggy_impls import failing_report, shown_hint
from servelab.grading import GradeFailure
from servelab.grading.about import RESULT, About, Hint
from servelab.grading.diagnose import HOOKS, Finding, with_place
from servelab.grading.hint_scope import covers_actions, one_sided, topic_hints
from servelab.grading.localise import Divergence
from servelab.grading.mistakes import mistakes
from servelab.grading.registry import load_topic
from servelab.kv.blocks import OutOfBlocks
from servelab.kv.budget import Chunk

PLACE = "start at your `schedule_running`: on the call under where:, it changes the state"
WRITTEN_FOR = "This check was written for:"
RECOMPUTE = "whatever it generated before"

_S3: Any = servelab.checkpoint("token-budget", 3)


def _call(mine: dict[str, Any], theirs: dict[str, Any]) -> Divergence:
    before = {"running": [0, 1], "out.preempted": [], "num_computed_tokens": {0: 5, 1: 3}}
    before |= {"hashed": [0]}
    return Divergence(
        "schedule_running",
        "sched.schedule_running(out, 3)",
        before,
        ("returned 2", {**before, **mine}),
        ("returned 1", {**before, **theirs}),
        0,
    )


# yours preempted request 1 and ran 0; the reference ran both
PREEMPTED = _call(
    {"running": [0], "out.preempted": [1], "num_computed_tokens": {0: 6, 1: 0}},
    {"num_computed_tokens": {0: 6, 1: 4}},
)


def test_one_sided_fields_are_what_only_one_call_changed() -> None:
    assert one_sided(PREEMPTED) == ["out.preempted", "running"]
    # both changed it, by different amounts: not an action of one side alone
    amounts = _call({"num_computed_tokens": {0: 6, 1: 3}}, {"num_computed_tokens": {0: 6, 1: 4}})
    assert one_sided(amounts) == []
    assert one_sided(None) == []


def test_a_hint_is_left_out_where_another_rule_of_the_method_declares_the_action() -> None:
    sized = About(("schedule_running",), (RESULT, "num_computed_tokens"))
    # token-budget's victim rule declares `running` and `out.preempted` for schedule_running
    assert any("running" in h.about.fields for h in topic_hints("token-budget"))
    assert not covers_actions(sized, PREEMPTED, "token-budget")
    finding = Finding(place=PLACE, methods=("schedule_running",), divergence=PREEMPTED)
    hint = Hint("a running request needs its tokens", sized)
    assert with_place(finding, hint, topic="token-budget") == PLACE
    # no topic (no other hints to weigh): the declaration alone decides, as before
    assert WRITTEN_FOR in with_place(finding, hint)
    # a hint about the action itself stays
    victim = Hint("preempt the latest", About(("schedule_running",), ("running", "out.preempted")))
    assert WRITTEN_FOR in with_place(finding, victim, topic="token-budget")
    # a by-product no other rule of the method declares (a block named on the chain) is no
    # other rule's action
    named = _call(
        {"hashed": [0, 1], "num_computed_tokens": {0: 6, 1: 3}},
        {"num_computed_tokens": {0: 6, 1: 4}},
    )
    assert one_sided(named) == ["hashed"]
    assert covers_actions(sized, named, "token-budget")
    # a hint that declares no fields is about none of them: the preemption is another rule's
    assert not covers_actions(About(("schedule_running",)), PREEMPTED, "token-budget")
    assert covers_actions(About(("schedule_running",)), named, "token-budget")


class PreemptsForWholeChunkBlocks(_S3):  # type: ignore[misc,valid-type]
    """Keeps the recompute rule (n = num_tokens - computed) but preempts while the chunk's need,
    sized as if it started a fresh block, exceeds the free blocks: a request that did not need
    to go is preempted."""

    def schedule_running(self, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            n = min(seq.num_tokens - start, budget)
            while self.bm.num_free < self.bm.blocks_needed(n):
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


class RecomputesPromptFirst(_S3):  # type: ignore[misc,valid-type]
    """Breaks the recompute rule: a request still in its prompt runs only the prompt's rest,
    its generated tokens wait for the next step."""

    def schedule_running(self, out: Any, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            start = self.computed[seq.seq_id]
            end = seq.prompt_len if start < seq.prompt_len else seq.num_tokens
            n = min(end - start, budget)
            try:
                slots = self.extend(seq, start, n)
            except OutOfBlocks:
                victim = self.running.pop()
                self.preempt(victim, out)
                if victim is seq:
                    return budget
                continue
            out.scheduled.append(Chunk(seq, start, n, slots, start + n == seq.num_tokens))
            self.computed[seq.seq_id] = start + n
            budget -= n
            i += 1
        return budget


def _report(impl: type) -> str:
    with pytest.raises(GradeFailure) as failure:
        servelab.grade("token-budget", impl, 3, quiet=True)
    return str(failure.value)


def test_a_slip_that_keeps_the_recompute_rule_is_not_sent_to_it() -> None:
    report = _report(PreemptsForWholeChunkBlocks)
    assert "recomputed in chunks" in report  # the check written for the rule failed
    hint = report.partition("hint:")[2]
    assert "`schedule_running`" in hint and "`waiting`" in hint  # the place and the difference
    assert RECOMPUTE not in hint
    # the one rule it may be sent to is the one it breaks: a preemption where the blocks fit
    if WRITTEN_FOR in hint:
        assert "preempts only when the extend's new blocks do not fit" in hint


def test_a_slip_that_breaks_the_recompute_rule_keeps_its_hint() -> None:
    hint = _report(RecomputesPromptFirst).partition("hint:")[2]
    assert "`schedule_running`" in hint
    assert WRITTEN_FOR in hint and RECOMPUTE in hint


def test_a_table_kept_is_not_sent_to_the_free_list_rule() -> None:
    """``freed_twice`` keeps the refcount rule (it releases a block only while its count is
    above 0) and forgets to drop the table: the check's free-list hint is another rule's, and
    the rule its difference shows (free_seq forgets the sequence whole) declares `tables`."""
    mistake = next(m for m in mistakes("block-manager") if m.name == "freed_twice")
    undiagnosed = dataclasses.replace(load_topic("block-manager"), diagnose=lambda p, i: None)
    report, program = failing_report(undiagnosed, mistake.impl)
    others = [m for m in mistakes("block-manager") if m.name != "freed_twice"]
    finding = HOOKS["block-manager"].explain(program, mistake.impl, None, others, read=False)
    assert "refcount is 0" in report.hint  # the free-list rule's check failed
    said = shown_hint(finding, report)
    assert said == finding.place and WRITTEN_FOR not in said
