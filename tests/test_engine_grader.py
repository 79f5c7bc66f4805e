"""The capstone: a learner's classes serve the model, and the ``engine`` grader names the slot.

* the checkpoint of notebook 09 (its ``execute`` over the checkpoints of notebooks 05 and 04)
  serves every token equal to dense generation, and passes the grade;
* every mistake of the engine catalogue fails it, with a report that names the wrong slot
  (``slot (block b, offset o)``) and the hint of what broke, the same on every run;
* the ledger tells sharing that is right (equal prefixes) from sharing that is not, follows
  copies as one batched copy does, and reports a slot mapping that disagrees with the table;
* the adapters translate the notebook-04 scheduler's calls (a token count, no token id) into
  the notebook-05 block manager's (token ids), so neither class learns a second API.
"""

from __future__ import annotations

import dataclasses
import io
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from servelab import checkpoint  # noqa: E402
from servelab.grading import GradeFailure, grade  # noqa: E402
from servelab.grading.engine import HINTS, TOPIC  # noqa: E402
from servelab.grading.mistakes import correct_impl, mistakes  # noqa: E402
from servelab.kv.capstone import serve  # noqa: E402
from servelab.kv.engine import Request  # noqa: E402
from servelab.kv.learner_engine import EngineSkeleton, ExecuteError, LearnerBlocks  # noqa: E402
from servelab.kv.ledger import KVDivergence, SlotLedger  # noqa: E402
from servelab.testing.engine import INVARIANTS, dense_samples  # noqa: E402
from servelab.viz.engine import EngineStepper, render_engine_step  # noqa: E402

torch.set_num_threads(1)
SYSTEM = [101, 7, 42, 9, 13, 77, 5, 5]
WORKLOAD = [
    Request.of([*SYSTEM, 1, 2, 3], 6),
    Request.of([*SYSTEM, 9], 6, n=3, temperature=0.8, seed=3),
    Request.of([4, 4, 4, 4, 4], 8),
    Request.of([*SYSTEM, 1, 2, 3, 50], 5),
]

# What each mistake breaks first: the hint its report must give.
EXPECTED_KIND = {
    "copy_after_decode": "read-unwritten",
    "cow_frees_the_copy": "read-foreign",
    "cow_wrong_source": "read-unwritten",
    "fork_shares_partial_block": "double-write",
    "no_copy": "read-unwritten",
    "prefill_before_decode": "read-unwritten",
    "requeue_prompt_only": "length",
    "slot_before_new_block": "slot-mapping",
    "stale_hash": "read-foreign",
}
MISTAKES = mistakes("engine")


def test_the_catalogue_has_eight_mistakes_or_more_each_with_an_expected_report() -> None:
    assert len(MISTAKES) >= 8
    assert {m.name for m in MISTAKES} == set(EXPECTED_KIND)
    assert set(HINTS) == set(INVARIANTS)  # every check that can fail has its hint


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_is_built_on_the_checkpoint_and_says_what_it_does(mistake: object) -> None:
    impl, correct = mistake.impl, correct_impl("engine")  # type: ignore[attr-defined]
    assert issubclass(impl, correct) and impl is not correct
    changed = [
        impl.block_manager_class is not correct.block_manager_class,
        impl.scheduler_class is not correct.scheduler_class,
        impl.execute is not correct.execute,
    ]
    assert sum(changed) == 1, "one mistake changes one of the three parts"
    assert mistake.hint.lower() in mistake.like.lower()  # type: ignore[attr-defined]


def test_the_checkpoint_serves_every_token_equal_to_dense() -> None:
    run = serve(correct_impl("engine"), WORKLOAD, num_blocks=14, block_size=4)
    assert run.equal, run.summary()
    stats = run.engine.stats
    # the workload exercises each mechanism the capstone is about
    assert stats.preemptions >= 1 and stats.cow_copies >= 1 and run.engine.prefix_hits >= 1
    assert stats.forks == 2
    assert f"every token equals dense generation ({run.tokens_compared} of" in run.summary()
    for done, request in zip(run.completions, WORKLOAD, strict=True):
        assert done.samples == [list(s) for s in dense_samples(request)]


def test_the_checkpoint_passes_the_grade() -> None:
    report = grade("engine", checkpoint("engine", step=1), step=1, quiet=True)
    assert report.passed and report.lines[-1] == "PASSED"


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_every_mistake_fails_with_the_slot_named(mistake: object) -> None:
    impl = mistake.impl  # type: ignore[attr-defined]
    reports = []
    for _ in range(2):
        with pytest.raises(GradeFailure) as failed:
            grade("engine", impl, step=1, out=io.StringIO(), quiet=True)
        reports.append(failed.value.report.text)
    assert reports[0] == reports[1], "the report must be the same on every run"
    text = reports[0]
    assert "slot (block " in text, text
    assert HINTS[EXPECTED_KIND[mistake.name]] in text, text  # type: ignore[attr-defined]
    assert "engine.step()" in text and "reproduce:" in text


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_the_random_search_alone_finds_every_mistake(mistake: object) -> None:
    """Without the probes, the state machine still fails each one (the probes only make the
    report shorter and quicker for the scenarios they target)."""
    step = TOPIC.steps[0]
    alone = dataclasses.replace(TOPIC, steps=[dataclasses.replace(step, probes=[])])
    with pytest.raises(GradeFailure) as failed:
        grade(alone, mistake.impl, out=io.StringIO(), quiet=True)  # type: ignore[attr-defined]
    assert "state machine" in failed.value.report.text


