"""Localisation by method graft: the method where a class starts to differ, for any mistake."""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest

from buggy_impls import failing_report
from pasted import fails_as_printed
from servelab import checkpoint
from servelab.grading.diagnose import HOOKS, variants, where_lines
from servelab.grading.localise import changed_methods, graft, skeleton_methods
from servelab.grading.mistakes import correct_impl
from servelab.grading.replay import LINE_TIMEOUT_S, line_budget
from servelab.testing import core
from unlisted import Unlisted, unlisted

UNLISTED = unlisted()


def test_the_held_out_set_covers_every_topic_with_fifteen_or_more() -> None:
    assert len(UNLISTED) >= 15
    assert {u.topic for u in UNLISTED} == set(HOOKS)


# What the reading of the first diverging call must say, and must not, for unlisted mistakes
# whose reports once named a different cause (a fit check counting a block too many was told
# it compares with the watermark strictly; equal sizes were called "the largest").
READS = {
    "fit counts one block too many": ("ceil(n / block_size)", "exactly the watermark"),
    "victim scan skips the oldest": ("least recently used unpinned", "largest"),
    "pin recorded before the check": ("changes nothing", "each pin adds 1"),
    "a hit counted on every get": ("absent key ('zz') counts one miss and no hit", "resident key"),
    "refcounts raised before the fork check": ("changes nothing", "shares each block"),
    "fork length plus one": ("parent's length: 4, not 5", "length zero"),
    "SIEVE removal keeps the pin": ("pin all go with it", "under the hand"),
    "retire skips the next sequence": ("left finished sequence", "written for"),
    "admit puts a waiting sequence back last": ("first come, first served", "written for"),
    # the kind of difference, where no catalogue mistake fits: a unit's factor, a latency per
    # chunk, a pin left or a chunk dropped by a release, a victim missing from the output
    "release removes the chunk": ("the chunks stay cached", "written for"),
    "release skips disk hits": ("pin(s) on", "written for"),
    "release of the first chunk only": ("left 1 pin(s) on 'c'", "written for"),
    "release drops every pin": ("took 2 pin(s) off 'b'", "written for"),
    "load time in milliseconds": ("1000 times the reference's", "K and V"),
    "KV bytes in GB over bytes per second": ("1/1e9", "latency per"),
    "chunk requests rounded down": ("1 link latency", "written for"),
    "bandwidth read as bits": ("8 times", "written for"),
    "preempt leaves out.preempted empty": ("did not put sequence", "front of waiting"),
    "preempt reports the victim finished": ("in out.finished", "front of waiting"),
    "preempt does not report its victim": ("did not put request", "written for"),
    # readings from evidence: an error of another class, a slot at another position, a
    # lookup whose own chain finds the block, a chain shifted by one, a sweep past the hand,
    # a loop over a copy, a chunk dropped, and what a method keeps hidden
    "SIEVE pop raises its own LookupError": ("where the reference raises NoVictim", "evicted"),
    "slot from the raised length": ("the length before the call", "written for"),
    "copy-on-write forgets the length": ("left the length of sequence", "written for"),
    "lookup verifies against a slice": ("the hashing is right", "hash each full block"),
    "chain names shifted by one": ("by the hash before it", "written for"),
    "SIEVE sweep rotated past the hand": ("does yours start one past it?", "left the queue"),
    "SIEVE order trial clears the real bits": ("deep copy", "model's expectation"),
    "LFU put pushes count 0": ("heap entry it pushes", "smallest count"),
    "replacement restores the old size": ("keep the old size?", "evict in a loop"),
    "replace keeps the old size": ("the old size", "evict in a loop"),
    "LFU heap entry pushed with the old count": ("heap entry it pushes", "smallest count"),
    "a second pin of a resident key refused": ("which is resident", "each pin adds 1"),
    "decode walks a slice of running": ("still visit a sequence it has preempted", "written for"),
    "store writes one victim down": ("yours lost 'y'", "written for"),
    "a refused add takes back the head": ("changed waiting first", "size rule"),
    "the budget checked for below zero": ("no chunk of 0 tokens", "one token each"),
    "preempt keeps the victim's blocks": ("bm.free_seq", "written for"),
    "allocate answers blocks, not tokens": ("block_size (4)", "exactly like"),
    "a claimed hit keeps its refcount": ("`refcounts` of", "exactly like"),
    "append_slot keeps the length": ("left the length of sequence 0 at 3", "exactly like"),
    "discard keeps the bytes": ("yours left `used` at", "off by one"),
    "store answers whether nothing was evicted": ("the work is right", "cascades down"),
    "a chunk that exactly fits is a miss": ("an exact fit fits", "wait + 1 tries"),
    "fits takes a count of blocks": ("needed in blocks (ceil(n_tokens", "one block early"),
    "a size checked for its sign only": ("a size of 2.5", "beside the pinned ones"),
    "admit stops after one admission": ("taking the head of waiting while it fits", ">="),
    "unpin returns the count it found": ("unpin() returns the pins left", "exactly like"),
    "LFU len counts stale heap entries": ("stale copies", "pinned key is not"),
    "lookup capped a block short": ("one block short", "chained on the previous"),
    "room counts held hits": ("another sequence holds", "1/block_size"),
    "partial block kept reclaimable": ("not cached", "not the plain free list"),
    "SIEVE sweep clears pinned keys' bits": ("cleared the visited bit of pinned", "stays where"),
    "retries count the first try": ("wait + 1 tries", "written for"),
    "lookup pins each tier holding": ("first tier that holds it", "written for"),
    "retrieve unrefs promoted chunks only": ("leaves no reference", "written for"),
    "replacement evicts while the old entry counts": ("release the old entry", "budget"),
    "evicted size read after removing": ("before removing it", "count every eviction"),
    "a request needing exactly the budget waits": ("exactly the budget left fits", "in `running`"),
    "slots counted from position 0": ("those of positions from 0", "written for"),
    "alloc takes from the right end": ("the free list taken from its right end (pop)", "_release"),
    # a reading is shown only on the difference it was written for (WrittenFor): a victim's
    # size taken twice is no size forgotten, a raise no eviction, an off by one no pin
    # a Python error of the learner's own: where it was raised, not the fields it cut short
    "evict forgets pins with a failing lookup": ("`del self._pins[key]`", "from `used`"),
    "evict subtracts the size twice": ("victim's own size, once", "must subtract its size"),
    "eviction of the oldest counted twice": ("more than this one eviction", "count every"),
    "LFU pin resets the count": ("`counts` of 'm", "takes it out"),
    "SIEVE len one short": ("one less than the reference's", "pinned key"),
    "SIEVE pop returns None": ("NoVictim", "the hand moves"),
    "SIEVE put resets the hand": ("eviction order", "joins the newest end"),
    "allocate of zero tokens raises": ("raised InvalidLength for allocate(", "holds no block"),
    "fork zeroes the parent's length": ("`lengths` of 0", "the child starts"),
    "release parks a held block": ("`reclaim order`", "freed by its last holder"),
    # a reading speaks only when its precondition shows in the call: a refusal with the blocks
    # free is no block count; a block twice in one table is no reclaim order; a victim still
    # running is no missing second victim; a block held at 0 is no order of reclaim
    "room counted in tokens": ("with exactly 1 free", "ceil(len / block_size)"),
    "evictable hits revived last": ("twice", "ceil(len / block_size)"),
    "victim peeked, not popped": ("left it in running", "preempt again"),
    "a fresh block handed out unheld": ("with refcount 0", "least recently freed"),
    # a write in place into a block three tables hold is no copy that lost its source
    "copy only with two holders": ("wrote in place into block", "wrote into a copy"),
    "hashes paired from the end": ("hashed block 2 (position 2", "stale hash"),
    # a reading speaks only of the difference it was written for: more victims than one is no
    # other victim; a step that admits nothing decoded no newcomer; a fits that raises broke no
    # watermark; a pin that raises counted nothing; too few held bytes are no double count
    "decode preempts every newer sequence": ("as well as", "not the one whose append failed"),
    "step admits only when nothing runs": ("in `waiting`", "it just admitted"),
    "fits raises for 0 tokens": ("part only at 0", "the watermark stays free"),
    "a failed extend preempts two": ("as well as", "yours preempted request"),
    "a running prompt's rest not chunked": ("scheduled nothing for running request", "hashed"),
    "pin refuses a referenced chunk": ("did not add 'a' to `pins`", "each pin adds one"),
    "held bytes at the first chunk's size": ("distinct chunks", "twice"),
    "victims from the back of the order": ("front of the policy order", "written for"),
    "retrieve never promotes": ("promotes a chunk found below", "where the reference puts"),
    # a block manager's difference read from the call itself: the length its arguments give,
    # a block taken unheld, a slot its table does not end with, the block a copy is made from
    "length recorded as the last index": ("recorded the length 3", "off by one"),
    "boundary block popped from the right": ("with refcount 0", "written for"),
    "copy names itself the source": ("the new block itself as cow_src", "written for"),
    "copy left out of the table": ("left it out of sequence 0's table", "written for"),
    "blocks freed in set order": ("last block first", "exactly like"),
    # a prefix cache's chain sliced short, shown by calling your _chain again; a room count's
    # cause stated only where your _room, called again, proves it
    "chain slices one token short": ("token(s) of each block", "written for"),
    "room keeps one block spare": ("with no hits at all yours counts 7", "off by one"),
    "room shared among the hits": ("yours returned 1, the reference 2", "another sequence holds"),
    # a sweep that wraps early evicts an older key: the hand's direction is not its cause
    "SIEVE sweep wraps one key early": ("evicts the first unvisited key", "wrong way"),
    # a slip spread over three methods is placed, the group found one method at a time
    "pins kept in a dict of its own": ("each pin adds 1", "no one method"),
}


