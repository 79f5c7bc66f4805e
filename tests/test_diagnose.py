"""Diagnosis by matching behaviour: the catalogue is well formed and names what it matches."""

from __future__ import annotations

from typing import Any

import pytest

from servelab.grading import topics
from servelab.grading.diagnose import (
    SPECS,
    diagnosed,
    for_topic,
    program_of,
    remember_program,
    replay,
)
from servelab.grading.mistakes import CORRECT, KERNELS, RUN_ONLY, correct_impl, mistakes

ALL = [m for topic in CORRECT for m in mistakes(topic)]


def test_every_topic_has_a_catalogue_and_a_hook() -> None:
    # invariant-checker grades the learner's checker against fixed states: nothing to replay
    # engine: its checks name the wrong KV slot themselves (mistakes.RUN_ONLY)
    assert set(CORRECT) == set(topics()) - {"invariant-checker", *RUN_ONLY, *KERNELS}
    for topic in CORRECT:
        assert for_topic(topic) is not None
        assert len(mistakes(topic)) >= 5
    assert for_topic("no-such-topic") is None


@pytest.mark.parametrize("mistake", ALL, ids=[f"{m.topic}/{m.name}" for m in ALL])
def test_each_mistake_says_what_it_does_with_its_keyword(mistake: Any) -> None:
    assert mistake.hint and mistake.like
    assert mistake.hint.lower() in mistake.like.lower()


@pytest.mark.parametrize("topic", list(CORRECT))
def test_the_separating_programs_tell_every_two_mistakes_apart(topic: str) -> None:
    spec = SPECS[topic]
    seen: dict[Any, str] = {}
    for m in mistakes(topic):
        trace = tuple(tuple(replay(p, spec, m.impl)) for p in spec.separating)
        assert trace not in seen, f"{m.name} and {seen.get(trace)} behave alike"
        seen[trace] = m.name


def test_a_program_names_the_one_mistake_that_reproduces_it() -> None:
    newest = next(m for m in mistakes("weight-cache") if m.name == "evict_newest")
    program = "\n".join(
        [
            "cache = WeightCache(90)",
            *[f"cache.put({k!r}, '<{k} weights>', 30)" for k in "abcd"],
            "cache.keys()",
        ]
    )
    said = for_topic("weight-cache")(program, newest.impl)  # type: ignore[misc]
    assert said == (
        "your cache behaves exactly like one that evicts the most recently used entry instead "
        "of the least recently used"
    )


def test_no_diagnosis_when_the_correct_implementation_behaves_the_same() -> None:
    hook = for_topic("weight-cache")
    assert hook is not None
    program = "cache = WeightCache(100)\ncache.put('a', '<a weights>', 10)\ncache.keys()"
    newest = next(m for m in mistakes("weight-cache") if m.name == "evict_newest")
    assert hook(program, newest.impl) is None
    assert hook(program, correct_impl("weight-cache")) is None
    assert hook("", newest.impl) is None


def test_an_unknown_behaviour_keeps_the_checks_hint() -> None:
    class Halves:  # evicts nothing and counts half of every size: no known mistake does that
        def __init__(self, capacity: int) -> None:
            self.items: dict[str, int] = {}

        def put(self, key: str, value: Any, size: int) -> None:
            self.items[key] = size // 2

        def keys(self) -> list[str]:
            return list(self.items)

        @property
        def used(self) -> int:
            return sum(self.items.values())

    program = "cache = WeightCache(100)\ncache.put('a', '<a weights>', 10)\ncache.keys()"
    assert for_topic("weight-cache")(program, Halves) is None  # type: ignore[misc]


def test_a_learner_exception_carries_its_program() -> None:
    exc = KeyError("z")
    remember_program(exc, ["cache = WeightCache(100)", "cache.get('z')"])
    remember_program(exc, ["something later"])
    assert program_of(exc) == "cache = WeightCache(100)\ncache.get('z')"
    assert program_of(ValueError()) == ""


