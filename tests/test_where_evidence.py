"""What a report's where: lines and hint may show: only what the evidence holds.

A check's own hint only when its declared about fits the method found; a field that cannot be
read said in words; the reference's change measured from its own reading of the state (a pure
call changes nothing); and what a call put into its ``out`` argument, compared and shown like
any field.
"""

from __future__ import annotations

import io

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.about import About, Hint
from servelab.grading.diagnose import HOOKS, NO_PLACE, Finding, with_place
from servelab.grading.localise import _arg_fields, _out_fields
from servelab.grading.observe import Unreadable
from servelab.kv.blocks import BlockManager
from servelab.kv.scheduler import Prefill, Scheduler, Sequence, StepOutput
from servelab.kv.sim import emit_tokens

PLACE = "start at your `admit`: on the call under where:, it changes the state differently"


def test_a_field_that_raised_is_said_in_words() -> None:
    shown = repr({2: Unreadable(KeyError(2))})
    assert shown == "{2: (reading it raised KeyError)}"
    assert "unreadable" not in shown
    assert Unreadable(KeyError(1)) == Unreadable(KeyError(2)) != Unreadable(TypeError())


def test_a_check_hint_written_for_another_rule_is_left_out() -> None:
    finding = Finding(place=PLACE, methods=("admit",))
    # its prose names admit, but it was written for the fit test
    other = Hint(
        "the watermark keeps bm.num_free - blocks_needed(n) >= watermark; admit stops",
        About(("fits",)),
    )
    assert with_place(finding, other) == PLACE
    own = Hint("the loop takes waiting requests while they fit", About(("admit",)))
    assert with_place(finding, own) == f"{PLACE}. This check was written for: {own}"
    # nothing localised: the check's hint stands where it is about what the check saw
    assert with_place(Finding(), other) == NO_PLACE
    assert with_place(Finding(), other, code="sched.fits(3)") == other


class LenCountsHeap(checkpoint("eviction-policy", 2)):  # type: ignore[misc]
    """len() counts heap entries, stale ones too."""

    def __len__(self) -> int:
        return len(self.heap)


def test_a_pure_call_starts_from_the_programs_state_and_changes_nothing() -> None:
    program = "\n".join(
        [
            "p = LFU()",
            "p.update_on_put('a', 1)",
            "p.update_on_put('b', 1)",
            "p.update_on_hit('a')",
            "p.update_on_hit('a')",
            "len(p)",
        ]
    )
    finding = HOOKS["eviction-policy"].explain(program, LenCountsHeap, 2)
    head, called, yours, theirs = finding.where
    assert "`__len__`" in head
    assert "on: len 4," in called  # the state the program's len(p) ran on, not an earlier one
    assert yours.startswith("yours returned 4; nothing changed")
    assert theirs.startswith("the reference returns 2; nothing changed"), theirs


class PrefillOneShort(checkpoint("scheduler", 1)):  # type: ignore[misc]
    """Records each admitted prefill one token short: only the step's output shows it."""

    def admit(self, out):  # type: ignore[no-untyped-def]
        super().admit(out)
        out.prefills[:] = [Prefill(p.seq, p.num_tokens - 1) for p in out.prefills]


def test_what_a_call_puts_into_out_is_compared_and_shown() -> None:
    program = "\n".join(
        [
            "bm = BlockManager(num_blocks=8, block_size=4)",
            "sched = Scheduler(bm, watermark=1)",
            "sched.add(Sequence.dummy(0, prompt_len=5, max_new_tokens=2))",
            "out = sched.step()",
        ]
    )
    finding = HOOKS["scheduler"].explain(program, PrefillOneShort, 1)
    assert finding.methods == ("admit",), finding.where
    _, called, yours, theirs, line = finding.where
    assert "sched.admit(out)" in called
    assert "out.prefills [] ->" in yours and "out.prefills [] ->" in theirs, (yours, theirs)
    assert "num_tokens=4" in yours and "num_tokens=5" in theirs, (yours, theirs)
    # the learner's line that wrote the short prefills into `out`
    assert line == (
        "at your line `out.prefills[:] = [Prefill(p.seq, p.num_tokens - 1) for p in out.prefills]`"
    )