@pytest.mark.parametrize("u", UNLISTED, ids=[f"{u.topic}/{u.name}" for u in UNLISTED])
def test_an_unlisted_mistake_fails_is_localised_and_gets_no_certainty(u: Unlisted) -> None:
    report, program = failing_report(u.topic, u.impl, u.step)
    finding = HOOKS[u.topic].explain(program, u.impl, u.step)
    assert set(finding.methods) & u.methods, (finding.methods, report.text)
    assert not finding.certain
    assert "exactly like" not in report.text
    assert "where: the difference" in report.text
    if u.name in READS:
        said, unsaid = READS[u.name]
        assert said in report.hint and unsaid not in report.hint, report.hint
    _runs_to_its_last_line(u, program)
    # pasted as printed, under its own class names, it fails: a line raises, or the last
    # line's value is not the reference's
    assert fails_as_printed(u.topic, program, u.impl, checkpoint(u.topic, u.step)), program


def _runs_to_its_last_line(u: Unlisted, program: str) -> None:
    """Pasted into the learner's notebook, the reproduce: lines run up to the last one, the
    line the report is about: a refusal the check caught is written under ``suppress``."""
    hook = HOOKS[u.topic]
    ns = hook.spec.namespace(u.impl)
    code = hook.usual_names(program, u.impl).splitlines()
    lines = [line for line in code if line.strip() and not line.lstrip().startswith("#")]
    for line in lines[:-1]:  # a note (a comment) after the last call runs nothing
        try:
            exec(compile(line, "<reproduce>", "exec"), ns)
        except Exception as exc:
            said = f"{line!r} raised {exc!r} before the last line:\n{program}"
            raise AssertionError(said) from exc


