"""The probes of topic ``eviction-policy``: LFU's and SIEVE's known mistakes, each a short
program run through :class:`~servelab.grading._script.Script` on the learner's own class.

:mod:`servelab.grading.eviction_policy` lists them in its steps, beside the state machines.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Mapping
from typing import Any

from servelab.grading._script import Script, own_names
from servelab.grading.observe import changes, policy_hidden_fields
from servelab.grading.topic import ProbeFailed
from servelab.weights.policies.interface import NoVictim

CLASSES = ("LFU", "SIEVE")
"""The names the topic's programs give the two policies."""


def policy_class(impl: Any, name: str) -> Callable[[], Any]:
    """The learner's class called ``name`` ("LFU" or "SIEVE") out of whatever was passed."""
    if isinstance(impl, Mapping):
        found = impl.get(name)
    elif isinstance(impl, type):
        found = impl if getattr(impl, "name", impl.__name__) == name else None
    else:
        found = getattr(impl, name, None)
    if found is None:
        raise ProbeFailed(
            f"this step grades a {name} class, and none was given: pass "
            f'{{"LFU": LFU, "SIEVE": SIEVE}} (or a class whose name = "{name}")'
        )
    return found  # type: ignore[no-any-return]


#: The classes each step's grade cell passes in the notebook.
_NOTEBOOK = {1: "LFUCounts", 2: "LFU", 3: '{"LFU": LFU, "SIEVE": SIEVERemovals}'}
_NOTEBOOK[4] = '{"LFU": LFU, "SIEVE": SIEVE}'


def _has(impl: Any, name: str) -> bool:
    try:
        policy_class(impl, name)
    except ProbeFailed:
        return False
    return True


def misfit(impl: Any, step: int) -> tuple[str, str] | None:
    """What a grade cell passed where the step's classes cannot be found in it: said before
    any check runs (each step grades every class written so far, so from step 3 on both), with
    the notebook's own grade cell as the way to pass them."""
    wanted = CLASSES if step >= 3 else CLASSES[:1]
    missing = [name for name in wanted if not _has(impl, name)]
    if not missing:
        return None
    absent = " and ".join(repr(name) for name in missing)
    passed = f"a {type(impl).__name__} without {absent}"
    if isinstance(impl, type):
        alone = " alone" if len(wanted) > 1 else f", whose name is not {absent}"
        passed = f"the class `{impl.__name__}`{alone}"
    classes = " and ".join(wanted)
    return (
        f"step {step} grades {'both classes, ' if len(wanted) > 1 else 'the class '}{classes}; "
        f"this grade cell passed {passed}",
        f"pass {'them' if len(wanted) > 1 else 'it'} as the notebook's grade cell does: "
        f'grade("eviction-policy", {_NOTEBOOK.get(step, _NOTEBOOK[4])}, step={step})',
    )


