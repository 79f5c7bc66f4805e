"""The paged-kernel grader: the notebook's kernel passes, every catalogued mistake fails with its
keyword in the function that holds it, an unlisted mistake is placed without a guessed cause,
and the report's reproduce lines run as printed.

Runs on any CPU through Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET before
anything imports triton).
"""

from __future__ import annotations

import contextlib
import io
import linecache
from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from servelab import checkpoint  # noqa: E402
from servelab.grading import GradeFailure, StepNotWritten, grade  # noqa: E402
from servelab.grading.mistakes import correct_impl, mistakes  # noqa: E402
from servelab.testing.paged_kernel import (  # noqa: E402
    CHAIN,
    POISON,
    Case,
    helper,
    rebuilt,
    run_step,
)

TOPIC = "paged-kernel"
MISTAKES = mistakes(TOPIC)
#: The function of the chain each catalogued mistake changes: the grade must fail there.
HOLDS = {
    "logical_offset": "load_block",
    "reads_past_length": "load_block",
    "block_stride": "load_block",
    "tail_scores_unmasked": "attend",
    "no_running_max": "attend",
    "no_rescale": "attend",
    "gqa_head_modulo": "paged_decode_kernel",
}


def _failure(impl: Any, step: int | None = None) -> Any:
    with pytest.raises(GradeFailure) as info:
        grade(TOPIC, impl, step=step, quiet=True)
    return info.value.report


def test_the_catalogue_lists_the_seven_kernel_mistakes() -> None:
    assert {m.name for m in MISTAKES} == set(HOLDS)


@pytest.mark.parametrize("step", [1, 2, 3])
def test_the_notebook_solution_passes_every_step(step: int) -> None:
    out = io.StringIO()
    report = grade(TOPIC, checkpoint(TOPIC, step=step), step=step, out=out)
    assert report.passed and out.getvalue().rstrip().endswith("PASSED")
    assert "✗" not in out.getvalue()


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_fails_with_its_keyword_in_the_function_that_holds_it(mistake: Any) -> None:
    report = _failure(mistake.impl)
    assert mistake.hint in report.hint, report.text
    assert f"`{HOLDS[mistake.name]}` differs from the oracle" in report.text
    step = CHAIN.index(HOLDS[mistake.name]) + 1
    assert f"✗ step {step} ·" in report.text
    # graded at its own step, with only that function, it fails the same way
    alone = _failure(helper(mistake.impl, HOLDS[mistake.name]), step=step)
    assert mistake.hint in alone.hint


def test_no_two_mistakes_share_a_keyword() -> None:
    for m in MISTAKES:
        others = [o.name for o in MISTAKES if o is not m and m.hint in o.like]
        assert not others, (m.name, others)


def test_the_report_places_the_first_wrong_element_through_the_block_table() -> None:
    report = _failure(next(m.impl for m in MISTAKES if m.name == "reads_past_length"))
    assert "sequence 0, kv head 0, position 6 (logical block 1, offset 2; the block table " in (
        report.text
    )
    assert "says block 1" in report.text and f"got {POISON:g}" in report.text
    assert "past the sequence's length" in report.text
    stride = _failure(next(m.impl for m in MISTAKES if m.name == "no_rescale"))
    assert "alone differs with its first 5 tokens (with its first 4 it agrees)" in stride.text
    assert "position 4 is logical block 2, offset 0, and the block table says block 2" in (
        stride.text
    )


def test_the_report_is_the_same_on_every_run() -> None:
    impl = next(m.impl for m in MISTAKES if m.name == "no_running_max")
    assert _failure(impl).text == _failure(impl).text


_cells = iter(range(10**6))


def _define(source: str, name: str, scope: dict[str, Any]) -> Any:
    """Define a jit function from source, as a notebook cell does (its source findable)."""
    filename = f"<paged-kernel-test-{next(_cells)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), scope)
    return scope[name]