def _on_the_last_checkpoint(u: Unlisted) -> bool:
    final = correct_impl(u.topic)
    mine = u.impl if isinstance(u.impl, dict) else {"": u.impl}
    theirs = final if isinstance(final, dict) else {"": final}
    return mine.keys() == theirs.keys() and all(issubclass(mine[k], theirs[k]) for k in mine)


FINISHED = [u for u in UNLISTED if _on_the_last_checkpoint(u)]


@pytest.mark.parametrize("u", FINISHED, ids=[f"{u.topic}/{u.name}" for u in FINISHED])
def test_a_held_out_mistake_fails_the_grade_of_all_steps_where_its_step_found_it(
    u: Unlisted,
) -> None:
    # the step that introduces a mistake catches it; so must the grade of every step at once
    # (kv-offload's final machine once checked the cost model alone, and a release that
    # unpinned in the wrong tier passed it), and the report points at the same method
    report, program = failing_report(u.topic, u.impl)
    finding = HOOKS[u.topic].explain(program, u.impl)
    assert set(finding.methods) & u.methods, (finding.methods, report.text)
    assert not finding.certain


def test_a_slow_collection_during_a_replay_moves_no_localisation() -> None:
    # Once a test run (or a learner's kernel) holds enough objects, a full collection can take
    # longer than a replayed line may: landing in the reference's replay, it made that line
    # "hung", no graft agreed with it, and the same mistake was localised nowhere.
    u = next(u for u in UNLISTED if u.name == "release of the first chunk only")
    _, program = failing_report(u.topic, u.impl)
    slowed: list[bool] = []

    def slow_collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and not slowed and getattr(core._guard_depth, "n", 0):
            slowed.append(True)
            end = time.process_time() + 2 * LINE_TIMEOUT_S
            while time.process_time() < end:
                pass

    threshold = gc.get_threshold()
    gc.callbacks.append(slow_collection)
    gc.set_threshold(50)  # a collection in the first replayed line: the reference's
    try:
        finding = HOOKS[u.topic].explain(program, u.impl)
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(slow_collection)
    assert slowed
    assert set(finding.methods) & u.methods, finding.methods