class AdmitOnceWhileEmpty(checkpoint("scheduler", 1)):  # type: ignore[misc]
    """Admits while this step's prefills are empty: one request per step."""

    def admit(self, out):  # type: ignore[no-untyped-def]
        while self.waiting and not out.prefills:
            seq = self.waiting[0]
            if not self.fits(seq.num_tokens):
                break
            self.waiting.popleft()
            self.bm.allocate(seq.seq_id, seq.num_tokens)
            self.running.append(seq)
            out.prefills.append(Prefill(seq, seq.num_tokens))


def test_the_watermark_check_names_the_request_that_fitted_and_waited() -> None:
    with pytest.raises(GradeFailure) as failed:
        grade("scheduler", AdmitOnceWhileEmpty, 1, out=io.StringIO(), quiet=True)
    report = failed.value.report
    # the reference's sum labelled as the reference's, next to what yours had (measured)
    assert (
        "in the reference sequence 1 needs 1 block of the 4 free and leaves 3, above the "
        "watermark 2" in report.text
    )
    assert "yours had the same 4 free and left it waiting" in report.text
    assert "start at your `admit`" in report.hint
    # the hint is the loop's rule, not the watermark comparison's (which this code gets right)
    assert "goes on taking the head of waiting while it fits" in report.hint
    assert ">= watermark" not in report.hint


def test_the_free_list_is_a_queue() -> None:
    from servelab.testing.block_manager import check_free_order
    from servelab.testing.core import InvariantViolation

    check_free_order(None, [3, 1])
    check_free_order([0, 1, 2], [2, 5, 4])  # two taken from the left, two freed at the right
    with pytest.raises(InvariantViolation) as taken:
        check_free_order([0, 1, 2], [0, 1])  # the right end taken
    assert taken.value.invariant == "free-order-take"
    with pytest.raises(InvariantViolation) as freed:
        check_free_order([1, 2], [0, 1, 2])  # a freed block put at the left end
    assert freed.value.invariant == "free-order-return"


def test_a_hint_about_the_only_field_that_differs_is_shown() -> None:
    from servelab.grading.localise import Divergence

    def call(
        mine: dict[str, object], theirs: dict[str, object], out: str = "returned 2"
    ) -> Divergence:
        return Divergence(
            "allocate", "bm.allocate(1, [1])", {}, (out, mine), ("returned 2", theirs), 0
        )

    about = About(("_claim",), ("refcounts",))  # a hit must raise the block's refcount
    assert about.fits(("allocate",), call({"refcounts": {0: 1}}, {"refcounts": {0: 2}}))
    # another field differs too, or the results differ: the hint may be about something else
    both = call({"refcounts": {0: 1}, "tables": {}}, {"refcounts": {0: 2}, "tables": {1: [0]}})
    assert not about.fits(("allocate",), both)
    assert not about.fits(("allocate",), call({}, {}, "returned 8"))


def test_a_step_output_shows_its_public_fields_however_it_keeps_them() -> None:
    """``decodes`` is a property over a private list (built late for a one-call decode step):
    a report names it ``out.decodes``, in its place, and never a private name."""
    sched = Scheduler(BlockManager(8, 2), watermark=0)
    for i in range(2):
        sched.add(Sequence.dummy(i, 2, 3))
    emit_tokens(sched.step())
    out = sched.step()  # decoded in one call: its decodes not built yet
    names = ["prefills", "decodes", "preempted", "finished", "swapped_in", "swap_out", "swap_in"]
    fields = _out_fields((out,), {})
    assert list(fields) == [f"out.{n}" for n in names] and fields["out.decodes"] == [0, 1]
    assert list(_arg_fields([out], ["out"])) == [f"out.{n}" for n in names]
    eager = StepOutput()
    eager.decodes.extend(out.decodes)
    assert _out_fields((eager,), {}) == fields
