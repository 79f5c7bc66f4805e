"""Topic ``paged-kernel``: the paged-attention decode kernel of notebook 08, written in Triton.

Each step grades one function of the skeleton's chain (``load_block``, ``attend``,
``paged_decode_kernel``; see :mod:`servelab.testing.paged_kernel`): a few fixed cases that
each aim at a known mistake, then a Hypothesis property over random block tables (shuffled,
shared after a fork, partial last blocks, several block sizes, fp32 and bf16), always against
the gather + SDPA oracle. Grading step 3 grades the step 1 and 2 functions the kernel calls
first, so a mistake is reported in the first function of the chain whose values differ.

A failure shows the first wrong output element, where it comes from (sequence, head, logical
block and offset, and what the block table said), the shortest prefix of the sequence whose
output already differs, and the case as a paste-able line. The hint names a known mistake only
when the learner's function gives exactly the numbers of that catalogued mistake
(:mod:`servelab.grading.mistakes.paged_kernel`) on the failing case and on every fixed case of
the step; otherwise it points at the place and says nothing about the cause.

Triton runs on the CPU through its interpreter: slow by design (a few milliseconds per block
and program), so the cases are small and few, sized to keep a failing grade under 5 s of CPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, find, settings
from hypothesis.errors import NoSuchExample

from servelab.grading._programs import shrinking_bounded_by_count
from servelab.grading.about import About, Hint
from servelab.grading.paged_kernel_variants import variant_like
from servelab.grading.topic import Probe, ProbeFailed, Step, Topic

__all__ = ["TOPIC", "compare", "fixed_cases"]

# Triton decides when it is first imported whether to interpret: a file graded by the CLI imports
# it after this module, so without a GPU say so now (no torch needed to ask).
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

#: On a GPU, Triton compiles each new specialisation of a kernel (the learner's, and each
#: catalogued mistake's that a failure is compared with): seconds of CPU in this process that
#: are no hang. A kernel that loops forever on a GPU never returns to Python anyway, so the
#: guard there only bounds the compiling; in the interpreter the usual few seconds hold.
COMPILE_SECONDS = 120.0


def _probe_seconds() -> float | None:
    compiling = os.path.exists("/dev/nvidiactl") and os.environ.get("TRITON_INTERPRET") != "1"
    return COMPILE_SECONDS if compiling else None


#: Random cases per step, and how many more a failure may be shrunk with (counts, not seconds).
EXAMPLES = {1: 40, 2: 16, 3: 10}
SHRINK_RUNS = 12

_STEP_TITLES = {
    1: "gather one sequence's keys through its block table",
    2: "scores and the online softmax across blocks",
    3: "the decode kernel: one program per (sequence, head), grouped-query heads",
}

_GENERIC = {
    1: Hint(
        "compare the address your load_block reads for that position with "
        "table[j] * stride_block + offset * stride_slot + head * stride_head + dim, and its "
        "mask: positions at or past seq_len load 0",
        About(("load_block",)),
    ),
    2: Hint(
        "follow the online softmax block by block for that sequence: the running max, the "
        "rescaling of the sum and the accumulator when the max grows, and the positions "
        "past seq_len",
        About(("attend",)),
    ),
    3: Hint(
        "check what the kernel hands to attend for that program: the query's row, the "
        "sequence's table row and length, and which kv head serves that query head",
        About(("paged_decode_kernel",)),
    ),
}


def _pk() -> Any:
    from servelab.testing import paged_kernel  # torch and triton: only when grading this topic

    return paged_kernel


def fixed_cases(step: int) -> list[Any]:
    """The step's fixed cases, each aimed at a known mistake (see the comments)."""
    Case = _pk().Case
    large = _pk().LARGE_Q
    one = [
        # two heads, shuffled blocks, a partial last block: the table, the stride, the mask
        Case(4, ((3, 1),), (6,), 5, kv_heads=2, head_dim=8, seed=1),
    ]
    if step == 1:
        return one
    two = [
        # several blocks whose max grows from block to block: the rescaling
        Case(2, ((4, 0, 2),), (6,), 6, kv_heads=1, head_dim=8, seed=7),
        # scores past exp's range, in bf16: the running max
        Case(4, ((1, 2),), (7,), 4, head_dim=8, dtype="bfloat16", q_scale=large, seed=0),
        # a partial last block next to a full one: the score mask
        Case(4, ((2, 0), (2, 3)), (5, 7), 5, kv_heads=2, head_dim=8, seed=5),
    ]
    if step == 2:
        return two
    return [
        # four query heads over two kv heads, a fork: the grouped-query head index
        Case(4, ((0, 2), (0, 1)), (6, 7), 4, kv_heads=2, group=2, head_dim=8, seed=11),
    ]