UNSCALED = """
@triton.jit
def attend(q, k_cache, v_cache, table, seq_len, kv_head, stride_block, stride_slot,
           stride_head, scale, BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):
    m = tl.full((), float("-inf"), tl.float32)
    total = tl.zeros((), tl.float32)
    acc = tl.zeros((HEAD_DIM,), tl.float32)
    for j in range(0, tl.cdiv(seq_len, BLOCK_SIZE)):
        k = load_block(k_cache, table, j, seq_len, kv_head, stride_block, stride_slot,
                       stride_head, BLOCK_SIZE, HEAD_DIM)
        v = load_block(v_cache, table, j, seq_len, kv_head, stride_block, stride_slot,
                       stride_head, BLOCK_SIZE, HEAD_DIM)
        s = tl.sum(k * q[None, :], axis=1)
        pos = j * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        s = tl.where(pos < seq_len, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)
        total = total * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m = m_new
    return acc / total
"""


def _scope() -> dict[str, Any]:
    return {"triton": triton, "tl": tl, "load_block": helper(correct_impl(TOPIC), "load_block")}


HALVED = UNSCALED.replace(
    "s = tl.sum(k * q[None, :], axis=1)", "s = tl.sum(k * q[None, :], axis=1) * scale * 0.5"
)


def test_an_unlisted_mistake_is_placed_without_a_guessed_cause() -> None:
    # half the 1/sqrt(d) scale: no catalogued mistake and no variant of the oracle gives it
    attend = _define(HALVED, "attend", _scope())
    report = _failure(rebuilt(correct_impl(TOPIC), attend=attend))
    assert "✗ step 2 ·" in report.text and "`attend` differs from the oracle" in report.text
    assert report.hint.startswith("the values first differ in your attend (step 2)")
    assert "exactly the numbers" not in report.hint


def test_the_reproduce_lines_fail_as_printed_and_hold_on_a_right_function() -> None:
    attend = _define(UNSCALED, "attend", _scope())
    report = _failure(attend, step=2)
    with pytest.raises(AssertionError) as failed:  # pasted, the program fails where the grade did
        exec(report.code, {"attend": attend})
    first = next(line for line in report.text.splitlines() if "first wrong element" in line)
    assert first.split("first wrong element: ")[1] in str(failed.value)
    assert str(failed.value).startswith("`attend` differs at")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(report.code, {"attend": helper(correct_impl(TOPIC), "attend")})
    assert "`attend` agrees with the oracle on this case" in out.getvalue()


def test_a_skeleton_still_raising_is_not_written_yet() -> None:
    stub = (
        "@triton.jit\n"
        "def load_block(cache, table, j, seq_len, head, stride_block, stride_slot, stride_head,\n"
        "               BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):\n"
        '    """doc"""\n'
        "    # YOUR CODE HERE\n"
        "    raise NotImplementedError()\n"
    )
    fn = _define(stub, "load_block", {"triton": triton, "tl": tl})
    with pytest.raises(StepNotWritten) as info:
        grade(TOPIC, fn, step=1, quiet=True)
    assert "`load_block` is not written yet" in info.value.report.text


def test_cases_poison_every_slot_no_sequence_owns() -> None:
    case = Case(4, ((2, 0), (2, 3)), (5, 7), 5, kv_heads=2, head_dim=8, seed=5)
    got, want = run_step(1, helper(correct_impl(TOPIC), "load_block"), case)
    assert (got == want).all()
    from servelab.testing.paged_kernel import tensors

    t = tensors(case)
    assert (t.k[4] == POISON).all() and (t.k[1] == POISON).all()  # free, and the padding block
    assert (t.k[0, 1:] == POISON).all() and not (
        t.k[0, 0] == POISON
    ).any()  # 5 tokens: 1 in block 0
    assert (t.k[3, 3:] == POISON).all()


WILD = """
@triton.jit
def load_block(cache, table, j, seq_len, head, stride_block, stride_slot, stride_head,
               BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr):
    offs = tl.arange(0, BLOCK_SIZE)
    dims = tl.arange(0, HEAD_DIM)
    block = tl.load(table + j) * 100000  # far past the pool
    ptrs = cache + block * stride_block + offs[:, None] * stride_slot + dims[None, :]
    return tl.load(ptrs).to(tl.float32)
"""


_FAR_LOAD_ALONE = f"""
import triton, triton.language as tl
from servelab.grading import GradeFailure, grade
import linecache
source = {WILD!r}
linecache.cache["<far load>"] = (len(source), None, source.splitlines(True), "<far load>")
namespace = {{"triton": triton, "tl": tl}}
exec(compile(source, "<far load>", "exec"), namespace)
for _ in range(2):
    try:
        grade("paged-kernel", namespace["load_block"], step=1, quiet=True)
    except GradeFailure as failure:
        print(failure.report.text, end="\\n---\\n")
"""