def test_the_reads_name_held_out_mistakes() -> None:
    assert set(READS) <= {u.name for u in UNLISTED}


def test_a_graft_keeps_zero_argument_super_working() -> None:
    final = checkpoint("weight-cache", 5)

    class Mine(final):  # type: ignore[misc, valid-type]
        def _evict(self, key: Any) -> None:  # forgets to count, and to subtract
            self._entries.pop(key)

    hybrid = graft(Mine, final, ["_evict"])
    cache = hybrid(50)
    cache.put("a", "<a>", 30)
    cache.put("b", "<b>", 30)  # evicts 'a' through the grafted chain, super() included
    assert (cache.keys(), cache.used, cache.evictions) == (["b"], 30, 1)
    assert hybrid.__name__ == "Mine" and issubclass(hybrid, Mine)


def test_the_skeleton_methods_are_the_steps_own_in_course_order() -> None:
    assert skeleton_methods(checkpoint("weight-cache", 2)) == (
        "get",
        "put",
        "_next_victim",
        "_evict",
    )
    policy = skeleton_methods(checkpoint("eviction-policy", 4))
    assert "LFU.pop_victim" in policy and "SIEVE.pop_victim" in policy
    assert "__init__" not in policy


def test_changed_methods_are_those_defined_on_top_of_the_correct_class() -> None:
    final = checkpoint("block-manager", 4)

    class Mine(final):  # type: ignore[misc, valid-type]
        def fork(self, parent: int, child: int) -> None:
            super().fork(parent, child)

    assert changed_methods(Mine, final) == {"fork"}
    assert changed_methods(final, final) == frozenset()


def test_a_pin_that_raises_after_recording_shows_the_pin_count_that_changed() -> None:
    u = next(x for x in UNLISTED if x.name == "pin recorded before the check")
    program = "cache = WeightCache(100)\ncache.put('a', '<a weights>', 40)\ncache.pin('zz')"
    lines = where_lines(HOOKS["weight-cache"].localised(program, u.impl, 4))
    assert lines[0] == "the difference starts in your `pin`"
    assert lines[2] == "yours raised KeyError; pins {} -> {'zz': 1}"
    assert lines[3] == "the reference raises KeyError; nothing changed"


def test_a_class_off_the_skeleton_is_told_so_in_one_line() -> None:
    class Own:  # its own fields: no `_entries`
        def __init__(self, capacity: int) -> None:
            self.items: dict[str, int] = {}
            self.capacity = capacity

        def put(self, key: str, value: Any, size: int) -> None:
            self.items[key] = size // 2

        def keys(self) -> list[str]:
            return list(self.items)

        @property
        def used(self) -> int:
            return sum(self.items.values())

    program = "cache = WeightCache(100)\ncache.put('a', '<a weights>', 10)\ncache.keys()"
    place = HOOKS["weight-cache"].localised(program, Own, 1)
    assert not place.methods and place.note is not None and "`_entries`" in place.note