def compare(fn: Any, case: Any, *, step: int | None = None, must_agree: bool = False) -> None:
    """Run ``fn`` (a step function of notebook 08) on ``case`` and print the first element
    that differs from the oracle, or that it agrees. ``step`` defaults to the step that grades
    a function of ``fn``'s name. With ``must_agree`` a difference raises AssertionError
    instead of printing: a report's program, pasted, fails where the grade did."""
    pk = _pk()
    pk.unwritten(fn)  # a stub says so, on a GPU too (compiled Triton cannot run a raise)
    name = getattr(getattr(fn, "fn", fn), "__name__", "")
    number = step if step is not None else (pk.CHAIN.index(name) + 1 if name in pk.CHAIN else 3)
    got, want = pk.run_step(number, fn, case)
    diff = pk.first_difference(number, case, got, want)
    if diff is None:
        print(f"`{name}` agrees with the oracle on this case")
        return
    said = f"`{name}` differs at {diff.text}: expected {diff.want:.6g}, got {diff.got:.6g}"
    if must_agree:
        raise AssertionError(said)
    print(said)


def _quiet() -> settings:
    return settings(
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        verbosity=Verbosity.quiet,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )


def _differs(step: int, fn: Any, case: Any) -> bool:
    pk = _pk()
    try:
        got, want = pk.run_step(step, fn, case)
    except NotImplementedError:
        raise
    except Exception:
        return True  # the report runs it again and shows the learner's exception
    return pk.first_difference(step, case, got, want) is not None


def _search(step: int, fn: Any) -> Any | None:
    """The smallest random case on which ``fn`` differs, or None."""
    pk = _pk()
    chosen = settings(_quiet(), max_examples=EXAMPLES[step])
    try:
        with shrinking_bounded_by_count(SHRINK_RUNS):
            return find(pk.cases(step=step), lambda c: _differs(step, fn, c), settings=chosen)
    except NoSuchExample:
        return None


def _same(a: Any, b: Any) -> bool:
    import torch

    return bool(torch.equal(a.isnan(), b.isnan())) and bool(
        torch.allclose(a.nan_to_num(), b.nan_to_num(), atol=1e-6, rtol=1e-5)
    )


def _known_mistake(step: int, fn: Any, case: Any) -> Any | None:
    """The catalogued mistake of this step's function whose outputs equal the learner's on the
    failing case and on every fixed case of the step, when exactly one does."""
    from servelab.grading.mistakes import mistakes

    pk = _pk()
    name = pk.CHAIN[step - 1]
    matches = []
    for m in mistakes("paged-kernel"):
        theirs = pk.helper(m.impl, name)
        if theirs is None:
            continue
        if _changed_function(m.impl) != name:
            continue
        try:
            agree = all(
                _same(pk.run_step(step, fn, c)[0], pk.run_step(step, theirs, c)[0])
                for c in [case, *fixed_cases(step)]
            )
        except Exception:
            continue
        if agree:
            matches.append(m)
    return matches[0] if len(matches) == 1 else None


def _changed_function(buggy: Any) -> str | None:
    """The first function of the chain that a catalogued kernel changes."""
    from servelab.grading.mistakes import correct_impl

    pk = _pk()
    correct = correct_impl("paged-kernel")
    for name in pk.CHAIN:
        mine, ref = pk.helper(buggy, name), pk.helper(correct, name)
        if mine is not None and ref is not None and mine.fn.__code__ is not ref.fn.__code__:
            return str(name)
    return None