def _far_load_compiled() -> list[str]:
    """The far load graded twice in a Python process of its own: compiled, an address with
    nothing behind it ends CUDA for the whole process, and a pytest worker must live on."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _FAR_LOAD_ALONE],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split("\n---\n")[:2]


def test_a_load_far_outside_the_pool_is_reported_not_a_crash() -> None:
    # in Triton's interpreter such a load would end the Python process (a segfault); the
    # address check is the interpreter's: compiled on a GPU, the load reads what is there, or,
    # where nothing is mapped there, CUDA's context is lost for good (the report says so)
    if type(tl.zeros).__name__ == "JITFunction":  # compiled
        first, second = _far_load_compiled()
        if "illegal memory access" in first:
            assert "until you restart the kernel" in first
            assert "TORCH_USE_CUDA_DSA" not in first  # CUDA's own debugging advice is left out
            assert "until you restart the kernel" in second  # and it lasts, as said
        else:
            assert "`load_block` differs from the oracle" in first
            assert first == second  # no addresses: the same on every run
        return
    fn = _define(WILD, "load_block", {"triton": triton, "tl": tl})
    report = _failure(fn, step=1)
    assert report.text == _failure(fn, step=1).text  # no addresses: the same on every run
    assert "OutOfBounds: tl.load outside every tensor given to the kernel" in report.text
    assert "in your load_block(), line" in report.text


def test_a_rebuilt_kernel_keeps_which_arguments_are_constexpr() -> None:
    # compiled Triton reads tl.constexpr from the annotations; a copy without them does not
    # compile on a GPU (the interpreter never asks)
    from triton.runtime.jit import JITFunction  # what compiles, also where Triton interprets

    correct = correct_impl("paged-kernel")
    kernel = next(m.impl for m in MISTAKES if m.name == "gqa_head_modulo")
    for fn in (kernel, rebuilt(correct)):
        params = JITFunction(fn.fn).params
        assert {p.name for p in params if p.is_constexpr} == {"GROUP", "BLOCK_SIZE", "HEAD_DIM"}


def test_the_cli_grades_a_kernel_file_that_imports_triton_itself(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    import servelab.checkpoints

    source = (Path(servelab.checkpoints.__file__).parent / "paged_kernel.py").read_text()
    kept = [line for line in source.splitlines() if "TRITON_INTERPRET" not in line]
    kept = [line for line in kept if "torch.cuda.is_available" not in line]
    (tmp_path / "kernel.py").write_text("\n".join(kept) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    command = [sys.executable, "-m", "servelab", "grade", "paged-kernel", "--step", "3"]
    result = subprocess.run(
        [*command, "--impl", f"{tmp_path / 'kernel.py'}:paged_decode_kernel"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("PASSED")


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")
def test_on_a_gpu_the_compiled_solution_passes_and_a_mistake_fails() -> None:
    for step in (1, 2, 3):
        assert grade(TOPIC, checkpoint(TOPIC, step=step), step=step, quiet=True).passed
    mistake = next(m for m in MISTAKES if m.name == "no_rescale")
    assert mistake.hint in _failure(mistake.impl).hint


def test_a_lost_cuda_context_is_said_to_last_without_cudas_debugging_advice() -> None:
    from servelab.grading.core import _describe

    error = RuntimeError(
        "CUDA error: an illegal memory access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
    )
    said = _describe(error)
    assert said.startswith("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert "until you restart the kernel" in said and "TORCH_USE_CUDA_DSA" not in said
    other = RuntimeError("CUDA error: out of memory")
    assert _describe(other) == "RuntimeError: CUDA error: out of memory"


def test_a_case_counts_one_head_in_the_singular() -> None:
    one = Case(block_size=2, tables=((0,),), lens=(1,), num_blocks=1, kv_heads=1, group=1)
    assert "1 query head over 1 kv head," in one.describe()
    assert "4 query heads over 2 kv heads," in replace(one, kv_heads=2, group=2).describe()
