"""Slips graded end to end. A prefix-cache lookup that cuts the prompt it is given in place:
the learner gets its own copy of each prompt, so the model reads the prompt as the caller wrote
it and the report shows the change to the list given. A SIEVE eviction_order worked out apart
from pop_victim: the report sets its list beside what popping a copy of the learner's policy
evicts, keeps the only-reads wording for an eviction_order that changes the policy, and tells one
that pops past the last candidate."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade

PREFIX = "prefix-cache"
POLICY = "eviction-policy"
Lookup = checkpoint(PREFIX, 1)
POLICIES = checkpoint(POLICY, 4)
SIEVE = POLICIES["SIEVE"]


class LookupCutsPrompt(Lookup):
    """_lookup caps its walk by cutting the caller's list (`del tokens[cap * size:]`)."""

    def _lookup(self, tokens: list[int]) -> list[int]:
        del tokens[((len(tokens) - 1) // self.block_size) * self.block_size :]
        return super()._lookup([*tokens, 0])


class LookupPadsPrompt(Lookup):
    """_lookup answers for the prompt, then pads the caller's list to a whole block."""

    def _lookup(self, tokens: list[int]) -> list[int]:
        hits = super()._lookup(list(tokens))
        tokens.extend([0] * (-len(tokens) % self.block_size))
        return hits


class LookupCutsCopy(Lookup):
    """The look-alike: the cap cuts a copy (tokens[:n]), the caller's list stays."""

    def _lookup(self, tokens: list[int]) -> list[int]:
        tokens = list(tokens)
        del tokens[len(tokens) :]
        return super()._lookup(tokens)


def _report(topic: str, impl: Any, step: int) -> str:
    with pytest.raises(GradeFailure) as failure:
        grade(topic, impl, step, quiet=True)
    return str(failure.value)


def _reproduce(report: str) -> list[str]:
    lines = report.split("reproduce:")[1].splitlines()[1:]
    out = []
    for line in lines:
        if not line.startswith("      "):
            break
        out.append(line.strip())
    return out


@pytest.mark.parametrize("cls", [LookupCutsPrompt, LookupPadsPrompt])
def test_a_call_that_changes_the_prompt_it_is_given_is_shown_doing_so(cls: type) -> None:
    report = _report(PREFIX, cls, 1)
    failing = report.split("reproduce:")[0]
    assert "changed the list it was given" in failing
    assert "; expected" not in failing  # no value the model read off a list the learner cut
    assert "only read the prompt" in report.split("hint:")[1]
    # the printed program's last call, made on a named list: the checkpoint leaves it, yours not
    *before, last = _reproduce(report)
    call, _, arg = last.partition("(")
    kept = {}
    for impl, name in ((Lookup, "theirs"), (cls, "mine")):
        ns: dict[str, Any] = {cls.__name__: impl}
        for line in before:
            exec(line, ns)
        ns["given"] = eval("[" + arg.rpartition(")")[0].strip("[]") + "]")
        prompt = list(ns["given"])
        exec(f"{call}(given)", ns)
        kept[name] = ns["given"] == prompt
    assert kept == {"theirs": True, "mine": False}


def test_a_lookup_that_cuts_a_copy_passes() -> None:
    grade(PREFIX, LookupCutsCopy, 1, quiet=True)


def test_the_model_reads_the_prompt_the_caller_wrote() -> None:
    # a lookup that answers for the whole prompt and then cuts it: were the model handed the
    # learner's list, it would read the cut prompt and expect another answer
    from servelab.testing.prefix_chain import chain_machine

    seen: list[tuple[list[int], list[int]]] = []

    class Watched(Lookup):
        def _lookup(self, tokens: list[int]) -> list[int]:
            seen.append((tokens, list(tokens)))
            return super()._lookup(tokens)

    machine = chain_machine(Watched, name="Watched")()
    machine.create(2)
    prompt = [0, 1, 2]
    machine.lookup(prompt, 3, [])
    given, as_given = seen[-1]
    assert given is not prompt and as_given == prompt


def _trial_order(p: Any) -> list[Any]:
    trial = copy.deepcopy(p)
    return [trial.pop_victim() for _ in range(len(trial))]


class OrderApartFromPops(SIEVE):
    """eviction_order without trial pops: the unvisited candidates from the hand on, then the
    visited ones from the oldest (after a lap the hand clears those too, in sweep order)."""

    def eviction_order(self) -> list[Any]:
        start = 0 if self.hand is None else self.queue.index(self.hand)
        swept = self.queue[start:] + self.queue[:start]
        candidates = [k for k in swept if k not in self.pinned]
        first = [k for k in candidates if not self.visited[k]]
        then = [k for k in self.queue if k not in self.pinned and self.visited[k]]
        return first + then


class OrderClearsBits(SIEVE):
    """The look-alike: the right order, from a trial that shares the visited bits, so asking
    for the order clears the policy's bits."""

    def eviction_order(self) -> list[Any]:
        order = _trial_order(self)
        for key in self.queue:
            self.visited[key] = False
        return order


def _policy_hint(cls: type) -> tuple[str, str]:
    report = _report(POLICY, {"LFU": POLICIES["LFU"], "SIEVE": cls}, 4)
    return report, report.split("hint:")[1]


def test_an_order_apart_from_pop_victim_is_set_beside_the_pops() -> None:
    report, hint = _policy_hint(OrderApartFromPops)
    assert "popping a copy of yours" in hint
    assert "eviction_order must be the order pop_victim would evict in" in hint
    assert "only reads" not in hint
    # the two lists named are what the printed program gives on the slip
    ns: dict[str, Any] = {OrderApartFromPops.__name__: OrderApartFromPops}
    lines = _reproduce(report)
    for line in lines[:-1]:
        exec(line, ns)
    var = lines[-1].split("(")[1].split(".")[0]
    p = ns[var]
    listed, popped = list(p.eviction_order()), _trial_order(p)
    assert listed != popped
    assert f"lists {listed!r}" in hint and f"evicts {popped!r}" in hint


def test_an_order_that_changes_the_policy_keeps_the_only_reads_wording() -> None:
    _, hint = _policy_hint(OrderClearsBits)
    assert "popping a copy of yours" not in hint
    assert "only reads" in hint


class OrderPopsPastPins(SIEVE):
    """eviction_order pops its trial copy until the queue is empty, pinned keys included: the
    pop after the last candidate raises NoVictim out of eviction_order."""

    def eviction_order(self) -> list[Any]:
        trial = copy.deepcopy(self)
        order = []
        while trial.queue:
            order.append(trial.pop_victim())
        return order


def test_an_order_that_pops_past_the_candidates_is_told_so() -> None:
    report, hint = _policy_hint(OrderPopsPastPins)
    assert "NoVictim" in report.split("hint:")[0]
    assert (
        "your eviction_order raised NoVictim: it asked pop_victim for a victim after the " in hint
    )
    assert "len() times, and stops there" in hint
    assert "no single call of it differs" not in hint and "only reads" not in hint