def test_the_reproduce_program_raises_the_same_divergence_when_pasted() -> None:
    bug = next(m for m in MISTAKES if m.name == "prefill_before_decode")
    with pytest.raises(GradeFailure) as failed:
        grade("engine", bug.impl, step=1, out=io.StringIO(), quiet=True)
    report = failed.value.report
    namespace = {"Buggy": bug.impl}
    with pytest.raises(KVDivergence) as raised:
        exec(report.code, namespace)
    assert raised.value.describe().splitlines()[0] in report.text


def test_a_wrong_slot_stops_a_capstone_run_with_the_tables_named() -> None:
    bug = next(m for m in MISTAKES if m.name == "prefill_before_decode")
    first = Request.of([7, 8, 9], 5)
    continuation = Request.of([7, 8, 9, dense_samples(first)[0][0], 1], 2)
    run = serve(bug.impl, [first], later={1: [continuation]}, num_blocks=8)
    assert not run.equal and run.divergence is not None
    assert run.divergence.kind == "read-unwritten" and run.divergence.slot == (0, 3)
    assert "block tables pointing at block 0: sequence 0 (entry 0); sequence 1 (entry 0)" in str(
        run
    )
    fixed = serve(correct_impl("engine"), [first], later={1: [continuation]}, num_blocks=8)
    assert fixed.equal and fixed.engine.prefix_hits == 1


# --- the ledger ---------------------------------------------------------------------------


def test_the_ledger_accepts_shared_prefixes_and_rejects_foreign_kv() -> None:
    ledger = SlotLedger(block_size=2)
    tables = {0: [0, 1], 1: [0, 2]}
    ledger.prefill(0, [5, 6, 7], tables[0], 0, tables)
    ledger.prefill(1, [5, 6, 8], tables[1], 2, tables)  # hits block 0: the same prefix
    ledger.step = 2
    with pytest.raises(KVDivergence) as foreign:
        ledger.prefill(2, [9, 6, 1], [0, 3], 2, {**tables, 2: [0, 3]})  # another prefix
    assert foreign.value.kind == "read-foreign" and foreign.value.slot == (0, 0)
    assert "holds the KV of sequence 0's position 0, written by its prefill in step 0" in str(
        foreign.value
    )


def test_a_batched_copy_reads_every_source_before_writing() -> None:
    ledger = SlotLedger(block_size=1)
    tables = {0: [0], 1: [1]}
    ledger.prefill(0, [5], [0], 0, tables)
    ledger.prefill(1, [6], [1], 0, tables)
    ledger.copy([(0, 1), (1, 2)])  # block 2 gets block 1's old contents, not block 0's
    ledger.check_held([(1, [6], [2]), (0, [5], [1])], tables)


def test_a_slot_mapping_that_disagrees_with_the_table_is_reported() -> None:
    ledger = SlotLedger(block_size=2)
    tables = {0: [3, 4]}
    ledger.prefill(0, [1, 2], [3], 0, tables)
    with pytest.raises(KVDivergence) as wrong:
        ledger.decode([(0, [1, 2, 7], [3, 4], (3, 0))], tables)
    assert wrong.value.kind == "slot-mapping"
    assert "append_slot returned slot (block 3, offset 0) for position 2" in str(wrong.value)
    assert "(block 4, offset 0)" in str(wrong.value)


# --- the adapters -------------------------------------------------------------------------


def test_the_adapter_hands_the_prefix_manager_token_ids_for_a_count() -> None:
    tokens = {0: [1, 2, 3, 4, 5], 1: [1, 2, 3, 4, 9]}
    blocks = LearnerBlocks(checkpoint("prefix-cache", step=3)(8, 2), tokens.__getitem__)
    assert blocks.allocate(0, 5) == 0
    assert blocks.allocate(1, 5) == 4  # two full blocks of the shared prefix
    assert blocks.cached == {0: 0, 1: 4}
    tokens[0].append(6)
    slot = blocks.append_slot(0)  # the token id comes from the sequence
    assert (slot.block, slot.offset) == (blocks.block_table(0)[-1], 1)
    assert blocks.seq_len(0) == 6 and blocks.blocks_needed(5) == 3


