"""Executable models of the eviction policies, and the state machine that compares them.

Each model keeps *every* resident key in one plain list in arrival order, pinned keys included,
and finds a victim by scanning that list and skipping pinned keys. That is slow and obviously
right; the reference policies instead keep pinned keys out of their structures and put them back
on unpin. Agreement over random programs of put / hit / remove / pin / unpin / pop is what says
the fast structures implement the rules.

Rules (the models are their definition):

* FIFO: the earliest arrival goes first; hits change nothing.
* LRU / MRU: the least / most recently put-or-hit key goes first.
* LFU: the smallest count (1 on put, +1 per hit) goes first; among equal counts, the key that
  reached its count first goes first.
* GDSF: the smallest priority ``L + count × cost / size`` goes first (ties: earliest set);
  ``L`` becomes the victim's priority.
* SIEVE: a hand walks from old to new arrivals, clearing visited bits, and evicts the first
  unvisited key; it rests after that key and wraps past the newest.
* S3-FIFO: see :class:`servelab.weights.policies.S3FIFO`; the model uses plain lists.

Hits on pinned keys count (pinning never rewrites history).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from servelab.testing.aliasing import held_at, own_line
from servelab.testing.core import InvariantViolation, RecordingMachine
from servelab.testing.policy_models import (
    MODELS,
    FIFOModel,
    GDSFModel,
    LFUModel,
    LRUModel,
    MRUModel,
    PolicyModel,
    S3FIFOModel,
    SIEVEModel,
)
from servelab.weights.policies.interface import NoVictim

__all__ = [
    "INVARIANTS",
    "MODELS",
    "SIEVE_FIELDS",
    "FIFOModel",
    "GDSFModel",
    "LFUModel",
    "LRUModel",
    "MRUModel",
    "PolicyModel",
    "S3FIFOModel",
    "SIEVEModel",
    "policies_machine",
    "policy_machine",
]

Key = Hashable

#: Every rule the policy machine checks, by the id an :class:`InvariantViolation` carries
#: (prefixed with the policy's name, ``"LFU:candidate-count"``, when a machine drives several).
INVARIANTS: dict[str, str] = {
    "candidate-count": "len() counts unpinned keys",
    "order-matches-model": "eviction_order() matches the model",
    "order-is-a-copy": "eviction_order() returns a new list, not one the policy keeps",
    "victim-matches-model": "pop_victim() returns the model's victim, never a pinned key",
    "pinned-never-victim": "a pinned key is never the victim",
    "no-victim-when-all-pinned": "pop_victim() raises NoVictim when every key is pinned",
    "queue-matches-model": "queue holds the resident keys in arrival order",
    "visited-matches-model": "visited holds each resident key's bit, as the model's",
    "pinned-matches-model": "pinned holds the pinned keys, as the model's",
    "hand-matches-model": "hand is on the key the model's hand is on",
}
#: The SIEVE skeleton's attributes that the ``"fields"`` check compares, after ``queue``.
SIEVE_FIELDS = ("visited", "pinned", "hand")


KEYS = [f"m{i}" for i in range(6)]
SIZES = st.sampled_from([1, 2, 3, 5, 8])


OPS = frozenset({"put", "hit", "remove", "pin", "unpin", "pop"})
"""The events of the policy protocol; ``"hand"`` (pointing SIEVE's hand) is opt-in."""
CHECKS = frozenset({"len", "order"})
"""What the invariants compare by default; ``"fields"`` (SIEVE's own attributes) is opt-in."""


def policy_machine(
    make_policy: Callable[[], Any],
    make_model: Callable[[], PolicyModel],
    *,
    var: str = "p",
    constructor: str = "",
    ops: frozenset[str] = OPS,
    checks: frozenset[str] = CHECKS,
) -> type[RecordingMachine]:
    """A state machine driving ``make_policy()`` and ``make_model()`` through the same events.

    It follows the cache's side of the contract (``put`` only new keys, ``pin`` only unpinned
    ones …) and checks after every step that the candidates, their count and the next victim
    agree with the model. Recorded lines use ``var`` for the policy so a learner can paste them.
    ``ops`` and ``checks`` narrow the machine to what a half-built policy already has, so a
    course step can be checked before ``pop_victim`` or ``__len__`` exists.
    """
    built = constructor or f"{getattr(make_policy, '__name__', 'Policy')}()"
    return policies_machine({built: (make_policy, make_model)}, var=var, ops=ops, checks=checks)


def policies_machine(
    choices: Mapping[str, tuple[Callable[[], Any], Callable[[], PolicyModel]]],
    *,
    var: str = "p",
    ops: frozenset[str] = OPS,
    checks: frozenset[str] = CHECKS,
) -> type[RecordingMachine]:
    """One state machine over several policies: each program drives one of them, drawn first.

    ``choices`` maps the constructor line (``"LFU()"``) to the policy's factory and its model.
    With more than one choice, an invariant id names the policy (``"LFU:victim-matches-model"``)
    so that each policy's break keeps its own hint.

    ``ops`` are the events the programs use (:data:`OPS`, plus ``"hand"``: set SIEVE's
    ``hand`` attribute directly). ``checks`` are what the invariants compare: ``"len"``,
    ``"order"`` (``eviction_order()``), and ``"fields"``: SIEVE's ``queue``, ``visited``,
    ``pinned`` and ``hand`` attributes against the model's, for the steps that come before
    its sweep. A popped victim is always compared with the model's.
    """
    names = list(choices)
    tagged = len(names) > 1
    unknown = (ops - OPS - {"hand"}) | (checks - CHECKS - {"fields"})
    if unknown:
        raise ValueError(f"unknown machine ops or checks: {sorted(unknown)}")

    class PolicyMachine(RecordingMachine):
        def _resident(self) -> list[Key]:
            return list(self.model.keys)

        def _broke(self, invariant: str, detail: str) -> InvariantViolation:
            return InvariantViolation(f"{self.tag}:{invariant}" if tagged else invariant, detail)

        # Every other rule needs resident keys, and a policy's order only shows with several
        # of them, some already hit: a program starts from a few, whatever the seed.
        @initialize(
            which=st.sampled_from(names),
            fill=st.lists(st.tuples(SIZES, st.booleans()), max_size=len(KEYS)),
        )
        def fill(self, which: str, fill: list[tuple[int, bool]]) -> None:
            make_policy, make_model = choices[which]
            self.tag = which.split("(")[0]
            self.record(f"{var} = {which}")
            self.policy = make_policy()
            self.model = make_model()
            for key, (size, _) in zip(KEYS, fill, strict=False):
                self._put(key, size)
            for key, (_, hit) in zip(KEYS, fill, strict=False):
                if hit:
                    self._hit(key)

        @precondition(lambda self: "put" in ops and len(self.model.keys) < len(KEYS))
        @rule(data=st.data(), size=SIZES)
        def put(self, data: st.DataObject, size: int) -> None:
            key = data.draw(st.sampled_from([k for k in KEYS if k not in self.model.size]))
            self._put(key, size)

        def _put(self, key: Key, size: int) -> None:
            self.do(
                f"{var}.update_on_put({key!r}, {size})",
                lambda: self.policy.update_on_put(key, size),
            )
            self.model.put(key, size)

        @precondition(lambda self: "hit" in ops and bool(self.model.keys))
        @rule(data=st.data())
        def hit(self, data: st.DataObject) -> None:
            self._hit(data.draw(st.sampled_from(self._resident())))

        def _hit(self, key: Key) -> None:
            self.do(f"{var}.update_on_hit({key!r})", lambda: self.policy.update_on_hit(key))
            self.model.hit(key)

        @precondition(
            lambda self: "hit" in ops and bool(self.model.keys) and not hasattr(self.model, "hand")
        )
        @rule(data=st.data(), times=st.integers(min_value=2, max_value=5))
        def hit_often(self, data: st.DataObject, times: int) -> None:
            # A count only shows its size when a key is hit several times: a counter that
            # saturates, or one hit that is counted twice, changes the order after a few.
            key = data.draw(st.sampled_from(self._resident()))
            for _ in range(times):
                self._hit(key)

        @precondition(lambda self: "remove" in ops and bool(self.model.keys))
        @rule(data=st.data())
        def remove(self, data: st.DataObject) -> None:
            self._remove(data.draw(st.sampled_from(self._resident())))

        def _remove(self, key: Key) -> None:
            self.do(f"{var}.update_on_remove({key!r})", lambda: self.policy.update_on_remove(key))
            self.model.remove(key)

        @precondition(lambda self: "pin" in ops and len(self.model.pinned) < len(self.model.keys))
        @rule(data=st.data())
        def pin(self, data: st.DataObject) -> None:
            self._pin(data.draw(st.sampled_from(self.model.candidates())))

        def _pin(self, key: Key) -> None:
            self.do(f"{var}.update_on_pin({key!r})", lambda: self.policy.update_on_pin(key))
            self.model.pin(key)

        @precondition(
            lambda self: (
                {"pin", "hit", "unpin"} <= ops and len(self.model.pinned) < len(self.model.keys)
            )
        )
        @rule(data=st.data())
        def pin_hit_unpin(self, data: st.DataObject) -> None:
            # A key comes back from a pin with its whole history, a hit taken while pinned
            # included. Pins and unpins of one key around a hit rarely line up by chance.
            key = data.draw(st.sampled_from(self.model.candidates()))
            self._pin(key)
            self._hit(key)
            self._unpin(key)

        @precondition(
            lambda self: {"hit", "pin", "unpin", "pop"} <= ops and len(self.model.candidates()) > 1
        )
        @rule(data=st.data())
        def pinned_interlude(self, data: st.DataObject) -> None:
            # What happens to a key while it is pinned shows only once it is unpinned and due:
            # pin the next victim, let evictions pass it by and the next candidate catch up
            # with it (its own hits may come between), then unpin it and evict again. Events
            # drawn one by one rarely line up around one key like that.
            key = self.model.clone().victim()
            assert key is not None
            self._pin(key)
            events = st.sampled_from(("hit it", "catch up", "pop"))
            for event in data.draw(st.lists(events, min_size=1, max_size=4), label="events"):
                if event == "hit it":
                    self._hit(key)
                elif event == "pop":
                    self._pop_victim()
                else:
                    self._catch_up(key)
            self._unpin(key)
            self._pop_victim()

        def _catch_up(self, key: Key) -> None:
            """Hit the next candidate until ``key``, were it unpinned, would leave before it."""
            following = self.model.clone().victim()
            for _ in range(6):
                trial = self.model.clone()
                trial.unpin(key)
                order = trial.order()
                if following is None or order.index(key) < order.index(following):
                    return
                self._hit(following)

        @precondition(lambda self: "unpin" in ops and bool(self.model.pinned))
        @rule(data=st.data())
        def unpin(self, data: st.DataObject) -> None:
            self._unpin(data.draw(st.sampled_from(sorted(self.model.pinned, key=str))))

        def _unpin(self, key: Key) -> None:
            self.do(f"{var}.update_on_unpin({key!r})", lambda: self.policy.update_on_unpin(key))
            self.model.unpin(key)

        @precondition(lambda self: "pop" in ops)
        @rule()
        def pop_victim(self) -> None:
            self._pop_victim()

        @precondition(
            lambda self: (
                {"hit", "pop", "remove"} <= ops
                and hasattr(self.model, "hand")
                and len(self.model.candidates()) > 3
            )
        )
        @rule()
        def hit_pop_remove_under_hand(self) -> None:
            # The cache removing the very key a SIEVE hand rests on, right after an eviction,
            # is an edge a uniform choice of key rarely hits: the hand must move on to the
            # next newer key, not restart at the oldest. It shows only with an unvisited key
            # behind the hand, so the next victim is hit first and the sweep passes it.
            self._hit(self.model.clone().victim())
            self._pop_victim()
            hand: Key | None = getattr(self.model, "hand", None)
            if hand is not None:
                self._remove(hand)

        @precondition(
            lambda self: {"put", "remove", "pop"} <= ops and len(self.model.candidates()) > 1
        )
        @rule()
        def remove_put_again_pop(self) -> None:
            # A key removed and put again must start a new life: entries of its old one (a
            # lazy heap's stale ones) must not decide the next victim. The next victim is the
            # key whose old entries would come first.
            key = self.model.clone().victim()
            assert key is not None
            size = self.model.size[key]
            self._remove(key)
            self._put(key, size)
            self._pop_victim()

        @precondition(
            lambda self: (
                {"put", "pin", "unpin", "pop"} <= ops
                and len(self.model.keys) < len(KEYS)
                and bool(self.model.candidates())
            )
        )
        @rule(data=st.data())
        def unpin_keeps_place(self, data: st.DataObject) -> None:
            # An unpin is not a use: the key keeps its place among equal counts. That shows
            # only when the next victim ties with another key, which random programs reach on
            # some seeds only: a new key (count 1) ties with any victim of count 1; pin and
            # unpin that victim, then evict.
            key = data.draw(st.sampled_from([k for k in KEYS if k not in self.model.size]))
            self._put(key, 1)
            victim = self.model.clone().victim()
            if victim is not None and victim != key:
                self._pin(victim)
                self._unpin(victim)
            self._pop_victim()

        @precondition(
            lambda self: (
                {"hit", "pop"} <= ops
                and hasattr(self.model, "hand")
                and len(self.model.candidates()) > 2
            )
        )
        @rule()
        def full_lap(self) -> None:
            # A SIEVE sweep that finds every key visited clears them all in one lap and
            # evicts the key it started from, which is the oldest only by chance: so first
            # park the hand past the oldest key (spare it, evict the next), then visit all.
            self._hit(self.model.clone().victim())
            self._pop_victim()
            for key in self.model.candidates():
                self._hit(key)
            self._pop_victim()

        @precondition(
            lambda self: (
                {"hit", "pin", "unpin", "pop"} <= ops
                and hasattr(self.model, "hand")
                and len(self.model.candidates()) > 2
            )
        )
        @rule()
        def sweep_past_pinned_visited(self) -> None:
            # A pinned key is skipped by the sweep with its visited bit untouched: the bit
            # still counts once the key is unpinned. It shows only when the hand passes a
            # pinned, visited key and later comes back to it: visit and pin the next victim,
            # evict, unpin it, visit every other key, evict again.
            key = self.model.clone().victim()
            assert key is not None
            self._hit(key)
            self._pin(key)
            self._pop_victim()
            self._unpin(key)
            for other in self.model.candidates():
                if other != key:
                    self._hit(other)
            self._pop_victim()

        @precondition(lambda self: "hand" in ops and bool(self.model.keys))
        @rule(data=st.data())
        def point_hand(self, data: st.DataObject) -> None:
            # Before SIEVE's sweep exists, only a test can move its hand: the removal rules
            # are checked with the hand on any key, the newest one included.
            self._point_hand(data.draw(st.sampled_from(self._resident())))

        def _point_hand(self, key: Key) -> None:
            self.record(f"{var}.hand = {key!r}")
            self.policy.hand = key
            self.model.hand = key  # type: ignore[attr-defined]

        @precondition(
            lambda self: {"hand", "remove", "pin", "hit"} <= ops and len(self.model.keys) > 1
        )
        @rule(data=st.data(), state=st.sampled_from(("pinned", "visited", "as it is")))
        def remove_under_hand(self, data: st.DataObject, state: str) -> None:
            # When the cache removes the key under the hand, the hand moves on to the next
            # newer key whatever that key's state: pinned or visited, the sweep decides about
            # it later, not the removal. A hand pointed and a key removed apart rarely meet,
            # and the next key's state is then left to chance.
            keys = self.model.keys
            key = data.draw(st.sampled_from(keys[:-1]), label="hand")
            following = keys[keys.index(key) + 1]
            if state == "pinned" and following not in self.model.pinned:
                self._pin(following)
            elif state == "visited":
                self._hit(following)
            self._point_hand(key)
            self._remove(key)

        def _pop_victim(self) -> None:
            expected = self.model.clone().victim()
            if expected is None:
                try:
                    got = self.do(f"{var}.pop_victim()", self.policy.pop_victim)
                except NoVictim:
                    return
                except LookupError as exc:  # an IndexError from an empty heap is no answer
                    raise self._broke(
                        "no-victim-when-all-pinned",
                        f"every resident key is pinned (or none is resident): pop_victim() "
                        f"raised {type(exc).__name__}, expected NoVictim",
                    ) from None
                raise self._broke(
                    "no-victim-when-all-pinned",
                    f"every resident key is pinned (or none is resident), yet pop_victim() "
                    f"returned {got!r} instead of raising NoVictim",
                )
            got = self.do(f"{var}.pop_victim()", self.policy.pop_victim)
            if got in self.model.pinned:
                raise self._broke(
                    "pinned-never-victim",
                    f"pop_victim() returned {got!r}, which is pinned; the model evicts "
                    f"{expected!r}",
                )
            if got != expected:
                raise self._broke(
                    "victim-matches-model",
                    f"pop_victim() returned {got!r}; the model evicts {expected!r} "
                    f"(model order: {self.model.order()})",
                )
            self.model.victim()

        @invariant()
        def candidates_agree(self) -> None:
            if not hasattr(self, "policy"):
                return  # before the program's first call
            if "fields" in checks:
                self._fields_agree()
            if "len" in checks:
                self._count_agrees()
            if "order" in checks:
                self._order_agrees()

        def _fields_agree(self) -> None:
            model = self.model
            fields = (
                ("queue", list, model.keys, "keys oldest first, pinned ones included"),
                ("visited", dict, getattr(model, "visited", {}), "each key's bit"),
                ("pinned", set, model.pinned, "the pinned keys"),
                ("hand", lambda v: v, getattr(model, "hand", None), "the key the hand is on"),
            )
            for field, kind, wanted, meaning in fields:
                if not hasattr(self.policy, field):
                    raise self._broke(
                        f"{field}-matches-model",
                        f"{var} has no attribute {field!r}: keep the skeleton's attributes "
                        f"({meaning})",
                    )
                got = kind(getattr(self.policy, field))
                if got != wanted:
                    raise self._broke(
                        f"{field}-matches-model",
                        f"{var}.{field} is {got!r}; it should be {wanted!r} ({meaning})",
                    )

        def _count_agrees(self) -> None:
            count = self.policy.__len__()
            expected = len(self.model.candidates())
            if count != expected:
                raise self._broke(
                    "candidate-count",
                    f"len({var}) is {count}, but {expected} resident keys are unpinned "
                    f"(pinned: {sorted(self.model.pinned, key=str)})",
                )

        def _order_agrees(self) -> None:
            order = self.policy.eviction_order()
            own = held_at(self.policy, order)
            if own is not None:
                self.record(own_line(var, "eviction_order()", own))
                raise self._broke(
                    "order-is-a-copy",
                    f"{var}.eviction_order() returned the policy's own `{own}` "
                    f"{type(order).__name__} (the same object, not a copy): a caller that "
                    "changes the list it got changes the policy, and a list it got earlier "
                    "changes as the policy goes on",
                )
            wanted = self.model.order()
            if order != wanted:
                leaked = [k for k in order if k in self.model.pinned]
                if leaked:
                    raise self._broke(
                        "pinned-never-victim",
                        f"{var}.eviction_order() lists pinned keys {leaked}: {order}",
                    )
                raise self._broke(
                    "order-matches-model",
                    f"{var}.eviction_order() is {order}; the model says {wanted}",
                )

    PolicyMachine.__name__ = "".join(n.split("(")[0] for n in names) + "Machine"
    return PolicyMachine