def test_a_hybrid_that_never_returns_ends_by_a_count_of_lines() -> None:
    ran: list[int] = []

    def spins() -> None:  # a learner's loop that swallows everything
        while True:
            try:
                ran.append(1)
            except BaseException:
                pass

    with pytest.raises(BaseException) as caught, line_budget(1000):
        spins()
    assert type(caught.value).__name__ == "OutOfLines"
    assert 100 < len(ran) < 1000


def test_the_variants_of_a_program_are_the_same_on_every_run() -> None:
    program = "sched.add(Sequence.dummy(0, prompt_len=20, max_new_tokens=1))"
    assert variants(program, 5) == variants(program, 5)
    assert len(set(variants(program, 5))) > 1
    assert all("Sequence.dummy(" in v for v in variants(program, 5))


def test_a_property_is_grafted_with_its_super_chain() -> None:
    class Base:
        @property
        def used(self) -> int:
            return 1

    class Step(Base):
        @property
        def used(self) -> int:
            return super().used + 1

    class Mine(Step):
        @property
        def used(self) -> int:
            return 40

    assert graft(Mine, Step, ["used"])().used == 2


class _ReleaseEmptiesFound(checkpoint("kv-offload", 3)["Hierarchy"]):  # type: ignore[misc]
    """Pops the caller's `found` while it unpins, and unpins only the CPU tier's hits."""

    def release(self, found: list[tuple[str, int]]) -> None:
        while found:
            key, i = found.pop()
            if i == 0:
                self.tiers[i].unpin(key)


def _called_as(report_text: str) -> str:
    return next(line for line in report_text.splitlines() if "called as" in line)


def test_a_call_is_shown_with_the_arguments_it_was_passed_not_as_the_method_left_them() -> None:
    impl = {**checkpoint("kv-offload", 3), "Hierarchy": _ReleaseEmptiesFound}
    report, _ = failing_report("kv-offload", impl, 3)
    called = _called_as(report.text)
    assert "h.release([(" in called, called  # the list as passed, not the empty one left
    assert "release([])" not in called


def test_a_call_whose_method_leaves_its_arguments_alone_shows_them_as_passed_too() -> None:
    u = next(x for x in UNLISTED if x.name == "release skips disk hits")
    report, _ = failing_report(u.topic, u.impl, u.step)
    assert "h.release([(" in _called_as(report.text)


def test_the_catalogues_measure_shows_the_hint_the_report_shows() -> None:
    # tests/buggy_impls.shown_hint asks the report's own choice (Report.choice): the same
    # topic hook, error and program, so the measure cannot drift from what a learner reads
    from dataclasses import replace

    from buggy_impls import failing_check, shown_hint
    from servelab.grading import load_topic
    from servelab.grading.diagnose import explained

    for name in ("release skips disk hits", "evicted size read after removing"):
        u = next(x for x in UNLISTED if x.name == name)
        report, program, exc = failing_check(u.topic, u.impl, u.step)
        plain = replace(load_topic(u.topic), diagnose=lambda program, impl: None)
        undiagnosed, _, _ = failing_check(plain, u.impl, u.step)
        assert undiagnosed.choice is not None
        finding = explained(u.topic, program, exc, u.impl, u.step)
        assert shown_hint(finding, undiagnosed) == report.hint


def test_a_slip_spread_over_three_methods_is_placed_in_all_three() -> None:
    u = next(x for x in UNLISTED if x.name == "pins kept in a dict of its own")
    report, program = failing_report(u.topic, u.impl, u.step)
    finding = HOOKS[u.topic].explain(program, u.impl, u.step)
    assert set(finding.methods) == u.methods, report.text
    assert "(and needs `unpin` and `_next_victim` too)" in report.text


def test_a_slip_in_one_method_is_placed_in_that_one_alone() -> None:
    u = next(x for x in UNLISTED if x.name == "unpin returns the count it found")
    _, program = failing_report(u.topic, u.impl, u.step)
    assert HOOKS[u.topic].explain(program, u.impl, u.step).methods == ("unpin",)