def test_a_hanging_call_ends_the_replay() -> None:
    loop = next(m for m in mistakes("weight-cache") if m.name == "endless_loop")
    program = "\n".join(
        [
            "cache = WeightCache(100)",
            "cache.put('a', '<a weights>', 60)",
            "cache.pin('a')",
            "cache.put('b', '<b weights>', 50)",
            "cache.keys()",
        ]
    )
    trace = replay(program, SPECS["weight-cache"], loop.impl)
    assert trace[-1] == ("hung",) and len(trace) == 4


def test_the_grader_call_site_uses_the_program_an_exception_carries() -> None:
    bug = next(m for m in mistakes("weight-cache") if m.name == "get_miss_raises")
    exc = KeyError("z")
    remember_program(exc, ["cache = WeightCache(100)", "cache.get('z')"])
    said = diagnosed("weight-cache", "", exc, bug.impl)
    assert said is not None and "returning None" in said
    assert diagnosed("weight-cache", "", None, bug.impl) is None
    assert diagnosed("no-such-topic", "cache = WeightCache(1)", None, bug.impl) is None


def test_a_broken_diagnosis_never_fails_the_grade() -> None:
    def explodes(capacity: int) -> Any:
        raise SystemError("boom")

    assert diagnosed("weight-cache", "cache = WeightCache(100)", None, explodes) is None


ALIKE = [
    ("weight-cache", ["evict_newest", "evict_largest", "evict_exactly_one"]),
    ("block-manager", ["free_ignores_refcount", "fork_no_refcount"]),
    ("scheduler", ["retire_early", "never_retire"]),
    ("scheduler", ["admit_before_decode", "admit_past_watermark"]),
    ("eviction-policy", ["sieve_hand_backwards", "sieve_born_visited", "sieve_keeps_visited"]),
    # look-alike pairs: one symptom, two causes
    ("weight-cache", ["pin_refreshes_recency", "unpin_refreshes_recency"]),
    ("weight-cache", ["evicted_bytes_not_counted", "replace_counted_as_eviction"]),
    ("weight-cache", ["admit_check_free_space_only", "pinned_bytes_per_pin"]),
    ("weight-cache", ["misses_not_counted", "failed_put_counted_as_miss"]),
    ("eviction-policy", ["lfu_len_counts_pinned", "sieve_len_counts_pinned"]),
    ("eviction-policy", ["lfu_tie_by_key", "lfu_newest_tie"]),
    ("eviction-policy", ["sieve_remove_hand_older", "sieve_remove_resets_hand"]),
    ("eviction-policy", ["sieve_lap_falls_back_oldest", "sieve_keeps_visited"]),
    ("eviction-policy", ["lfu_stale_entry_after_reput", "lfu_remove_keeps_pin"]),
    ("block-manager", ["length_before_alloc", "release_before_allocate"]),
    ("block-manager", ["table_before_check", "allocate_not_atomic"]),
    ("block-manager", ["fork_copies_blocks", "fork_no_refcount"]),
    ("block-manager", ["allocate_zero_takes_block", "blocks_rounded_down"]),
    ("prefix-cache", ["hit_not_verified", "stale_hash"]),
    ("prefix-cache", ["release_cached_to_free", "freed_twice"]),
    ("prefix-cache", ["free_head_first", "evicts_newest"]),
    ("scheduler", ["victim_highest_id", "preempt_current"]),
    ("scheduler", ["decode_by_id", "newest_first_decode"]),
    ("scheduler", ["victims_requeued_newest_first", "requeue_back"]),
    ("scheduler", ["one_victim_per_step", "no_retry_after_preempt"]),
]


@pytest.mark.parametrize(("topic", "names"), ALIKE, ids=["-".join(n) for _, n in ALIKE])
def test_mistakes_that_look_alike_get_different_hints(topic: str, names: list[str]) -> None:
    from buggy_impls import diagnosed_hint

    hints = {}
    for name in names:
        bug = next(m for m in mistakes(topic) if m.name == name)
        hints[name] = diagnosed_hint(topic, bug.impl)[1]
        assert bug.hint.lower() in hints[name].lower(), (name, hints[name])
    assert len(set(hints.values())) == len(names), hints
