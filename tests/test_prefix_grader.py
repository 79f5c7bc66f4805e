"""The prefix-cache grader passes correct managers and fails every known mistake with its hint."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import hypothesis
import pytest

from buggy_impls import correct_module, diagnosed_hint, mistakes
from servelab import checkpoint
from servelab.grading import GradeFailure, Step, Topic, grade, load_topic
from servelab.kv.prefix import PrefixCachingBlockManager

TOPIC = "prefix-cache"
MISTAKES = mistakes(TOPIC)


def test_the_real_bugs_have_buggy_implementations() -> None:
    assert {"stale_hash", "evicted_left_in_map", "freed_twice"} <= {m.name for m in MISTAKES}


@pytest.mark.parametrize(
    "impl",
    [PrefixCachingBlockManager, correct_module(TOPIC).PrefixBlockManager],
    ids=["reference", "learner"],
)
def test_correct_managers_pass_every_step(impl: Any) -> None:
    for step in (1, 2, 3):
        assert grade(TOPIC, impl, step=step, out=io.StringIO()).passed


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_fails_with_a_hint_naming_it(mistake: Any) -> None:
    # the hint a learner reads: the mistake diagnosed by matching behaviour, else the check's
    report, hint = diagnosed_hint(TOPIC, mistake.impl)
    assert not report.passed
    assert mistake.hint.lower() in hint.lower(), (mistake.name, hint, report.text)


def _machine_only(number: int, seed: int | None) -> Topic:
    step = load_topic(TOPIC).step(number)
    check = step.machine
    assert check is not None
    if seed is not None:
        build = check.build
        check = replace(check, build=lambda impl: hypothesis.seed(seed)(build(impl)))
    return Topic(TOPIC, "machine only", [Step(number, step.title, (), check)])


STEP_ONE = ["unchained_hash", "no_last_token_cap", "lookup_past_miss", "register_overwrites"]
STEP_TWO = ["unchained_hash", "no_last_token_cap", "hit_no_refcount"]


@pytest.mark.slow
@pytest.mark.parametrize("name", STEP_ONE)
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_step_one_machine_alone_catches_its_mistakes(name: str, seed: int | None) -> None:
    # step 1's machine drives _chain, _register and _lookup alone and finds their mistakes
    bug = next(m for m in MISTAKES if m.name == name)
    with pytest.raises(GradeFailure) as failure:
        grade(_machine_only(1, seed), bug.impl, step=1, out=io.StringIO())
    assert "chain / register / lookup" in failure.value.report.text


@pytest.mark.slow
@pytest.mark.parametrize("name", STEP_TWO)
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_step_two_machine_alone_catches_its_mistakes(name: str, seed: int | None) -> None:
    # step 2 has its own machine (nothing is freed yet): it finds these mistakes alone
    bug = next(m for m in MISTAKES if m.name == name)
    with pytest.raises(GradeFailure) as failure:
        grade(_machine_only(2, seed), bug.impl, step=2, out=io.StringIO())
    assert "nothing freed yet" in failure.value.report.text


def test_the_issue_example_of_an_unchained_hash_fails_step_one() -> None:
    bug = next(m for m in MISTAKES if m.name == "unchained_hash")
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, bug.impl, step=1, out=io.StringIO())
    assert "bm._chain([1, 1, 1, 1, 5])" in failure.value.report.code
    # step 2's own probes name it through allocate, as a learner who skipped step 1 sees it
    second = load_topic(TOPIC).step(2)
    only_two = Topic(TOPIC, "step 2 only", [second])
    with pytest.raises(GradeFailure) as failure:
        grade(only_two, bug.impl, step=2, out=io.StringIO())
    assert "bm.allocate(1, [1, 1, 1, 1, 5])" in failure.value.report.code


# ------------------------------------------------------------------ step 1 on its own
# Learner-shaped classes with one mistake in _chain, _register or _lookup: each step-1 probe
# fails on its own, with the probe's name in the report and a hint that names the mistake.
Correct = correct_module(TOPIC).PrefixBlockManager


class ChainListTokens(Correct):  # block tokens as a list: a verified hit can never match
    def _chain(self, tokens: list[int]) -> Any:
        return [(h, list(t)) for h, t in super()._chain(tokens)]


class ChainWithPartial(Correct):  # names the partial tail block too
    def _chain(self, tokens: list[int]) -> Any:
        chain = super()._chain(tokens)
        rest = tuple(tokens[len(chain) * self.block_size :])
        if rest:
            chain.append((hash((chain[-1][0] if chain else 0, rest)), rest))
        return chain


class UnchainedHash(Correct):
    def _chain(self, tokens: list[int]) -> Any:
        return [(hash(t), t) for _, t in super()._chain(tokens)]


class RegisterForgetsTokens(Correct):
    def _register(self, b: int, h: int, block_tokens: tuple[int, ...]) -> None:
        if h not in self.map:
            self.map[h] = b
            self.hash[b] = h


class RegisterOverwrites(Correct):
    def _register(self, b: int, h: int, block_tokens: tuple[int, ...]) -> None:
        self.map[h] = b
        self.hash[b] = h
        self.tokens[b] = block_tokens


class LookupNoCap(Correct):
    def _lookup(self, tokens: list[int]) -> list[int]:
        return super()._lookup([*tokens, 0])


class LookupPastMiss(Correct):
    def _lookup(self, tokens: list[int]) -> list[int]:
        cap = (len(tokens) - 1) // self.block_size
        return [self.map[h] for h, _ in self._chain(tokens)[:cap] if h in self.map]


class LookupTrustsHash(Correct):
    def _lookup(self, tokens: list[int]) -> list[int]:
        hits = []
        for h, _ in self._chain(tokens)[: (len(tokens) - 1) // self.block_size]:
            if h not in self.map:
                break
            hits.append(self.map[h])
        return hits


class LookupNothing(Correct):
    def _lookup(self, tokens: list[int]) -> list[int]:
        return []


STEP_ONE_BUGS = [
    (ChainListTokens, "only full blocks are chained", "tuple"),
    (ChainWithPartial, "only full blocks are chained", "full block"),
    (UnchainedHash, "a block's hash covers its whole prefix", "chain"),
    (RegisterForgetsTokens, "register caches a block under its hash", "tokens[block]"),
    (RegisterOverwrites, "an equal block already cached stays private", "already cached"),
    (LookupNothing, "a lookup finds the cached prefix", "the miss is in `_lookup` itself"),
    (LookupNoCap, "the last prompt token is always computed", "last prompt token"),
    (LookupPastMiss, "a lookup stops at the first miss", "first miss"),
    (LookupTrustsHash, "a hit is checked against the stored tokens", "verified"),
]


@pytest.mark.parametrize(
    ("impl", "probe", "hint"), STEP_ONE_BUGS, ids=[b[0].__name__ for b in STEP_ONE_BUGS]
)
def test_each_step_one_probe_names_its_mistake(impl: Any, probe: str, hint: str) -> None:
    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, impl, step=1, out=io.StringIO())
    report = failure.value.report
    assert f"✗ step 1 · {probe}" in report.text, report.text
    assert hint.lower() in report.hint.lower(), report.text
    assert report.code.startswith(f"bm = {impl.__name__}(8, 2)"), report.code


def test_step_one_grades_the_notebook_class_before_allocate_is_written() -> None:
    # LookupBlocks in the notebook: the skeleton plus _chain, _register and _lookup; its
    # allocate is still notebook 03's (a count of tokens, no prefix hits)
    lookup_blocks = checkpoint(TOPIC, step=1)
    assert lookup_blocks.allocate is checkpoint("block-manager", step=4).allocate
    assert grade(TOPIC, lookup_blocks, step=1, out=io.StringIO()).passed


def test_step_one_without_the_skeleton_checks_the_same_rules_through_allocate() -> None:
    # the reference keeps no `map`: step 1 falls back to allocate and num_cached_tokens
    class UnchainedReference(PrefixCachingBlockManager):
        def num_cached_tokens(self, token_ids: Any, *, extra_key: object = None) -> int:
            return 4 if list(token_ids)[:4] == [1, 1, 1, 1] else 0

        def allocate(self, seq: int, token_ids: Any, *, extra_key: object = None) -> int:
            got = super().allocate(seq, token_ids, extra_key=extra_key)
            return 4 if list(token_ids) == [1, 1, 1, 1, 5] else got

    with pytest.raises(GradeFailure) as failure:
        grade(TOPIC, UnchainedReference, step=1, out=io.StringIO())
    assert "bm.allocate(" in failure.value.report.code


# A hash collision never comes from random token ids (64-bit hashes): only the step-1 probe,
# which plants one, sees a lookup that trusts the hash, and the final grade runs that probe.
PROBE_ONLY = {"hit_not_verified"}
GENERATED = [m for m in MISTAKES if m.name not in PROBE_ONLY]


@pytest.mark.slow
@pytest.mark.parametrize("mistake", GENERATED, ids=[m.name for m in GENERATED])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_state_machine_alone_catches_each_mistake(mistake: Any, seed: int | None) -> None:
    # Without the probes, the model comparison still finds every planted bug, whatever the
    # seed: a derandomized run's seed changes whenever the machine's source does.
    final = load_topic(TOPIC).steps[-1]
    with pytest.raises(GradeFailure) as failure:
        grade(_machine_only(final.number, seed), mistake.impl, out=io.StringIO())
    assert "reproduce:" in failure.value.report.text