class PolicyScript(Script):
    """A :class:`Script` on one fresh policy, with the events the probes send as verbs."""

    def __init__(self, impl: Any, name: str) -> None:
        names = {name: own_names(policy_namespace(impl), CLASSES, "p").get(name, name)}
        super().__init__({name: policy_class(impl, name)}, names)
        self(f"p = {name}()")

    @property
    def policy(self) -> Any:
        return self.ns["p"]

    def put(self, *keys: str, size: int = 1) -> None:
        for key in keys:
            self(f"p.update_on_put({key!r}, {size})")

    def hit(self, *keys: str) -> None:
        for key in keys:
            self(f"p.update_on_hit({key!r})")

    def pin(self, key: str) -> None:
        self(f"p.update_on_pin({key!r})")

    def unpin(self, key: str) -> None:
        self(f"p.update_on_unpin({key!r})")

    def expect_victim(self, want: str, why: str) -> None:
        got = self("p.pop_victim()")
        if got != want:
            raise self.fail(f"pop_victim() returned {got!r}, expected {want!r}: {why}")
        self.lines[-1] += f"  # {want!r}"

    def expect_order(self, want: list[str], why: str) -> None:
        got = list(self.policy.eviction_order())
        if got != want:
            self.note(f"p.eviction_order()  # {got}")
            raise self.fail(f"eviction_order() is {got}, expected {want}: {why}")

    def expect_len(self, want: int, why: str) -> None:
        got = len(self.policy)
        if got != want:
            self.note(f"len(p)  # {got}")
            raise self.fail(f"len(p) is {got}, expected {want}: {why}")

    def remove(self, key: str) -> None:
        self(f"p.update_on_remove({key!r})")

    def point_hand(self, key: str | None) -> None:
        """Set SIEVE's ``hand`` as only the sweep would (it is not written yet)."""
        self(f"p.hand = {key!r}")

    def expect_field(self, field: str, want: Any, why: str) -> None:
        """Compare one of the skeleton's attributes (``queue``, ``visited`` …) with ``want``."""
        if not hasattr(self.policy, field):
            raise self.fail(f"the policy has no attribute {field!r}: keep the skeleton's __init__")
        got = getattr(self.policy, field)
        if isinstance(want, (list, dict, set)):
            got = type(want)(got)  # a deque or an OrderedDict holds the same state
        if got != want:
            self.note(f"p.{field}  # {got!r}")
            raise self.fail(f"p.{field} is {got!r}, expected {want!r}: {why}")

    def expect_no_victim(self, why: str = "every key is pinned") -> None:
        """``pop_victim`` raises the notebook's ``NoVictim``: a caller (the weight cache) tells
        "nothing to evict" from a bug by that class, so another ``LookupError`` (an
        ``IndexError`` from an empty heap, a ``KeyError``) is not the same answer."""
        before = policy_hidden_fields(self.policy)
        try:
            got = self("p.pop_victim()")
        except NoVictim:
            after = policy_hidden_fields(self.policy)
            if after != before:
                raise self.fail(
                    f"pop_victim() raised NoVictim as it should, but changed the policy first "
                    f"({changes(before, after)}): a refusal changes nothing, so the policy "
                    "is as it was when a key is unpinned later"
                ) from None
            return
        except LookupError as exc:
            self.lines[-1] += f"  # raised {type(exc).__name__}"
            raise self.fail(
                f"pop_victim() raised {type(exc).__name__}; expected NoVictim ({why}): raise "
                "the notebook's NoVictim yourself when no candidate is left"
            ) from None
        raise self.fail(f"pop_victim() returned {got!r} although {why}")


# --------------------------------------------------------------------------- shared probes


def _pins_leave_the_candidates(name: str, after_unpin: list[str]) -> Callable[[Any], None]:
    def run(impl: Any) -> None:
        s = PolicyScript(impl, name)
        s.put("a", "b", "c")
        s.hit("b", "c")
        s.pin("a")  # the natural victim in both policies
        s.expect_len(2, "a pinned key is not a candidate")
        if name == "LFU":
            expect_victim_in_order(s, "b", "the pinned key 'a' may not be evicted")
        else:
            s.expect_victim("b", "the pinned key 'a' may not be evicted")
        s.unpin("a")
        s.expect_len(2, "after update_on_unpin the key is a candidate again")
        s.expect_order(after_unpin, "'a' is a candidate again, where its history puts it")

    return run


def _nothing_to_evict(name: str) -> Callable[[Any], None]:
    def run(impl: Any) -> None:
        s = PolicyScript(impl, name)
        s.put("a", "b")
        s.pin("a")
        s.pin("b")
        s.expect_len(0, "both keys are pinned")
        s.expect_no_victim()

    return run


def _last_line_pops(code: str) -> bool:
    lines = [line.strip() for line in code.splitlines() if line.strip()]
    return bool(lines) and lines[-1] == "p.pop_victim()"


def no_victim_hang(code: str) -> str:
    """The hang of :func:`_nothing_to_evict`'s pop: every key pinned, so there is no victim."""
    if not _last_line_pops(code):
        return ""
    return (
        "yours never returned from pop_victim() with every key pinned ('a' and 'b'): with no "
        "candidate there is no victim to look for, so raise NoVictim before looking (len() "
        "is 0 here)"
    )


