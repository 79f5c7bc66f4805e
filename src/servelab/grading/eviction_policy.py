"""Grader topic ``eviction-policy``: the learner's LFU (steps 1-2) and SIEVE (steps 3-4).

Notebook 02 builds each policy in two steps:

1. LFU counts and ties (``update_on_put/hit/remove``; ``eviction_order`` is given);
2. the LFU victim (``pop_victim`` over a lazy heap, ``__len__``) and pins
   (``update_on_pin/unpin``): a complete policy;
3. SIEVE's events (``update_on_put/hit/pin/unpin``, ``__len__``), read from the skeleton's
   ``queue``, ``visited`` and ``pinned`` attributes, since nothing can be evicted yet, and a
   removal with the hand moving on when its key leaves (``update_on_remove``; the grader points
   the ``hand`` attribute itself);
4. SIEVE's sweep (``pop_victim``): a complete policy, checked beside the LFU by one machine.

Steps that short (about five minutes each: the victim apart from pins, SIEVE's events apart from
its removals) were merged: each pair is one idea, and a grade cell costs a learner more than it
checks there.

Pass the classes as a mapping (``grade("eviction-policy", {"LFU": LFU, "SIEVE": SIEVE},
step=4)``), as a module or namespace with attributes ``LFU`` and ``SIEVE``, or one class alone
(its ``name`` says which it is — enough for steps 1-2). Steps are cumulative, as everywhere:
step 4 grades the LFU again. From the command line, name a dict in the learner's file:
``python -m servelab grade eviction-policy --impl mine.py:Policies --step 4`` with
``Policies = {"LFU": LFU, "SIEVE": SIEVE}``.

Probes name the known mistakes (an LFU whose ties are not first-in-first-out, a SIEVE hand that
does not wrap or does not clear the visited bit, a hand that goes back to the oldest key,
candidates that ignore pins); the state machine of each step then compares the class with the
executable model in :mod:`servelab.testing.policies` over random programs restricted to the
methods written so far.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from servelab.grading.about import RESULT, About, Hint
from servelab.grading.observe import (
    Canon,
    frozen,
    policy_hidden_fields,
    policy_history,
    policy_skeleton_fields,
)
from servelab.grading.policy_probes import (
    CLASSES,
    _lfu_counts,
    _lfu_counts_grow,
    _lfu_order_by_count,
    _lfu_order_counts_grow,
    _lfu_order_ties_fifo,
    _lfu_pin_keeps_heap_order,
    _lfu_pinned_history,
    _lfu_pinned_hit_ticks,
    _lfu_remove_forgets,
    _lfu_stale_entries,
    _lfu_ties_fifo,
    _lfu_unpin_keeps_place,
    _nothing_to_evict,
    _pins_leave_the_candidates,
    _sieve_basic,
    _sieve_born_unvisited,
    _sieve_clears_bits,
    _sieve_hand_moves_on,
    _sieve_hand_off_the_end,
    _sieve_hand_on_key_zero,
    _sieve_hand_stays,
    _sieve_hand_stays_on_others,
    _sieve_hit_sets_bit,
    _sieve_pin_keeps_history,
    _sieve_pins_counted,
    _sieve_remove_forgets,
    _sieve_remove_under_hand,
    _sieve_wraps,
    misfit,
    no_victim_hang,
    pinned_passed_hang,
    policy_class,
    policy_namespace,
)
from servelab.grading.policy_probes_heap import (
    FRESH_ENTRY,
    PAIR_ORDER,
    UNPIN_PUSH,
    lfu_fresh_entries,
    lfu_fresh_entries_past_many_ticks,
    lfu_order_past_many_ticks,
    lfu_ties_past_many_ticks,
    lfu_unpinned_key_found,
)
from servelab.grading.readings.eviction_policy import eviction_policy_reading
from servelab.grading.readings.eviction_policy_ticks import tick_went_back
from servelab.grading.replay import TopicReplay, plain, program
from servelab.grading.topic import MachineCheck, Probe, Step, Topic
from servelab.testing.core import RecordingMachine
from servelab.testing.policies import (
    INVARIANTS,
    OPS,
    SIEVE_FIELDS,
    LFUModel,
    SIEVEModel,
    policies_machine,
    policy_machine,
)

__all__ = ["TOPIC", "policy_class"]

HINTS = {
    "counts": Hint(
        "LFU evicts the key with the smallest count: 1 on update_on_put, +1 on every "
        "update_on_hit (hits on pinned keys count too).",
        About(("LFU.update_on_put", "LFU.update_on_hit"), ("counts", "eviction order")),
    ),
    "tie": Hint(
        "LFU tie-break (`eviction_order`, `pop_victim`): among keys with the same count, the "
        "one that reached that count first leaves first (first in, first out) — not the "
        "newest, and not an arbitrary one.",
        About(("LFU.eviction_order", "LFU.pop_victim"), ("eviction order",)),
    ).before(
        2,
        "LFU tie-break (`eviction_order`): among keys with the same count, the one that "
        "reached that count first leaves first (first in, first out) — not the newest, and "
        "not an arbitrary one.",
    ),
    "pins": Hint(
        "a pinned key is not a candidate: from update_on_pin until update_on_unpin it is never "
        "a victim, and len() counts only the resident keys that are not pinned.",
        # about the candidates (len, a victim returned), not the record of pins: a remove
        # that leaves a pin behind is another rule. A pop_victim that raised an error of
        # its own (an IndexError in the sweep) returned no victim: nothing here speaks of it
        About(("update_on_pin", "update_on_unpin", "__len__"), ("len", RESULT))
        | About(("pop_victim",), ("len", "eviction order")),
    ),
    "no-victim": Hint(
        "pop_victim raises the notebook's NoVictim exactly when no resident key is a candidate "
        "(every one pinned, or none left): then no other error, and no key or None returned.",
        About(("pop_victim",)),
    ),
    "visited": Hint(
        "SIEVE's hand (`pop_victim`) must clear the visited bit of each visited key it passes; "
        "a key keeps its bit only until the hand reaches it, or hits would protect it forever.",
        About(("SIEVE.pop_victim",), ("visited",)),
    ),
    "wrap": Hint(
        "SIEVE's hand (`pop_victim`) must wrap: past the newest key it continues at the oldest "
        "one (and after evicting the newest key, the next sweep starts at the oldest).",
        About(("SIEVE.pop_victim",), ("hand",)),
    ),
    "hand": Hint(
        "SIEVE's hand (`pop_victim`) stays where it stopped: the next sweep starts just after "
        "the last victim, wrapping past the newest key only.",
        About(("SIEVE.pop_victim",), ("hand",)),
    ),
    "hand-none": Hint(
        "SIEVE's hand is None only when it points at no key: test `self.hand is None`, not "
        "the hand's truth, or a key that reads false (0, '') sends the sweep back to the oldest",
        About(("SIEVE.pop_victim", "SIEVE.update_on_remove"), ("hand",)),
    ),
    "capped": Hint(
        "an LFU count is not capped: every update_on_hit adds 1, however many came before (a "
        "count that saturates makes the hottest keys tie with lukewarm ones)",
        About(("LFU.update_on_hit",), ("counts",)),
    ),
    "unpin-place": Hint(
        "update_on_unpin is not a use: the key returns with its count and the time it reached "
        "it, so among equal counts it keeps its place (do not refresh its tick on unpin)",
        About(("LFU.update_on_unpin",), ("eviction order",)),
    ),
    "history": Hint(
        "a pinned key keeps its history: on update_on_unpin it returns where its history "
        "(count, arrival, visited bit) puts it, not at the back, and hits while pinned count.",
        # a pinned key's history: nothing of a call made while no key was pinned
        About(
            ("update_on_pin", "update_on_unpin", "update_on_hit"), ("eviction order",), ("pinned",)
        ),
    ),
    "pinned-tick": Hint(
        "a hit while pinned is a use like any other: it advances the clock and the key "
        "reaches its new count at that new tick (only the heap push waits for "
        "update_on_unpin); equal counts then leave in the order their keys reached them.",
        About(("LFU.update_on_hit", "LFU.update_on_unpin"), ("eviction order",), ("pinned",)),
    ),
    "remove": Hint(
        "when the cache removes the key under SIEVE's hand (update_on_remove), the hand moves "
        "on to the next newer key, exactly as after an eviction — it does not restart.",
        About(("SIEVE.update_on_remove",), ("hand",)),
    ),
    "forget": Hint(
        "update_on_remove forgets the key everywhere: LFU's count and tick, or SIEVE's place in "
        "queue, its visited bit and its pin; a key put again starts afresh",
        About(("update_on_remove",), ("counts", "visited", "pinned", "eviction order")),
    ),
    "stale": Hint(
        "pop_victim must skip stale heap entries: an entry is current only while it equals the "
        "key's (count, reached) now and the key is still resident; every hit leaves an older "
        "entry behind",
        About(("LFU.pop_victim", "LFU.eviction_order")),
    ),
    "len": Hint(
        "len() counts the candidates: resident keys that are not pinned",
        About(("__len__",), ("len",)),
    ),
    "born": Hint(
        "update_on_put appends the key at the newest end of queue with its visited bit clear: "
        "new entries are born unvisited and earn the bit with a hit",
        About(("SIEVE.update_on_put",), ("visited", "eviction order")),
    ),
    "hit-bit": Hint(
        "SIEVE sets the visited bit on a hit (visited[key] = True) and moves nothing: queue "
        "stays in arrival order",
        About(("SIEVE.update_on_hit",), ("visited", "eviction order")),
    ),
    "hand-elsewhere": Hint(
        "update_on_remove moves SIEVE's hand only when the hand is on the removed key; "
        "removing any other key leaves the hand where it is",
        About(("SIEVE.update_on_remove",), ("hand",)),
    ),
}


# --------------------------------------------------------------------------- state machines


def _machine(
    name: str,
    model: Callable[[], Any],
    ops: frozenset[str] = OPS,
    checks: frozenset[str] = frozenset({"len", "order"}),
) -> Callable[[Any], type[RecordingMachine]]:
    def build(impl: Any) -> type[RecordingMachine]:
        return policy_machine(
            policy_class(impl, name), model, constructor=f"{name}()", ops=ops, checks=checks
        )

    return build


_MACHINE_HINTS = {
    "pinned-never-victim": HINTS["pins"],
    "candidate-count": HINTS["pins"],
    "no-victim-when-all-pinned": HINTS["no-victim"],
    "order-is-a-copy": Hint(
        "eviction_order returns a new list on every call (`list(...)`, `sorted(...)`), never "
        "a list the policy keeps and changes later.",
        About(("eviction_order",)),
    ),
}


def _model_rule(text: str, *hints: Hint) -> Hint:
    """The rule a machine enforces, stated whole, about what each of ``hints`` is about: a
    wrong order has many causes, and a list of some of them (a tie-break, a pin's history)
    points at code that is right whenever another one is the slip."""
    about = hints[0].about
    for hint in hints[1:]:
        about = about | hint.about
    return Hint(text, about)


_LFU_ORDER = _model_rule(
    "each victim and each eviction order is the model LFU's: the least count first (1 on "
    "update_on_put, +1 per update_on_hit), among equal counts the key that reached its count "
    "first, a pinned key left out until update_on_unpin and back with its count and tick.",
    HINTS["counts"],
    HINTS["tie"],
    HINTS["history"],
)
_SIEVE_ORDER = _model_rule(
    "each victim and each eviction order is the model SIEVE's: the hand sweeps from where it "
    "stopped towards newer keys, wrapping past the newest, clears each visited bit it passes "
    "and evicts the first unvisited key that is not pinned; a pinned key keeps its bit and "
    "its place.",
    HINTS["hand"],
    HINTS["history"],
)


def _machine_hints(wrong_order: Hint) -> dict[str, Hint]:
    """Pins and empty-victim breaks have their own hint; a wrong order gets the model's rule."""
    return {
        **_MACHINE_HINTS,
        "victim-matches-model": wrong_order,
        "order-matches-model": wrong_order,
    }


_LFU_HINTS = _machine_hints(_LFU_ORDER)
_SIEVE_HINTS = _machine_hints(_SIEVE_ORDER)
_NO_PINS = frozenset({"put", "hit", "remove"})
_SIEVE_EVENTS = frozenset({"put", "hit", "pin", "unpin"})
_FIELDS = frozenset({"fields", "len"})


def _both_machines(impl: Any) -> type[RecordingMachine]:
    """The final step checks every policy built so far: one machine, a policy per program."""
    return policies_machine(
        {
            "LFU()": (policy_class(impl, "LFU"), LFUModel),
            "SIEVE()": (policy_class(impl, "SIEVE"), SIEVEModel),
        }
    )


_INVARIANTS = tuple(
    INVARIANTS[rule] for rule in ("candidate-count", "order-matches-model", "victim-matches-model")
)
_FIELD_INVARIANTS = (
    INVARIANTS["queue-matches-model"],
    f"{', '.join(SIEVE_FIELDS[:-1])} and {SIEVE_FIELDS[-1]} match the model",
    INVARIANTS["candidate-count"],
)

# ----------------------------------------------------------------- replay and diagnosis


def _policy_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    """Everything observable: the order and what the skeleton keeps (a SIEVE's hand, visited
    bits and pins), so a removal that moves the hand wrongly differs where it happens."""
    p = ns.get("p")
    return None if p is None else frozen(policy_skeleton_fields(p))


def _puts(var: str, *keys: str) -> list[str]:
    return [f"{var}.update_on_put({k!r}, 1)" for k in keys]


SEPARATING = (
    program(
        "p = LFU()",
        *_puts("p", "a", "b", "c", "d"),
        *["p.update_on_hit('a')"] * 5,
        *["p.update_on_hit('b')"] * 4,
        "p.update_on_pin('c')",
        "p.update_on_hit('c')",
        "p.update_on_unpin('c')",
        "p.eviction_order()",
    ),
    program(
        "p = LFU()",
        *_puts("p", "a", "c"),
        "p.update_on_hit('a')",
        "p.update_on_hit('c')",
        "p.update_on_pin('a')",
        "p.update_on_unpin('a')",
        "p.eviction_order()",
    ),
    program(
        "p = LFU()",
        *_puts("p", "a", "b", "c"),
        "p.update_on_pin('a')",
        "p.update_on_unpin('a')",
        "p.update_on_hit('c')",
        "p.update_on_hit('b')",
        "p.eviction_order()",
        "p.pop_victim()",
    ),
    program(  # a key removed and put again while its old heap entry remains
        "p = LFU()",
        *_puts("p", "a", "b", "c"),
        "p.update_on_remove('a')",
        "p.update_on_put('a', 1)",
        "p.pop_victim()",
        "p.eviction_order()",
    ),
    program(  # a key's heap entry popped while it is pinned; then it is unpinned
        "p = LFU()",
        *_puts("p", "a", "b"),
        "p.update_on_pin('a')",
        "p.pop_victim()",
        "p.update_on_unpin('a')",
        "p.pop_victim()",
    ),
    program(  # a key put while the hand rests mid-queue
        "p = SIEVE()",
        *_puts("p", "a", "b", "c", "d"),
        "p.update_on_hit('a')",
        "p.pop_victim()",
        "p.update_on_put('e', 1)",
        "p.eviction_order()",
    ),
    program(  # a full lap: every key visited, the hand past the oldest
        "p = SIEVE()",
        *_puts("p", "a", "b", "c", "d"),
        "p.update_on_hit('a')",
        "p.pop_victim()",
        *[f"p.update_on_hit({k!r})" for k in "acd"],
        "p.pop_victim()",
        "p.eviction_order()",
    ),
    program(  # a pinned key removed, then put again
        "p = LFU()",
        *_puts("p", "a", "b"),
        "p.update_on_pin('a')",
        "p.update_on_remove('a')",
        "p.update_on_put('a', 1)",
        "p.eviction_order()",
    ),
    program(
        "p = SIEVE()",
        *_puts("p", "a", "b", "c", "d"),
        "p.update_on_hit('b')",
        "p.pop_victim()",
        "p.update_on_put('e', 1)",
        "p.update_on_hit('c')",
        "p.update_on_pin('d')",
        "p.pop_victim()",
        "p.update_on_unpin('d')",
        "p.pop_victim()",
        "p.eviction_order()",
    ),
    program(
        "p = SIEVE()",
        *_puts("p", "a", "b", "c", "d"),
        "p.update_on_hit('a')",
        "p.pop_victim()",
        "p.update_on_remove('c')",
        "p.update_on_pin('a')",
        "p.update_on_hit('a')",
        "p.update_on_unpin('a')",
        "p.pop_victim()",
        "p.eviction_order()",
    ),
)


REPLAY = TopicReplay(
    "policy",
    policy_namespace,
    _policy_state,
    lambda v, c: plain(v),
    ("NoVictim", "LookupError"),
    SEPARATING,
    subject="p",
    classes=CLASSES,
    fields=policy_skeleton_fields,
    detail=policy_history,
    hidden_fields=policy_hidden_fields,
    hidden_reader=tick_went_back,
    reader=eviction_policy_reading,
)
"""How diagnosis replays this topic's programs (:mod:`servelab.grading.diagnose`)."""


TOPIC = Topic(
    replay=REPLAY,
    checkpoint="eviction_policy",
    misfit=misfit,
    name="eviction-policy",
    title="Eviction policies behind one interface",
    steps=[
        Step(
            1,
            "LFU: counts, and ties first in, first out",
            probes=[
                Probe("the least used key comes first", HINTS["counts"], _lfu_order_by_count),
                Probe("counts keep growing", HINTS["capped"], _lfu_order_counts_grow),
                Probe("ties leave first in, first out", HINTS["tie"], _lfu_order_ties_fifo),
                Probe("a removed key is forgotten", HINTS["forget"], _lfu_remove_forgets),
                Probe("each put and hit leaves a fresh heap entry", FRESH_ENTRY, lfu_fresh_entries),
                Probe("the count decides past many ticks", PAIR_ORDER, lfu_order_past_many_ticks),
                Probe(
                    "the tick decides equal counts past many ticks",
                    PAIR_ORDER,
                    lfu_ties_past_many_ticks,
                ),
                Probe(
                    "each put and hit leaves a fresh heap entry past many ticks",
                    FRESH_ENTRY,
                    lfu_fresh_entries_past_many_ticks,
                ),
            ],
            machine=MachineCheck(
                "LFU's order against the model (put, hit, remove)",
                _machine("LFU", LFUModel, _NO_PINS, frozenset({"order"})),
                (_INVARIANTS[1],),
                hints={
                    "order-matches-model": _model_rule(
                        "the eviction order is the model LFU's: the least count first (1 on "
                        "update_on_put, +1 per update_on_hit), among equal counts the key that "
                        "reached its count first.",
                        HINTS["counts"],
                        HINTS["tie"],
                    )
                },
                max_examples=40,
                step_count=25,
            ),
        ),
        Step(
            2,
            "LFU: the victim from a heap with stale entries, and pins",
            probes=[
                Probe("the least used key leaves first", HINTS["counts"], _lfu_counts),
                Probe("stale heap entries are skipped", HINTS["stale"], _lfu_stale_entries),
                Probe("counts keep growing", HINTS["capped"], _lfu_counts_grow),
                Probe("ties leave first in, first out", HINTS["tie"], _lfu_ties_fifo),
                Probe("an unpin keeps a key's place", HINTS["unpin-place"], _lfu_unpin_keeps_place),
                Probe("an unpinned key is found again", UNPIN_PUSH, lfu_unpinned_key_found),
                Probe(
                    "pinned keys are not candidates",
                    HINTS["pins"],
                    _pins_leave_the_candidates("LFU", ["a", "c"]),
                    hang_hint=pinned_passed_hang("LFU"),
                ),
                Probe(
                    "nothing to evict raises",
                    HINTS["no-victim"],
                    _nothing_to_evict("LFU"),
                    hang_hint=no_victim_hang,
                ),
                Probe("pinning keeps the history", HINTS["history"], _lfu_pinned_history),
                Probe("a pin keeps the heap in order", HINTS["pins"], _lfu_pin_keeps_heap_order),
                Probe(
                    "a hit while pinned takes its own tick",
                    HINTS["pinned-tick"],
                    _lfu_pinned_hit_ticks,
                ),
            ],
            machine=MachineCheck(
                "LFU against the model",
                _machine("LFU", LFUModel),
                _INVARIANTS,
                hints=_LFU_HINTS,
                max_examples=80,
                step_count=30,
            ),
        ),
        Step(
            3,
            "SIEVE: a queue, a visited bit, pins, and removals",
            probes=[
                Probe("a new key arrives unvisited", HINTS["born"], _sieve_born_unvisited),
                Probe(
                    "a hit sets the bit and moves nothing", HINTS["hit-bit"], _sieve_hit_sets_bit
                ),
                Probe("pinned keys are not candidates", HINTS["pins"], _sieve_pins_counted),
                Probe("a pin keeps the key's bit", HINTS["history"], _sieve_pin_keeps_history),
                Probe("a removed key is forgotten", HINTS["forget"], _sieve_remove_forgets),
                Probe("the hand moves on past its key", HINTS["remove"], _sieve_hand_moves_on),
                Probe("past the newest, no key", HINTS["wrap"], _sieve_hand_off_the_end),
                Probe(
                    "other removals leave the hand",
                    HINTS["hand-elsewhere"],
                    _sieve_hand_stays_on_others,
                ),
            ],
            machine=MachineCheck(
                "SIEVE's fields against the model (with removals)",
                _machine("SIEVE", SIEVEModel, _SIEVE_EVENTS | {"remove", "hand"}, _FIELDS),
                _FIELD_INVARIANTS,
                hints={
                    "queue-matches-model": HINTS["forget"],
                    "visited-matches-model": HINTS["forget"],
                    "pinned-matches-model": _model_rule(
                        "`pinned` holds exactly the resident keys pinned and not unpinned "
                        "since: update_on_pin adds its key, update_on_unpin and "
                        "update_on_remove take it out.",
                        HINTS["forget"],
                        HINTS["pins"],
                    ),
                    "hand-matches-model": _model_rule(
                        "the hand moves only when the cache removes the key under it: on to "
                        "the next newer key, or to None (the oldest next) past the newest.",
                        HINTS["remove"],
                        HINTS["wrap"],
                        HINTS["hand-elsewhere"],
                    ),
                    "candidate-count": _model_rule(
                        "len() counts the resident keys that are not pinned: a key removed, "
                        "or pinned and not yet unpinned, is not one.",
                        HINTS["forget"],
                        HINTS["pins"],
                    ),
                },
                max_examples=50,
                step_count=25,
                in_final_grade=True,  # the last machine compares order and victims, not fields
            ),
        ),
        Step(
            4,
            "SIEVE: the sweep",
            probes=[
                Probe("a hit protects a key once", HINTS["visited"], _sieve_basic),
                Probe("the hand clears visited bits", HINTS["visited"], _sieve_clears_bits),
                Probe("the hand wraps to the oldest key", HINTS["wrap"], _sieve_wraps),
                Probe("the hand stays where it stopped", HINTS["hand"], _sieve_hand_stays),
                Probe("a removal under the hand", HINTS["remove"], _sieve_remove_under_hand),
                Probe("a hand on key 0", HINTS["hand-none"], _sieve_hand_on_key_zero),
                Probe(
                    "pinned keys are not candidates",
                    HINTS["pins"],
                    _pins_leave_the_candidates("SIEVE", ["c", "a"]),
                    hang_hint=pinned_passed_hang("SIEVE"),
                ),
                Probe(
                    "nothing to evict raises",
                    HINTS["no-victim"],
                    _nothing_to_evict("SIEVE"),
                    hang_hint=no_victim_hang,
                ),
            ],
            machine=MachineCheck(
                "LFU and SIEVE against their models",
                _both_machines,
                _INVARIANTS,
                hints={
                    **{f"LFU:{k}": v for k, v in _LFU_HINTS.items()},
                    **{f"SIEVE:{k}": v for k, v in _SIEVE_HINTS.items()},
                },
                max_examples=160,
                step_count=30,
            ),
        ),
    ],
)