def _report(step: int, fn: Any, case: Any, label: str) -> ProbeFailed:
    pk = _pk()
    name = pk.CHAIN[step - 1]
    got, want = pk.run_step(step, fn, case)  # an exception from the learner's code propagates
    diff = pk.first_difference(step, case, got, want)
    assert diff is not None
    lines = [
        f"`{name}` differs from the oracle ({label}):",
        f"  first wrong element: {diff.text}",
        f"  expected {diff.want:.6g}, got {diff.got:.6g}",
        f"  case: tables {list(map(list, case.tables))}, lens {list(case.lens)}; "
        + case.describe(),
    ]
    if step > 1:
        seq = diff.index[0]
        prefix = pk.first_position(step, fn, case, seq)
        if prefix is not None:
            length, before = prefix
            pos = length - 1
            j, off = divmod(pos, case.block_size)
            cut = (
                f"with its first {length} tokens (with its first {before} it agrees)"
                if before
                else "already with its first token alone"
            )
            lines.append(
                f"  sequence {seq} alone differs {cut}; "
                f"position {pos} is logical block {j}, offset {off}, and the block table "
                f"says block {case.tables[seq][j]}"
            )
    known = _known_mistake(step, fn, case) or variant_like(
        step, fn, [case, *fixed_cases(step)], _same
    )
    if known is not None:
        hint = Hint(
            f"on this case and the step's fixed cases your {name} gives exactly the numbers "
            f"of one that {known.like}",
            About((name,)),
        )
    else:
        hint = Hint(
            f"the values first differ in your {name} (step {step}): " + _GENERIC[step],
            About((name,)),
        )
    code = [
        "from servelab.grading.paged_kernel import compare",
        "from servelab.testing.paged_kernel import Case",
        f"compare({name}, {case.code()}, must_agree=True)",
    ]
    return ProbeFailed("\n".join(lines), code, hint)


def _first_differing(step: int, impl: Any, case: Any) -> int:
    """The first step of the chain whose function, as ``impl`` calls it, differs on ``case``
    (its sequences one at a time for step 1): the step to report."""
    pk = _pk()
    for earlier in range(1, step):
        fn = pk.helper(impl, pk.CHAIN[earlier - 1])
        if fn is None:
            continue
        for one in _per_sequence(case) if earlier == 1 else [case]:
            if _differs(earlier, fn, one):
                return earlier
    return step


def _per_sequence(case: Any) -> list[Any]:
    pk = _pk()
    return [
        pk.Case(
            case.block_size,
            (t,),
            (n,),
            case.num_blocks,
            case.kv_heads,
            1,
            case.head_dim,
            case.dtype,
            1.0,
            case.seed,
        )
        for t, n in zip(case.tables, case.lens, strict=True)
    ]


def _check(step: int, impl: Any, found: Callable[[Any], Any | None], label: str) -> None:
    pk = _pk()
    fn = pk.helper(impl, pk.CHAIN[step - 1])
    if fn is None:
        return  # a kernel that does not call this step's function is graded by its own step
    pk.unwritten(fn)
    case = found(fn)
    if case is None:
        return
    where = _first_differing(step, impl, case)
    if where != step:
        earlier = pk.helper(impl, pk.CHAIN[where - 1])
        cases = _per_sequence(case) if where == 1 else [case]
        case = next(c for c in cases if _differs(where, earlier, c))
        raise _report(where, earlier, case, label)
    raise _report(step, fn, case, label)


def _fixed(step: int) -> Callable[[Any], None]:
    def run(impl: Any) -> None:
        def found(fn: Any) -> Any | None:
            return next((c for c in fixed_cases(step) if _differs(step, fn, c)), None)

        _check(step, impl, found, "a fixed case")

    return run


def _random(step: int) -> Callable[[Any], None]:
    def run(impl: Any) -> None:
        _check(step, impl, lambda fn: _search(step, fn), "the smallest failing random case")

    return run


def _probes(step: int) -> Sequence[Probe]:
    aims = {
        1: "a shuffled table, two kv heads, a partial last block",
        2: "a growing max, scores past exp's range, partial last blocks",
        3: "grouped-query heads over a forked batch",
    }
    return (
        Probe(f"fixed cases: {aims[step]}", _GENERIC[step], _fixed(step), _probe_seconds()),
        Probe(
            f"{EXAMPLES[step]} random block tables vs gather + SDPA",
            _GENERIC[step],
            _random(step),
            _probe_seconds(),
        ),
    )


def _no_diagnosis(program: Sequence[str], impl: Any) -> str | None:
    return None  # the probes name the place and, when earned, the mistake themselves


TOPIC = Topic(
    checkpoint="paged_kernel",
    catalogue="kernels",
    name="paged-kernel",
    title="the paged-attention decode kernel in Triton",
    steps=[Step(n, _STEP_TITLES[n], _probes(n)) for n in (1, 2, 3)],
    diagnose=_no_diagnosis,
)