def pinned_passed_hang(name: str) -> Callable[[str], str]:
    """The hang of :func:`_pins_leave_the_candidates`'s pop: the least used (or the oldest
    unvisited) key 'a' pinned, 'b' and 'c' candidates."""
    how = (
        "an LFU loop that pushes a pinned key's entry back onto the heap pops that same "
        "entry again at once: leave it off (update_on_unpin pushes it again)"
        if name == "LFU"
        else "the sweep steps past a pinned key (no bit cleared, nothing evicted) to the next"
    )

    def hint(code: str) -> str:
        if not _last_line_pops(code):
            return ""
        return (
            "yours never returned from pop_victim() with 'a' pinned and 'b', 'c' candidates "
            f"(the reference evicts 'b'): a pinned key is passed over, not waited on; {how}"
        )

    return hint


# --------------------------------------------------------------------------- LFU probes
# Step 1 reads the order through the given eviction_order() (a sort by count, then tick).


def _lfu_order_by_count(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a", "b", "c")
    s.hit("a", "a", "c")
    s.expect_order(["b", "c", "a"], "in the reference 'b' has count 1 (never hit), 'c' 2, 'a' 3")


def _lfu_order_counts_grow(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a", "b")
    s.hit(*["b"] * 5)
    s.hit(*["a"] * 4)
    s.expect_order(
        ["a", "b"], "in the reference 'a' has count 5, 'b' 6: counts keep growing, uncapped"
    )


def _lfu_order_ties_fifo(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a", "b", "c", "d")
    s.hit("d", "b")  # b and d reach count 2, d first
    s.expect_order(
        ["a", "c", "d", "b"],
        (
            "in the reference a and c (count 1) first, in arrival order; then d, which "
            "reached count 2 before b"
        ),
    )


def _lfu_remove_forgets(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a", "b")
    s.hit("a", "a", "b")
    s.remove("a")
    s.expect_order(["b"], "'a' was removed")
    s.put("a")
    s.expect_order(
        ["a", "b"],
        "'a' was put again: in the reference it starts afresh at count 1, below 'b''s 2 "
        "(its 3 uses before the removal are forgotten)",
    )


# Step 2: the victim.


def _lfu_counts(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a", "b", "c")
    s.hit("a", "a", "c")
    s.expect_len(3, "three keys, none pinned")
    s.expect_victim("b", "in the reference 'b' has count 1 (never hit), 'c' 2, 'a' 3")
    s.expect_victim("c", "in the reference 'c' has count 2, 'a' 3")
    s.expect_len(1, "two of the three keys were evicted")


def _lfu_stale_entries(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a", "b", "c")
    s.hit("a")
    s.remove("c")
    s.expect_victim(
        "b", "'a' was hit (in the reference count 2): its first heap entry (1, …) is stale"
    )
    s.expect_victim("a", "the last resident key")
    s.put("c")
    s.expect_victim("c", "'c' was removed and put again; 'a' was evicted")


def _out_of_heap_order(heap: Any) -> bool:
    """True where ``heap`` is a list some entry of which is smaller than its parent."""
    if not isinstance(heap, list):
        return False
    try:
        return any(heap[i] < heap[(i - 1) // 2] for i in range(1, len(heap)))
    except TypeError:
        return False


def heap_order_broken(policy: Any, want: str) -> bool:
    """Proof that a wrong victim comes of ``heap`` out of heap order: the list is out of order
    before the pop, and a copy of yours with it put back in order (heapq.heapify) pops
    ``want``."""
    try:
        twin = copy.deepcopy(policy)
        if not _out_of_heap_order(getattr(twin, "heap", None)):
            return False
        heapq.heapify(twin.heap)
        return bool(twin.pop_victim() == want)
    except Exception:
        return False


def expect_victim_in_order(s: PolicyScript, want: str, why: str) -> None:
    """``s.expect_victim``, whose failure names a heap left out of order where that is
    proven (:func:`heap_order_broken`)."""
    broken = heap_order_broken(s.policy, want)
    try:
        s.expect_victim(want, why)
    except ProbeFailed as failed:
        if not broken:
            raise
        raise ProbeFailed(failed.message, failed.code, heap_order_hint(want)) from None


def _lfu_pin_keeps_heap_order(impl: Any) -> None:
    """A pin that takes the key's entry out of the middle of ``heap`` (list.remove, or the last
    entry moved into its slot) with no heapify: the second pin below leaves 'c' above 'b', so
    heappop returns 'c'. Fails only where :func:`heap_order_broken` proves that cause; any
    other wrong victim is left to the model."""
    s = PolicyScript(impl, "LFU")
    s.put("a", "b", "c")
    s.pin("a")
    s.unpin("a")
    s.pin("a")
    if heap_order_broken(s.policy, "b"):
        expect_victim_in_order(
            s, "b", "'a' is pinned; 'b' and 'c' have count 1, 'b' reached it first"
        )


def heap_order_hint(want: str) -> str:
    return (
        "yours left `heap` out of heap order before this pop_victim() (an entry sits below a "
        f"larger one), and a copy of yours with the list put back in order (heapq.heapify) "
        f"evicts {want!r}: heappop returns the smallest entry only while the list keeps heap "
        "order. An entry taken out of the middle of the list (list.remove, or the last one "
        "moved into its slot) needs heapq.heapify after it; or leave it there: pop_victim "
        "skips a pinned key's entry"
    )


def _lfu_empty(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a")
    s.expect_victim("a", "the only key")
    s.expect_len(0, "nothing is resident")
    s.expect_no_victim("nothing is resident")


def _lfu_counts_grow(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a", "b")
    s.hit(*["b"] * 5)
    s.hit(*["a"] * 4)
    s.expect_victim(
        "a", "in the reference 'a' has count 5, 'b' 6: counts keep growing, they are not capped"
    )


def _lfu_ties_fifo(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a", "b", "c", "d")
    s.hit("d", "b")  # b and d reach count 2, d first
    s.expect_victim("a", "in the reference count 1, and it arrived before 'c'")
    s.expect_victim("c", "in the reference count 1")
    s.expect_victim("d", "in the reference count 2, reached before 'b' reached it")


# Step 3: pins.


def _lfu_unpin_keeps_place(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a", "b", "c")
    s.pin("a")
    s.unpin("a")
    s.expect_order(
        ["a", "b", "c"],
        "a pin and an unpin are not uses: 'a' keeps its place among the keys of count 1",
    )
    s.expect_victim(
        "a", "in the reference 'a' is back where it was, first among the keys of count 1"
    )


def _lfu_pinned_history(impl: Any) -> None:
    s = PolicyScript(impl, "LFU")
    s.put("a", "b", "c")
    s.pin("a")
    s.hit("a", "a")  # hits while pinned count
    s.hit("b")
    s.unpin("a")
    s.expect_order(
        ["c", "b", "a"], "in the reference 'a' has count 3 (two hits while pinned), 'b' 2, 'c' 1"
    )


def _lfu_pinned_hit_ticks(impl: Any) -> None:
    """A hit while pinned is a use of its own: it takes the next tick, so 'a', which reaches
    count 2 after 'b' did, leaves after it (a clock advanced on the unpinned path only gives
    'a' the tick of 'b''s hit, and the tie then goes by key)."""
    s = PolicyScript(impl, "LFU")
    s.put("a", "b")
    s.hit("b")
    s.pin("a")
    s.hit("a")
    s.unpin("a")
    s.expect_order(
        ["b", "a"],
        "in the reference both have count 2; 'b' reached it first, 'a' with its hit while "
        "pinned, one tick later",
    )


# --------------------------------------------------------------------------- SIEVE probes
# Steps 4 and 5 come before the sweep: they read the skeleton's attributes.


def _sieve_born_unvisited(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c")
    s.expect_field("queue", ["a", "b", "c"], "keys in arrival order, the newest last")
    s.expect_field("visited", {"a": False, "b": False, "c": False}, "no key was hit yet")
    s.expect_len(3, "three keys, none pinned")


def _sieve_hit_sets_bit(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c")
    s.hit("a", "a")
    s.expect_field("queue", ["a", "b", "c"], "a hit moves nothing")
    s.expect_field("visited", {"a": True, "b": False, "c": False}, "'a' was hit")


def _sieve_pins_counted(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c")
    s.pin("b")
    s.expect_field("pinned", {"b"}, "'b' is pinned")
    s.expect_len(2, "a pinned key is not a candidate")
    s.unpin("b")
    s.expect_field("pinned", set(), "'b' was unpinned")
    s.expect_len(3, "after update_on_unpin the key is a candidate again")


def _sieve_pin_keeps_history(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c")
    s.hit("b")
    s.pin("b")
    s.hit("c")
    s.pin("c")
    s.unpin("b")
    s.unpin("c")
    s.expect_field("queue", ["a", "b", "c"], "a pin and an unpin move nothing")
    s.expect_field("visited", {"a": False, "b": True, "c": True}, "pins keep the bits")
    s.pin("a")
    s.unpin("a")
    s.expect_field("visited", {"a": False, "b": True, "c": True}, "an unpin is no use of 'a'")


def _sieve_remove_forgets(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c")
    s.hit("b")
    s.pin("b")
    s.remove("b")
    s.expect_field("queue", ["a", "c"], "'b' was removed")
    s.expect_field("visited", {"a": False, "c": False}, "'b' was removed with its bit")
    s.expect_field("pinned", set(), "'b' was removed with its pin")
    s.expect_len(2, "two keys are resident, none pinned")


def _sieve_hand_moves_on(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c", "d")
    s.point_hand("b")
    s.remove("b")
    s.expect_field("hand", "c", "the hand was on 'b': it moves on to the next newer key")


def _sieve_hand_off_the_end(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c")
    s.point_hand("c")
    s.remove("c")
    s.expect_field("hand", None, "'c' was the newest: the next sweep starts at the oldest")


def _sieve_hand_stays_on_others(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c", "d")
    s.point_hand("c")
    s.remove("a")
    s.remove("d")
    s.expect_field("hand", "c", "neither removed key was under the hand")


# Step 6: the sweep.


def _sieve_basic(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c")
    s.hit("a")
    s.expect_victim(
        "b", "the reference's hand starts at the oldest key, passes visited 'a', evicts 'b'"
    )


def _sieve_clears_bits(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b")
    s.hit("a")
    s.expect_victim("b", "'a' is visited, 'b' is not")
    s.put("c")
    s.expect_victim(
        "a", "the reference's hand cleared a's bit on its way past; this sweep evicts it"
    )


def _sieve_wraps(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c")
    s.hit("a", "b")
    s.expect_victim("c", "a and b were hit (the reference's hand clears their bits), c was not")
    s.put("d")
    s.expect_victim("a", "c was the newest, so the reference's hand wraps to the oldest key, 'a'")


def _sieve_remove_under_hand(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c", "d")
    s.hit("a")
    s.expect_victim(
        "b", "the reference's hand passes visited 'a' (clearing it), evicts 'b' and rests on 'c'"
    )
    s.remove("c")
    s.put("e")
    s.expect_victim("d", "'c' was removed under the hand, so the reference's hand moved on to 'd'")


def _sieve_hand_stays(impl: Any) -> None:
    s = PolicyScript(impl, "SIEVE")
    s.put("a", "b", "c", "d")
    s.hit("a")
    s.expect_victim("b", "the reference's hand passes visited 'a' (clearing it), evicts 'b'")
    s.expect_victim("c", "the reference's hand continues after 'b': 'c' is next, not 'a'")


def _sieve_hand_on_key_zero(impl: Any) -> None:
    """Keys 5, 6, 0, 7: the first sweep evicts 6 and leaves the hand on 0, a key that reads
    false; the next sweep starts there (`hand is None` means no hand, not a falsy key)."""
    s = PolicyScript(impl, "SIEVE")
    for key in (5, 6, 0, 7):
        s(f"p.update_on_put({key}, 1)")
    s("p.update_on_hit(5)")
    for want, why in (
        (6, "the hand passes visited 5 (clearing it) and evicts 6, stopping on 0"),
        (
            0,
            "the hand stopped on key 0, which is not visited: a hand on a key that reads "
            "false is still a hand; only `hand is None` starts at the oldest key",
        ),
    ):
        got = s("p.pop_victim()")
        if got != want:
            raise s.fail(f"pop_victim() returned {got!r}, expected {want!r}: {why}")
        s.lines[-1] += f"  # {want!r}"


def policy_namespace(impl: Any) -> dict[str, Any]:
    """``LFU`` and ``SIEVE``: the learner's classes of those names, those that were passed."""
    ns: dict[str, Any] = {}
    for name in CLASSES:
        try:
            ns[name] = policy_class(impl, name)
        except Exception:
            continue
    return ns
