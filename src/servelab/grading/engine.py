"""Grader topic ``engine``: the capstone, notebook 09. Your classes serve the model.

The graded object is an :class:`~servelab.kv.learner_engine.EngineSkeleton` subclass: its
``block_manager_class`` (the learner's from notebook 05), its ``scheduler_class`` (notebook
04) and its ``execute`` (written in notebook 09). Everything runs for real: the tiny model,
the paged KV pool, copy-on-write copies, preemption by recompute, prefix hits. Any
difference from dense generation fails: a token, or the KV of any slot a sequence reads or
holds, and the report names the first wrong slot and the block tables pointing at it.

This catches what the per-topic machines cannot see, because they never look at KV: a
copy-on-write from the wrong block, a block two writers share, a hit on a block whose KV is
computed later in the step, a slot that is not where the table says.

Two probes first (a fork's shared partial block, and a prompt that hits the block a running
request's decode fills in the same step): they fail in well under a second and name the
scenario; then the state machine over random workloads. Needs torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from servelab.grading.about import About, Hint
from servelab.grading.topic import MachineCheck, Probe, ProbeFailed, Step, Topic
from servelab.testing.core import InvariantViolation
from servelab.testing.engine import INVARIANTS

__all__ = ["HINTS", "TOPIC"]

try:  # imported with the topic, so a probe's time limit never pays for it
    import torch  # noqa: F401
except ImportError:  # `servelab topics` still lists the topic; grading it needs torch
    pass

HINTS: dict[str, Hint] = {
    "read-unwritten": Hint(
        "a sequence read a slot before any KV was written there. Either a copy-on-write copy "
        "was not made before the decodes (copy every (cow_src, block) first), or a block was "
        "read before this step wrote it (a prefill that hits a block must run after the "
        "decode that fills it: decodes before prefills; only full blocks are cached)",
        About(("execute", "append_slot")),
    ),
    "read-foreign": Hint(
        "a sequence read a slot holding other tokens' KV. Look at the block tables named "
        "above: a shared block written by one of its holders (copy-on-write missing), a copy "
        "from the wrong source block, or a cached block handed out under a stale hash",
        About(("append_slot", "allocate", "execute")),
    ),
    "slot-mapping": Hint(
        "append_slot must return the slot where the block table puts the new token: block "
        "table[(n - 1) // block_size], offset (n - 1) % block_size, after any new block is "
        "appended",
        About(("append_slot",)),
    ),
    "double-write": Hint(
        "two sequences wrote one slot: the first append into a shared partial block must copy "
        "it (copy-on-write) and write the copy",
        About(("append_slot",)),
    ),
    "kv-overwritten": Hint(
        "a slot changed after its KV was written: copy-on-write copies must run before the "
        "decodes write into the copies (copy first in execute)",
        About(("execute",)),
    ),
    "kv-values": Hint(
        "the KV in the pool differs from a dense run although every write went where the "
        "tables say: check that execute passes each prefill's num_cached as its start",
        About(("execute",)),
    ),
    "length": Hint(
        "a computed sequence needs a KV slot for every one of its tokens: a prefill covers "
        "seq.num_tokens (prompt + generated after a preemption), a decode one more",
        About(("execute",)),
    ),
    "tokens": Hint(
        "a sampled token differs from dense generation: was a sequence fed the wrong tokens? "
        "(a recompute must prefill prompt + generated, seq.num_tokens)",
        About(("execute",)),
    ),
    "no-leak": Hint(
        "blocks went missing: free every block of finished and preempted sequences",
        About(("free_seq", "step")),
    ),
}


def _raised(rule: Hint) -> Hint:
    """A probe's own hint: shown only where your code raised (a difference in the KV brings
    its invariant's hint), so it names no rule of the KV, which an error is no evidence of."""
    return Hint(
        "your code raised the error above while serving this scenario, which the reference "
        "serves without one: the line it names is where to look",
        rule.about,
    )


def _probe_machine(
    impl: Any, block_size: int, ops: list[tuple[str, Any]], spare: int = 2, watermark: int = 1
) -> None:
    """Run a fixed program through the same machine the random search uses."""
    from servelab.testing.engine import engine_machine

    machine: Any = engine_machine(impl)()
    machine.configure(block_size=block_size, spare=spare, watermark=watermark)
    try:
        for name, args in ops:
            getattr(machine, name)(**args)
    except InvariantViolation as exc:
        hint = HINTS.get(exc.invariant)
        raise ProbeFailed(exc.detail, machine.log, hint=hint) from None


def _fork_shares_partial(impl: Any) -> None:
    add = {"stem": 0, "tail": [5], "max_new": 4, "n": 3, "temperature": 0.8, "seed": 1}
    _probe_machine(impl, 4, [("add", add), ("drain", {})])


def _hit_on_block_being_filled(impl: Any) -> None:
    add = {"stem": 3, "tail": [7, 8, 9], "max_new": 5, "n": 1, "temperature": 0.0, "seed": 0}
    cont = {"tail": [1], "max_new": 2}
    ops = [("add", add), ("step", {})]

    class One:
        def draw(self, strategy: Any, label: str = "") -> int:
            return 0

    ops.append(("add_continuation", {"data": One(), **cont}))
    _probe_machine(impl, 4, [*ops, ("drain", {})])


def _request(stem: int, tail: list[int], max_new: int) -> dict[str, Any]:
    return {"stem": stem, "tail": tail, "max_new": max_new, "n": 1, "temperature": 0.0, "seed": 0}


def _reclaimed_block_not_found_again(impl: Any) -> None:
    """A cached block is reclaimed for other tokens; its old prefix must not find it again."""
    again = _request(0, [5], 2)  # stem 0: a 6-token system prompt
    ops = [("add", _request(0, [5], 1)), ("drain", {})]  # leaves its first block cached
    ops += [("add", _request(3, list(range(200, 213)), 1)), ("drain", {})]  # takes every block
    _probe_machine(impl, 4, [*ops, ("add", again), ("drain", {})], spare=0, watermark=0)


def _machine(impl: Any) -> Any:
    from servelab.testing.engine import engine_machine

    return engine_machine(impl)


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    """The course's model is 64 wide: threads cost more than they give, and on a busy machine
    they spin, multiplying a grade's CPU time (which the hang guard counts). The learner's
    kernel gets its own thread count back when the grade ends."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


TOPIC = Topic(
    around=_one_torch_thread,
    checkpoint="engine",
    catalogue="run-only",
    name="engine",
    title="your block manager and scheduler serve the model",
    steps=[
        Step(
            1,
            "serve the model: every token and every KV slot equal to dense",
            probes=[
                Probe(
                    "three samples of one prompt share, then copy, its partial block",
                    _raised(HINTS["double-write"]),
                    _fork_shares_partial,
                ),
                Probe(
                    "a prompt hits the block a running request fills in the same step",
                    _raised(HINTS["read-unwritten"]),
                    _hit_on_block_being_filled,
                ),
                Probe(
                    "a reclaimed cached block is not found under its old prefix",
                    _raised(HINTS["read-foreign"]),
                    _reclaimed_block_not_found_again,
                ),
            ],
            machine=MachineCheck(
                "state machine: online requests, forks, shared prefixes, preemption",
                _machine,
                invariants=list(INVARIANTS.values()),
                hints=HINTS,
                max_examples=40,
                step_count=16,
                shrink_programs=60,
            ),
        )
    ],
)