def test_an_engine_class_without_its_two_classes_says_what_is_missing() -> None:
    class Incomplete(EngineSkeleton):
        block_manager_class = checkpoint("prefix-cache", step=3)

    from servelab.testing.engine import reference_model

    with pytest.raises(TypeError, match="block_manager_class and scheduler_class"):
        Incomplete(reference_model())


def test_execute_must_return_a_row_per_computed_sequence() -> None:
    class DropsDecodes(correct_impl("engine")):  # type: ignore[misc]
        def execute(self, out):  # type: ignore[no-untyped-def]
            self.decode(out.decodes)
            return [row for p in out.prefills for row in self.prefill(p)]

    run_ok = serve(DropsDecodes, [Request.of([1, 2], 1)], num_blocks=4)
    assert run_ok.equal  # a request with one new token never decodes
    with pytest.raises(ExecuteError, match="each exactly once"):
        serve(DropsDecodes, [Request.of([1, 2], 3)], num_blocks=4)


# --- the step-through ---------------------------------------------------------------------


def test_the_step_through_draws_queues_tables_and_the_slots_read() -> None:
    run = serve(correct_impl("engine"), WORKLOAD, num_blocks=14, block_size=4)
    records = run.engine.records
    assert len(records) == run.engine.stats.steps
    stepper = EngineStepper(records)
    busy = records[stepper.static_step - 1]
    assert busy.copies or busy.preempted
    for record in records:
        svg = render_engine_step(record)
        root = ET.fromstring(svg)
        reads = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "read"]
        assert len(reads) == sum(len(v) for v in record.reads.values())
        for g in reads:
            seq, block = int(g.get("data-seq", -1)), int(g.get("data-block", -1))
            assert (block, int(g.get("data-offset", -1))) in record.reads[seq]
        text = "".join(root.itertext())
        assert f"step {record.step}" in text and "running (oldest first)" in text
    widget = stepper.widget()
    assert "<img" in widget._repr_mimebundle_()["text/html"]


# --- setup and progress -------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def test_make_torch_keeps_the_torch_that_is_installed() -> None:
    """The notebook's and README's instruction, run as written: `make torch`."""
    result = subprocess.run(
        ["make", "torch"], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"torch {torch.__version__} already installed; keeping it" in result.stdout


@pytest.mark.notebooks
def test_progress_shows_the_capstone() -> None:
    from servelab.progress import format_table, run_notebook

    result = run_notebook(ROOT / "exercises" / "09_serving_your_model.ipynb")
    assert [(s.topic, s.step, s.status) for s in result.steps] == [("engine", 1, "not written")]
    assert "09_serving_your_model  engine  1     not written" in format_table([result])


class _Refused(Exception):
    """A learner's own error type."""


def test_an_error_of_yours_is_shown_once_and_no_kv_rule_is_claimed() -> None:
    engine = correct_impl("engine")

    class RefusingBlocks(engine.block_manager_class):  # type: ignore[name-defined, misc]
        def append_slot(self, seq_id, *args):  # type: ignore[no-untyped-def]
            if self.seq_len(seq_id) >= 9:
                raise _Refused(f"sequence {seq_id} has no room left")
            return super().append_slot(seq_id, *args)

    class Refusing(engine):  # type: ignore[valid-type, misc]
        block_manager_class = RefusingBlocks

    with pytest.raises(GradeFailure) as failed:
        grade("engine", Refusing, out=io.StringIO())
    report = failed.value.report
    assert report.text.count("_Refused: sequence 0 has no room left") == 1, report.text
    assert "raised in your append_slot()" in report.text
    assert report.hint.startswith("your code raised the error above"), report.hint
    for kv_rule in HINTS.values():  # it broke none of the KV rules the probes check
        assert kv_rule not in report.text


def test_a_copy_onto_itself_is_said_where_append_slot_asked_for_one() -> None:
    by_name = {m.name: m for m in mistakes("engine")}
    texts = {}
    for name in ("cow_wrong_source", "no_copy"):
        with pytest.raises(GradeFailure) as failed:
            grade("engine", by_name[name].impl, out=io.StringIO())
        texts[name] = failed.value.report.text
    said = "a copy of a block onto itself (block 2 -> 2, block 3 -> 3) copies nothing"
    assert said in texts["cow_wrong_source"], texts["cow_wrong_source"]
    assert "onto itself" not in texts["no_copy"]  # its copies were asked right, never made


def test_a_grade_runs_the_model_on_one_thread_and_gives_the_kernel_its_count_back() -> None:
    import torch

    bug = next(m for m in MISTAKES if m.name == "prefill_before_decode")
    seen: list[int] = []

    class Counting(bug.impl):  # type: ignore[name-defined,misc]
        def step(self, *args: object, **kwargs: object) -> object:
            seen.append(torch.get_num_threads())
            return super().step(*args, **kwargs)

    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        with pytest.raises(GradeFailure):
            grade("engine", Counting, step=1, out=io.StringIO(), quiet=True)
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
    assert seen and set(seen) == {1}
