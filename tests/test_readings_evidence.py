"""Contracts and readings that speak from evidence, each seen failing a slip of
``tests/unlisted/`` (what the report must say there is in ``tests/test_localise.py``) and
silent on the notebook's checkpoint, where nothing differs.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from buggy_impls import failing_report
from servelab import checkpoint
from servelab.grading.localise import _same_error
from servelab.grading.policy_probes import _lfu_empty, _nothing_to_evict
from servelab.grading.readings import Difference, reading
from servelab.grading.readings.block_manager import block_manager_reading
from servelab.grading.readings.difference import failed_call, other_error
from servelab.grading.readings.eviction_policy import eviction_policy_reading
from servelab.grading.readings.kv_offload import kv_offload_reading
from servelab.grading.readings.prefix_cache import prefix_cache_reading
from servelab.grading.readings.scheduler import scheduler_reading
from servelab.grading.readings.weight_cache import weight_cache_reading
from servelab.grading.token_budget import _spent_budget_ends_the_step
from servelab.grading.topic import ProbeFailed
from servelab.kv.blocks import OutOfBlocks
from servelab.testing.core import InvariantViolation
from servelab.testing.policies import policy_machine
from servelab.testing.policy_models import SIEVEModel
from servelab.weights.policies import NoVictim
from unlisted.blocks import RoomCountedInTokens
from unlisted.policies import SIEVEPopRaisesLookupError
from unlisted.prefix import ChainNamesShifted
from unlisted.token_budget import SpentBudgetBelowZero

POLICIES = checkpoint("eviction-policy", 4)


def _d(
    method: str,
    args: tuple[Any, ...],
    before: dict[str, Any],
    mine: tuple[str, dict[str, Any]],
    theirs: tuple[str, dict[str, Any]],
    subject: Any = None,
    policy: str = "",
) -> Difference:
    return Difference(method, policy, args, before, mine[1], theirs[1], mine[0], theirs[0], subject)


# --- the error a caller catches ---------------------------------------------------------


def test_an_error_of_a_builtin_class_is_not_the_reference_s_own_class() -> None:
    assert not _same_error(IndexError(), NoVictim())
    assert not _same_error(LookupError(), NoVictim())

    class NoVictim2(LookupError):  # a learner's own class, named as they like
        pass

    assert _same_error(NoVictim2(), NoVictim())  # the same base, neither the builtin itself
    assert _same_error(KeyError(), KeyError())
    assert not _same_error(ValueError(), NoVictim())


def test_another_error_is_read_only_when_both_raised_different_classes_and_nothing_else() -> None:
    raised = _d("pop_victim", (), {}, ("raised IndexError", {}), ("raised NoVictim", {}))
    assert "raises NoVictim" in (other_error(raised) or "")
    same = _d("pop_victim", (), {}, ("raised NoVictim", {}), ("raised NoVictim", {}))
    assert other_error(same) is None
    changed = _d(
        "pop", (), {"n": 1}, ("raised IndexError", {"n": 2}), ("raised NoVictim", {"n": 1})
    )
    assert other_error(changed) is None  # a call that raised and changed: failed_call's reading


def test_a_raise_is_told_it_changes_nothing_only_where_the_reference_changed_nothing() -> None:
    kept = _d("put", ("k",), {"n": 1}, ("raised Full", {"n": 2}), ("raised Full", {"n": 1}))
    assert "a call that raises changes nothing" in (failed_call(kept) or "")
    # the reference's raising call leaves something behind too (a tier's temporary file):
    # that rule is not the one broken
    both = _d("put", ("k",), {"n": 1}, ("raised Full", {"n": 3}), ("raised Full", {"n": 2}))
    assert failed_call(both) is None


def test_no_victim_must_be_the_notebook_s_novictim() -> None:
    with pytest.raises(ProbeFailed, match="raised LookupError; expected NoVictim"):
        _nothing_to_evict("SIEVE")(POLICIES | {"SIEVE": SIEVEPopRaisesLookupError})
    _nothing_to_evict("SIEVE")(POLICIES)
    _nothing_to_evict("LFU")(POLICIES)
    _lfu_empty(POLICIES)


def test_the_policy_machine_refuses_another_lookup_error() -> None:
    def run(cls: Any) -> None:
        machine = policy_machine(cls, SIEVEModel, constructor="SIEVE()")
        run_state_machine_as_test(
            machine, settings=settings(max_examples=60, deadline=None, database=None)
        )

    with pytest.raises(InvariantViolation, match="expected NoVictim"):
        run(SIEVEPopRaisesLookupError)
    run(POLICIES["SIEVE"])


# --- the budget spent -------------------------------------------------------------------


def test_a_spent_budget_ends_the_step() -> None:
    with pytest.raises(ProbeFailed, match="not one of 0 tokens"):
        _spent_budget_ends_the_step(SpentBudgetBelowZero)
    _spent_budget_ends_the_step(checkpoint("token-budget", 1))


# --- readings silent where nothing differs ------------------------------------------------


def test_a_slot_reading_needs_a_slot_at_another_position() -> None:
    bm = checkpoint("block-manager", 4)(8, 4)
    bm.allocate(0, 3)
    slot = "returned Slot(block=0, offset=3, cow_src=None)"
    after = {"lengths": {0: 4}, "tables": {0: [0]}, "num_free": 7}
    right = _d(
        "append_slot", (0,), {"lengths": {0: 3}, "num_free": 7}, (slot, after), (slot, after)
    )
    assert block_manager_reading(right) is None
    further = "returned Slot(block=1, offset=0, cow_src=None)"
    mine = {"lengths": {0: 4}, "tables": {0: [0, 1]}, "num_free": 6}
    wrong = _d(
        "append_slot", (0,), {"lengths": {0: 3}, "num_free": 7}, (further, mine), (slot, after), bm
    )
    assert "position 4" in (block_manager_reading(wrong) or "")


def test_a_lookup_that_misses_for_want_of_a_hash_is_not_read_as_a_comparison() -> None:
    bm = checkpoint("prefix-cache", 3)(8, 2)
    d = _d("_lookup", ([1, 2, 3, 4, 5],), {}, ("returned []", {}), ("returned [0, 1]", {}), bm)
    said = prefix_cache_reading(d) or ""
    assert "the hashing is right" not in said and "hash each full block" in said


class _OtherNames(checkpoint("prefix-cache", 3)):  # type: ignore[misc]
    """Names its blocks 5 and 6, whatever their tokens."""

    def _chain(self, tokens: list[int]) -> list[tuple[int, tuple[int, ...]]]:
        return [(5 + i, (t,)) for i, t in enumerate(tokens)]


def test_a_chain_is_read_as_named_by_its_parent_only_when_hashing_proves_it() -> None:
    # the reading asks yours again (a long chain is shown cut short): the subject is yours
    theirs = f"returned {checkpoint('prefix-cache', 3)(8, 1)._chain([1, 2])!r}"
    other = _OtherNames(8, 1)
    shown = f"returned {other._chain([1, 2])!r}"
    d = _d("_chain", ([1, 2],), {}, (shown, {}), (theirs, {}), other)
    assert "the hash before it" not in (prefix_cache_reading(d) or "")
    shifted = ChainNamesShifted(8, 1)
    shown = f"returned {shifted._chain([1, 2])!r}"
    d = _d("_chain", ([1, 2],), {}, (shown, {}), (theirs, {}), shifted)
    assert "the hash before it" in (prefix_cache_reading(d) or "")


def test_a_sweep_reading_needs_yours_to_skip_the_unvisited_key_under_the_hand() -> None:
    fields = {"len": 3, "visited": [], "pinned": [], "hand": "c"}
    mine = {**fields, "eviction order": ["c", "d", "a"]}
    theirs = {**fields, "eviction order": ["c", "d", "a"]}
    same = _d("pop_victim", (), fields, ("returned 'b'", mine), ("returned 'b'", theirs))
    assert "under the hand" not in (eviction_policy_reading(same) or "")
    skipped = {**fields, "eviction order": ["d", "a", "c"]}
    d = _d("pop_victim", (), fields, ("returned 'b'", skipped), ("returned 'b'", theirs))
    d = Difference(**{**d.__dict__, "policy": "SIEVE"})
    assert "under the hand" in (eviction_policy_reading(d) or "")


def test_the_checkpoint_s_replacement_keeps_no_old_size() -> None:
    cache = checkpoint("weight-cache", 5)(100)
    cache.put("a", "<a>", 1)
    before = {"resident": ["a"], "used": 1}
    same = ("returned None", {"resident": ["a"], "used": 50})
    d = _d("put", ("a", "<a>", 50), before, same, same, cache)
    assert "old size" not in (weight_cache_reading(d) or "")


def test_hidden_readings_speak_only_of_the_method_the_graft_found() -> None:
    hidden = {
        ("LFU.update_on_hit", eviction_policy_reading): "heap entry it pushes",
        ("put", weight_cache_reading): "keeps for later",
        ("_register", prefix_cache_reading): "tokens[block] = block_tokens",
    }
    for (method, reader), said in hidden.items():
        assert said in (reading(reader, None, hidden_in=method) or "")
    # a put's old size is asked about only where the program replaces a key
    replacing = (
        "cache = C(100)\ncache.put('a', 1, 30)\ncache.put('a', 1, 50)\ncache.put('b', 1, 60)"
    )
    assert "keep the old size?" in (reading(weight_cache_reading, None, replacing, "put") or "")
    once = "cache = C(100)\ncache.put('a', 1, 30)\ncache.get('a')"
    assert "old size" not in (reading(weight_cache_reading, None, once, "put") or "")
    assert reading(eviction_policy_reading, None, hidden_in="SIEVE.update_on_hit") is None
    # eviction_order's readings are facts a replay of the learner's class proves: none without it
    assert reading(eviction_policy_reading, None, hidden_in="SIEVE.eviction_order") is None
    assert reading(weight_cache_reading, None, hidden_in="get") is None


def test_a_pin_of_a_resident_key_that_raises_is_read_only_when_the_reference_did_not() -> None:
    before = {"resident": ["a"], "pins": {}}
    both = _d("pin", ("a",), before, ("raised KeyError", before), ("raised KeyError", before))
    assert "which is resident" not in (weight_cache_reading(both) or "")
    pinned = ("returned 1", {"resident": ["a"], "pins": {"a": 1}})
    mine = _d("pin", ("a",), before, ("raised KeyError", before), pinned)
    assert "which is resident" in (weight_cache_reading(mine) or "")


def test_a_decode_that_raised_is_read_as_visiting_its_victim_only_after_a_preemption() -> None:
    before = {"running": [(0, 3), (1, 3)]}
    kept = {"running": [(0, 3), (1, 3)]}
    raised = ("raised UnknownSequence", kept)
    d = _d("decode", (None,), before, raised, ("returned None", kept))
    assert "preempted" not in (scheduler_reading(d) or "")
    after = {"running": [(0, 3)]}
    d = _d("decode", (None,), before, ("raised UnknownSequence", after), ("returned None", after))
    assert "still visit a sequence it has preempted" in (scheduler_reading(d) or "")


def test_a_chunk_is_lost_only_when_the_reference_wrote_it_down() -> None:
    before = {"cpu.keys": ["a", "b"], "disk.keys": []}
    theirs = ("returned True", {"cpu.keys": ["c"], "disk.keys": ["a", "b"]})
    lost = ("returned True", {"cpu.keys": ["c"], "disk.keys": ["a"]})
    d = _d("store", ("c", b"c"), before, lost, theirs, policy="Hierarchy")
    assert "yours lost 'b'" in (kv_offload_reading(d) or "")
    d = _d("store", ("c", b"c"), before, theirs, theirs, policy="Hierarchy")
    assert kv_offload_reading(d) is None


class _ExactFitRefused(checkpoint("block-manager", 1)):  # type: ignore[misc]
    """Compares need >= free: a request that takes the last free block is refused."""

    def allocate(self, seq: int, n_tokens: int) -> None:
        need = -(-n_tokens // self.block_size)
        if need and need >= len(self.free):
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks")
        self.tables[seq] = [self._alloc() for _ in range(need)]
        self.lens[seq] = n_tokens


def test_a_refused_fit_blames_an_earlier_call_only_when_yours_counts_fewer_free() -> None:
    report, _ = failing_report("block-manager", RoomCountedInTokens, 1)
    assert "yours counts 1 free too" in report.text
    assert "an earlier call" not in report.text
    before = {"tables": {}, "num_free": 2}
    refused = ("raised OutOfBlocks", before)
    took = ("returned None", {"tables": {0: [0, 1]}, "num_free": 0})
    bm = _ExactFitRefused(2, 2)  # the reading asks yours again: it refuses every exact fit
    exact = _d("allocate", (0, 4), before, refused, took, subject=bm)
    assert "exactly 2 free" in (block_manager_reading(exact) or "")
    assert "ceil" not in (block_manager_reading(exact) or "")
    short = _d("allocate", (0, 5), before, refused, took, subject=bm)
    assert block_manager_reading(short) is None


def test_the_block_count_reading_needs_a_table_of_another_size() -> None:
    before = {"tables": {}, "num_free": 3}
    same = ("returned None", {"tables": {0: [0, 0]}, "num_free": 2})
    other = ("returned None", {"tables": {0: [0, 1]}, "num_free": 1})
    assert "ceil" not in (block_manager_reading(_d("allocate", (0, 2), before, same, other)) or "")
    longer = ("returned None", {"tables": {0: [0, 1, 2]}, "num_free": 0})
    assert "ceil" in (block_manager_reading(_d("allocate", (0, 2), before, longer, other)) or "")


def test_preempt_again_is_read_only_when_yours_took_fewer_victims() -> None:
    before = {"running": [(0, 3), (1, 3), (2, 3)], "waiting": []}
    one = {"running": [(0, 3), (1, 3)], "waiting": [(2, 3)], "out.preempted": [2]}
    two = {"running": [(0, 3)], "waiting": [(1, 3), (2, 3)], "out.preempted": [2, 1]}
    d = _d("decode", (None,), before, ("returned None", one), ("returned None", two))
    assert "preempt again" in (scheduler_reading(d) or "")
    kept = {"running": [(0, 3), (1, 3), (2, 3)], "waiting": [(2, 3)], "out.preempted": [2]}
    theirs = {"running": [(0, 3), (1, 3)], "waiting": [(2, 3)], "out.preempted": [2]}
    d = _d("decode", (None,), before, ("returned None", kept), ("returned None", theirs))
    said = scheduler_reading(d) or ""
    assert "left it in running" in said and "preempt again" not in said


def test_a_block_hashed_at_another_position_says_the_hits_only_where_a_copy_proves_it() -> None:
    bm = checkpoint("prefix-cache", 3)(8, 2)
    before = {"tables": {}, "hashed": [0]}
    table = {"tables": {2: [0, 6, 7]}}
    mine = ("returned 2", {**table, "hashed": [0, 7]})
    theirs = ("returned 2", {**table, "hashed": [0, 6]})
    said = prefix_cache_reading(_d("allocate", (2, [1, 2, 5, 5, 9]), before, mine, theirs, bm))
    # the numbers meet the hits' shift, but the state they come from (the reference's) names no
    # block by the chain's entry 1: the cause is not said (its proof is in
    # test_readings_proven_counts, on the slip itself)
    assert said is not None and "position 2" in said and "from the 1 hit(s)" not in said
    assert "stale" not in said
    cold = ("returned 0", {**table, "hashed": [0, 7]})
    said = prefix_cache_reading(
        _d("allocate", (2, [1, 2, 5, 5, 9]), before, cold, ("returned 0", theirs[1]), bm)
    )
    assert said is not None and "position 2" in said and "hit" not in said


def test_a_room_s_cause_is_stated_only_where_your_room_called_again_proves_it() -> None:
    from unlisted.prefix import RoomCountsHeldHits, RoomSharedAmongHits

    def read(cls: Any) -> str:
        bm = cls(4, 2)
        bm.allocate(0, [1, 2, 3])  # block 0 cached and held, num_free 2
        before = {"num_free": bm.num_free}
        d = _d("_room", ([0],), before, ("returned 1", {}), ("returned 2", {}), bm)
        return prefix_cache_reading(d) or ""

    assert "another sequence holds" in read(RoomCountsHeldHits)
    # num_free // (1 + len(hits)) gives the same 1 here, and 0 (not -1) for three copies
    assert "another sequence holds" not in read(RoomSharedAmongHits)
    assert read(checkpoint("prefix-cache", 3)) == ""


def test_a_chain_s_slices_are_read_only_when_your_chain_slices_otherwise() -> None:
    from unlisted.prefix import ChainSlicesOneShort

    theirs = "returned [(1, (1, 2))]"
    for cls, said in ((ChainSlicesOneShort, "1 token(s) of each block"), (None, "")):
        bm = (cls or checkpoint("prefix-cache", 3))(8, 2)
        d = _d("_chain", ([1, 2, 3],), {}, ("returned [(2, (1, 2))]", {}), (theirs, {}), bm)
        got = prefix_cache_reading(d) or ""
        assert (said in got) if said else "token(s) of each block" not in got


def test_a_slot_off_its_table_is_read_only_when_the_table_does_not_end_with_it() -> None:
    slot = "returned Slot(block=2, offset=2, cow_src=1)"
    before = {"tables": {0: [0, 1]}, "lengths": {0: 6}}
    theirs = (slot, {"tables": {0: [0, 2]}})
    kept = _d("append_slot", (0,), before, (slot, {"tables": {0: [0, 1]}}), theirs)
    assert "left it out of sequence 0's table" in (block_manager_reading(kept) or "")
    right = _d("append_slot", (0,), before, theirs, theirs)
    assert block_manager_reading(right) is None


def test_a_copy_s_source_is_read_only_when_the_reference_s_is_the_table_s_last_block() -> None:
    before = {"tables": {0: [0, 1]}, "lengths": {0: 6}}
    theirs = ("returned Slot(block=2, offset=2, cow_src=1)", {})
    itself = ("returned Slot(block=2, offset=2, cow_src=2)", {})
    said = block_manager_reading(_d("append_slot", (0,), before, itself, theirs)) or ""
    assert "the new block itself as cow_src" in said
    elsewhere = {"tables": {0: [0, 3]}, "lengths": {0: 6}}
    assert "cow_src" not in (
        block_manager_reading(_d("append_slot", (0,), elsewhere, itself, theirs)) or ""
    )


def test_a_block_taken_unheld_and_a_length_are_read_only_from_what_the_call_shows() -> None:
    before = {"tables": {0: [0]}, "free": [1, 2, 3], "num_free": 3, "lengths": {0: 4}}
    slot = "returned Slot(block=3, offset=0, cow_src=None)"
    unheld = (slot, {"tables": {0: [0, 3]}, "refcounts": {0: 1, 3: 0}, "free": [1, 2]})
    held = (slot, {"tables": {0: [0, 3]}, "refcounts": {0: 1, 3: 1}, "free": [1, 2]})
    said = block_manager_reading(_d("append_slot", (0,), before, unheld, held)) or ""
    assert "with refcount 0" in said and "left end" in said
    assert "refcount 0" not in (
        block_manager_reading(_d("append_slot", (0,), before, held, held)) or ""
    )
    mine, theirs = ("returned None", {"lengths": {0: 3}}), ("returned None", {"lengths": {0: 4}})
    assert "recorded the length 3" in (
        block_manager_reading(_d("allocate", (0, 4), {}, mine, theirs)) or ""
    )
    other = ("returned None", {"lengths": {0: 5}})
    assert "recorded the length" not in (
        block_manager_reading(_d("allocate", (0, 4), {}, mine, other)) or ""
    )
