"""Grader topic ``weight-cache``: the five steps of notebook 01.

The learner's class needs the seed's API — ``WeightCache(capacity_bytes)``, ``get(key)``,
``put(key, value, size)``, ``pin(key)``, ``unpin(key)`` — plus the inspection methods the
exercise skeleton provides ready-made: ``keys()`` (least recently used first, pinned included),
``used`` (bytes) and ``pin_count(key)``; from step 5 the counters ``hits``, ``misses``,
``evictions`` and ``evicted_bytes`` (as attributes or on a ``stats`` object).

Each probe below is one mistake from the seed's list or from real bug trackers; the state machine
of each step then searches for everything else against the model in
:mod:`servelab.testing.weight_cache`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from servelab.grading._script import Script, graded_names
from servelab.grading.about import About, Hint
from servelab.grading.topic import MachineCheck, Probe, ProbeFailed, Step, Topic
from servelab.grading.weight_cache_counts import counts, evict_counts
from servelab.grading.weight_cache_hints import HINTS, PINNED_ONCE, stored
from servelab.grading.weight_cache_pins import NO_VICTIM, every_entry_pinned
from servelab.grading.weight_cache_replay import REPLAY
from servelab.testing.pasteable import SUPPRESS_IMPORT
from servelab.testing.weight_cache import (
    INVARIANTS,
    snapshot,
    weight_cache_machine,
    weights_for,
)
from servelab.weights import EntryTooLarge

__all__ = ["TOPIC"]


class CacheScript(Script):
    """A :class:`Script` on one fresh cache, with the calls the probes make as verbs."""

    def __init__(self, impl: Any, capacity: int) -> None:
        super().__init__(REPLAY.namespace(impl), graded_names(REPLAY, impl), HINTS)
        self(f"cache = WeightCache({capacity})")

    @property
    def cache(self) -> Any:
        return self.ns["cache"]

    def put(self, key: str, size: int) -> Any:
        return self(f"cache.put({key!r}, {weights_for(key)!r}, {size})")

    def get(self, key: str) -> Any:
        return self(f"cache.get({key!r})")

    def pin(self, key: str) -> Any:
        return self(f"cache.pin({key!r})")

    def unpin(self, key: str) -> Any:
        return self(f"cache.unpin({key!r})")

    def keys(self) -> list[Any]:
        return list(self.cache.keys())

    def fail(
        self, message: str, rule: str | None = None, *, hint: str | None = None
    ) -> ProbeFailed:
        self.note(f"cache.keys()  # {self.keys()}")
        return super().fail(message, rule, hint=hint)

    def fail_raising(self, message: str, code: str) -> ProbeFailed:
        """A call raised the kind asked for, with the wrong error: the program ends in that
        call, bare, so pasted it raises the very error the message quotes."""
        at = max(i for i, line in enumerate(self.lines) if line.endswith(code))
        lines = [*self.lines[:at], code]
        if not any(line.startswith("with suppress(") for line in lines):
            lines = [line for line in lines if line != SUPPRESS_IMPORT]
        return ProbeFailed(message, lines, None)

    def expect_keys(self, want: list[str], why: str, diagnose: bool = True) -> None:
        got = self.keys()
        if got == want:
            return
        rule = None  # the probe's own mistake, unless the eviction count is already off
        if not diagnose:
            pass
        elif len(got) < len(want) and not set(got) - set(want):
            rule = "evicted-too-many"
        elif len(got) > len(want) and not set(want) - set(got):
            rule = "evicted-too-few"
        raise self.fail(f"{why}: resident keys (LRU first) are {got}, expected {want}", rule)

    def expect_used(self, want: int, why: str) -> None:
        if self.cache.used != want:
            raise self.fail(f"{why}: used is {self.cache.used} bytes, expected {want}")

    def expect_raises(
        self, kind: type[BaseException], call: Callable[[], Any], code: str, why: str
    ) -> BaseException:
        before = snapshot(self.cache, True)
        try:
            call()
        except kind as exc:
            self.caught.expected()  # the refusal asked for: the listing goes on past it
            after = snapshot(self.cache, True)
            if after != before:
                rule = "changed-on-error" if code.startswith("cache.put(") else "pins-on-error"
                raise self.fail(
                    f"{code} raised {type(exc).__name__} as it should, but the cache changed "
                    f"first: {before.changed_to(after)}",
                    rule,
                ) from exc
            return exc
        except Exception as exc:
            raise self.fail(
                f"{code} raised {type(exc).__name__}, expected a {kind.__name__} ({why})"
            ) from exc
        raise self.fail(f"{code} returned normally; it should raise {kind.__name__} ({why})")


# --- step 1: bytes, not a count ---------------------------------------------------------


def _bytes_not_count(impl: Any) -> None:
    s = CacheScript(impl, 100)
    for k in "abcdef":
        s.put(k, 10)
    s.expect_keys(list("abcdef"), "six 10-byte entries fit a 100-byte budget", diagnose=False)
    s.expect_used(60, "six 10-byte entries")


def _used_follows_sizes(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("a", 30)
    s.put("b", 50)
    s.expect_used(80, "30 + 50 bytes are resident")
    if s.get("a") != weights_for("a"):
        raise s.fail("get('a') should return the stored value")
    if s.get("z") is not None:
        raise s.fail("get of an absent key should return None (a miss)")


def _whole_budget_fits(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("a", 100)
    s.expect_keys(["a"], "an entry exactly the size of the budget fits an empty cache")
    s.expect_used(100, "one 100-byte entry")


def _replace_releases(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("a", 30)
    s.put("a", 50)
    s.expect_used(50, "'a' was replaced, so only its new size counts")
    s.expect_keys(["a"], "a key appears once")


def _replace_stores_value(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("a", 30)
    new = "<a weights, replaced>"
    s(f"cache.put('a', {new!r}, 50)")
    got = s.get("a")
    if got == new:
        return
    first = " (the value of its first put)" if got == weights_for("a") else ""
    raise s.fail(
        f"get('a') returned {got!r}{first}, expected {new!r}: 'a' was put again with a new value"
    )


# --- step 2: the eviction loop -----------------------------------------------------------


def _loop_until_fits(impl: Any) -> None:
    s = CacheScript(impl, 100)
    for k in "abcde":
        s.put(k, 20)
    s.put("big", 70)
    got = s.keys()
    if "big" in got and len(got) > 2:
        raise s.fail(f"after admitting 70 bytes, used is {s.cache.used} of 100")
    s.expect_keys(["e", "big"], "70 bytes need the space of four 20-byte entries")


def _no_more_than_needed(impl: Any) -> None:
    s = CacheScript(impl, 100)
    for k in "abcde":
        s.put(k, 20)
    s.put("f", 30)
    s.expect_keys(["c", "d", "e", "f"], "30 bytes need two 20-byte evictions, not more")


def _hit_refreshes(impl: Any) -> None:
    s = CacheScript(impl, 90)
    for k in "abc":
        s.put(k, 30)
    s.get("a")
    s.put("d", 30)
    s.expect_keys(["c", "a", "d"], "'a' was just read, so 'b' is the least recently used")


def _put_refreshes(impl: Any) -> None:
    s = CacheScript(impl, 90)
    for k in "abc":
        s.put(k, 30)
    s.put("a", 30)
    s.put("d", 30)
    s.expect_keys(["c", "a", "d"], "'a' was just written again, so 'b' is the least recently used")


# --- step 3: pinning -------------------------------------------------------------------


def _pinned_never_evicted(impl: Any) -> None:
    s = CacheScript(impl, 80)
    s.put("a", 40)
    s.put("b", 40)
    s.pin("a")
    s.put("c", 40)
    s.expect_keys(["a", "c"], "'a' is pinned, so the oldest *unpinned* entry 'b' goes")


def _two_replicas(impl: Any) -> None:
    s = CacheScript(impl, 80)
    s.put("a", 40)
    s.put("b", 40)
    s.pin("a")  # replica 1
    s.pin("a")  # replica 2
    s.unpin("a")  # replica 1 drains; replica 2 still serves from 'a'
    s.put("c", 40)
    s.expect_keys(["a", "c"], "replica 2 still pins 'a'")
    if s.cache.pin_count("a") != 1:
        raise s.fail(f"pin_count('a') is {s.cache.pin_count('a')}, expected 1")


def _unpin_releases(impl: Any) -> None:
    s = CacheScript(impl, 80)
    s.put("a", 40)
    s.put("b", 40)
    s.pin("a")
    s.unpin("a")
    s.put("c", 40)
    s.expect_keys(["b", "c"], "'a' was unpinned, so as the oldest it is the victim")


def _pin_returns_count(impl: Any) -> None:
    """Two pins and two unpins of one entry, another pinned beside it: each returns the pin
    count of its own key (a count of the keys pinned, or of every pin, reads otherwise)."""
    s = CacheScript(impl, 80)
    s.put("a", 40)
    s.put("b", 20)
    calls = (
        ("b", s.pin, 1),
        ("a", s.pin, 1),
        ("a", s.pin, 2),
        ("a", s.unpin, 1),
        ("a", s.unpin, 0),
    )
    for key, call, want in calls:
        got = call(key)
        if got != want:
            name = "pin" if call == s.pin else "unpin"
            message = f"cache.{name}({key!r}) returned {got!r}, expected {want} (the pin count now)"
            raise Script.fail(s, message)  # the program ends in the first wrong answer


# --- step 4: the two errors and exception safety ----------------------------------------


def _impossible_put_raises(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("a", 60)
    s.pin("a")
    for key, size in (("huge", 150), ("big", 50)):
        code = f"cache.put({key!r}, {weights_for(key)!r}, {size})"
        try:
            result = s.put(key, size)
        except Exception:
            continue
        raise s.fail(f"{code} returned {result!r} without raising, and '{key}' is not admitted")


def _too_large_is_value_error(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("a", 40)
    code = "cache.put('huge', '<huge weights>', 150)"
    exc = s.expect_raises(
        ValueError, lambda: s.put("huge", 150), code, "larger than the whole cache"
    )
    if isinstance(exc, MemoryError):
        raise s.fail(f"{code} raised {type(exc).__name__}, which is also a MemoryError")


def _pinned_out_is_memory_error(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("llama-8b", 30)
    s.put("qwen-7b", 30)
    s.put("phi-3", 10)
    s.pin("llama-8b")
    s.pin("qwen-7b")
    code = "cache.put('mixtral', '<mixtral weights>', 50)"
    exc = s.expect_raises(
        MemoryError,
        lambda: s.put("mixtral", 50),
        code,
        "it fits the budget, but 60 of its 100 bytes are pinned",
    )
    if isinstance(exc, ValueError):
        raise s.fail_raising(
            f"{code} raised {type(exc).__name__}, which is also a ValueError", code
        )
    missing = [k for k in ("llama-8b", "qwen-7b") if k not in str(exc)]
    if missing:
        raise s.fail_raising(
            f"the MemoryError says {str(exc)!r}; it should name the pinned keys, but "
            f"{missing} are not in it",
            code,
        )


def _pinned_key_not_replaced(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("a", 40)
    s.pin("a")
    code = "cache.put('a', '<a weights>', 20)"
    before = snapshot(s.cache, True)
    try:
        s.put("a", 20)
    except Exception:
        after = snapshot(s.cache, True)
        if after != before:
            raise s.fail(
                f"{code} raised, but the cache changed first: {before.changed_to(after)}",
                "changed-on-error",
            ) from None
        if s.cache.pin_count("a") != 1:
            raise s.fail(
                f"pin_count('a') is {s.cache.pin_count('a')} after the failed put"
            ) from None
        return
    raise s.fail(f"{code} returned normally: the bytes a replica reads were replaced under it")


def _too_large_before_pinned(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("a", 40)
    s.pin("a")
    code = "cache.put('a', '<a weights>', 500)"
    why = "larger than the whole cache is checked before the pin"
    try:
        s.put("a", 500)
    except EntryTooLarge:
        return  # what it leaves behind is the exception-safety probes' to judge
    except Exception as exc:  # the line that raised stays the repro's last: no note after it
        message = f"{code} raised {type(exc).__name__}, expected an EntryTooLarge ({why})"
        raise Script.fail(s, message, "error-order") from exc
    raise s.fail(f"{code} returned normally; it should raise EntryTooLarge ({why})")


def _bad_size_before_pinned(impl: Any) -> None:
    """A size of 0 for a pinned key: the bad size is told first (ValueError), not the pin."""
    s = CacheScript(impl, 100)
    s.put("a", 40)
    s.pin("a")
    code = "cache.put('a', '<a weights>', 0)"
    why = "a bad size is checked before anything else, the pin included"
    try:
        s.put("a", 0)
    except Exception as exc:
        if isinstance(exc, ValueError) and not isinstance(exc, EntryTooLarge):
            return
        message = f"{code} raised {type(exc).__name__}, expected a ValueError ({why})"
        if isinstance(exc, EntryTooLarge):
            message = (
                f"{code} raised EntryTooLarge for a size of 0: a bad size is a plain ValueError"
            )
        raise Script.fail(s, message, "error-order") from exc
    raise s.fail(f"{code} returned normally; it should raise ValueError ({why})")


def _pinned_twice_holds_once(impl: Any) -> None:
    """'a' (30 bytes) pinned by two replicas: 70 bytes are still there for a 60-byte put."""
    s = CacheScript(impl, 100)
    s.put("a", 30)
    s.pin("a")
    s.pin("a")
    code = "cache.put('b', '<b weights>', 60)"
    try:
        s.put("b", 60)
    except Exception as exc:
        message = (
            f"{code} raised {type(exc).__name__}: 'a', pinned twice, holds its 30 bytes once, "
            "and 60 bytes fit in the 70 left"
        )
        raise Script.fail(s, message) from exc


def _decide_before_evicting(impl: Any) -> None:
    s = CacheScript(impl, 90)
    for k in "abc":
        s.put(k, 30)
    s.pin("c")
    s.expect_raises(
        MemoryError,
        lambda: s.put("x", 80),
        "cache.put('x', '<x weights>', 80)",
        "only 60 bytes are unpinned",
    )


def _unmatched_unpin(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("a", 40)
    s.pin("a")
    s.unpin("a")
    try:
        s.unpin("a")
    except Exception:
        pass
    else:
        raise s.fail("cache.unpin('a') a second time returned normally; it should raise")
    if s.cache.pin_count("a") != 0:
        raise s.fail(f"pin_count('a') is {s.cache.pin_count('a')} after the failed unpin")


def _pin_absent(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("a", 40)
    s.expect_raises(LookupError, lambda: s.pin("zz"), "cache.pin('zz')", "'zz' is not resident")


def _bad_size(impl: Any) -> None:
    s = CacheScript(impl, 100)
    s.put("a", 40)
    sizes: tuple[Any, ...] = (0, -10, 2.5, True)  # True: an int to isinstance, not bytes
    for size in sizes:
        code = f"cache.put('b', '<b weights>', {size})"
        s.expect_raises(ValueError, partial(s.put, "b", size), code, "not a size")


# --- step 5: what a miss costs (the probes are in weight_cache_counts) ------------------


def _c(probe: Callable[[Any, Any], None]) -> Callable[[Any], None]:
    return partial(probe, CacheScript)


#: The rules (:data:`~servelab.testing.weight_cache.INVARIANTS`) each level's machine adds.
LEVEL_INVARIANTS = {
    1: ("bytes-accounted", "get-value", "recency-order"),
    2: ("wrong-victim", "evicted-too-few", "evicted-too-many", "within-budget"),
    3: ("pinned-evicted", "pin-count", "pin-returns-count"),
    4: (
        "wrong-error",
        "miss-instead-of-raise",
        "changed-on-error",
        "unpin-error-type",
        "pin-error-type",
        "size-not-int",
        "error-order",
    ),
    5: ("stats",),
}


def _machine(level: int) -> MachineCheck:
    invariants = [INVARIANTS[i] for lvl in range(1, level + 1) for i in LEVEL_INVARIANTS[lvl]]
    return MachineCheck(
        name="state machine",
        build=lambda impl: weight_cache_machine(impl, level),
        invariants=invariants,
        hints=HINTS,
        max_examples=150,
        step_count=30,
    )


TOPIC = Topic(
    replay=REPLAY,
    checkpoint="weight_cache",
    name="weight-cache",
    title="A weight cache: byte budget, eviction loop, pins, two errors",
    steps=(
        Step(
            1,
            "bytes, not a count",
            (
                Probe(
                    "the budget counts bytes, not entries",
                    Hint(
                        "the budget is bytes, not a count of entries: four entries can be "
                        "56 GB or 560 GB",
                        About(("put",), ("resident", "used"), holds=stored),
                    ),
                    _bytes_not_count,
                ),
                Probe("used follows the sizes", HINTS["bytes-accounted"], _used_follows_sizes),
                Probe(
                    "an entry as large as the budget fits",
                    Hint(
                        "an entry exactly the size of the budget fits: it is too large only "
                        "when size > capacity (not >=)",
                        About(("put", "_check_can_admit")),
                    ),
                    _whole_budget_fits,
                ),
                Probe(
                    "replacing a key releases its old size",
                    Hint(
                        "when a key is put again, release its old size first",
                        About(("put",), ("used",)),
                    ),
                    _replace_releases,
                ),
                Probe(
                    "a replacement stores its new value",
                    Hint(
                        "a put of a resident key replaces its value as well as its size: get "
                        "answers the value of the latest put",
                        About(("put", "get")),
                    ),
                    _replace_stores_value,
                ),
            ),
            _machine(1),
        ),
        Step(
            2,
            "the eviction loop",
            (
                Probe(
                    "one large entry evicts several small ones",
                    HINTS["evicted-too-few"],
                    _loop_until_fits,
                ),
                Probe(
                    "no more evictions than needed",
                    HINTS["evicted-too-many"],
                    _no_more_than_needed,
                ),
                Probe(
                    "a hit refreshes recency",
                    Hint(
                        "get must move the key to the most recently used end",
                        About(("get",), ("resident",)),
                    ),
                    _hit_refreshes,
                ),
                Probe(
                    "a put refreshes recency",
                    Hint(
                        "putting an existing key again is a use: move it to the most recent end",
                        About(("put",), ("resident",)),
                    ),
                    _put_refreshes,
                ),
            ),
            _machine(2),
        ),
        Step(
            3,
            "pinning, then refcounted pins for two replicas",
            (
                Probe(
                    "pinned entries are never evicted",
                    Hint(
                        "pinned entries are never victims: skip them when choosing what to evict",
                        About(("_next_victim",)),
                    ),
                    _pinned_never_evicted,
                ),
                Probe(
                    "two replicas pin one model",
                    Hint(
                        "pins are counts, not a set: one replica's unpin must leave the model "
                        "pinned for the other",
                        About(("pin", "unpin"), ("pins",)),
                    ),
                    _two_replicas,
                ),
                Probe(
                    "the last unpin makes an entry evictable again",
                    Hint(
                        "an entry whose pin count is back to zero must be evictable again",
                        About(("unpin", "_next_victim"), ("pins",)),
                    ),
                    _unpin_releases,
                ),
                Probe("every entry pinned: no victim", NO_VICTIM, _c(every_entry_pinned)),
                Probe(
                    "pin and unpin return the count", HINTS["pin-returns-count"], _pin_returns_count
                ),
            ),
            _machine(3),
        ),
        Step(
            4,
            "the two errors and exception safety",
            (
                Probe(
                    "a put that cannot succeed raises",
                    Hint(
                        "a `put` that cannot be admitted must raise, not return a miss, or "
                        "callers retry forever",
                        About(("put", "_check_can_admit")),
                    ),
                    _impossible_put_raises,
                ),
                Probe(
                    "larger than the whole cache is a ValueError",
                    Hint(
                        "larger than the whole cache is permanent: raise a ValueError, not a "
                        "MemoryError",
                        About(("_check_can_admit",)),
                    ),
                    _too_large_is_value_error,
                ),
                Probe(
                    "blocked by pins is a MemoryError naming the pinned keys",
                    Hint(
                        "would fit but too much is pinned is transient: raise a MemoryError "
                        "that names the pinned keys",
                        About(("_check_can_admit",)),
                    ),
                    _pinned_out_is_memory_error,
                ),
                Probe(
                    "a pinned key cannot be replaced",
                    HINTS["replace-pinned"],
                    _pinned_key_not_replaced,
                ),
                Probe(
                    "larger than the cache is told before a pin",
                    HINTS["error-order"],
                    _too_large_before_pinned,
                ),
                Probe(
                    "nothing is evicted before raising",
                    Hint(
                        "decide admission (free + unpinned bytes >= size) before evicting "
                        "anything, so a put that raises has evicted nothing",
                        About(("put", "_check_can_admit")),
                    ),
                    _decide_before_evicting,
                ),
                Probe(
                    "an unmatched unpin raises",
                    Hint(
                        "an unpin without a matching pin must raise and keep the count at 0 "
                        "(a double unpin would drive it negative)",
                        About(("unpin",), ("pins",)),
                    ),
                    _unmatched_unpin,
                ),
                Probe("pin of an absent key raises KeyError", HINTS["pin-missing"], _pin_absent),
                Probe("a size must be positive", HINTS["bad-size"], _bad_size),
                Probe(
                    "a model pinned twice holds its bytes once",
                    PINNED_ONCE,
                    _pinned_twice_holds_once,
                ),
                Probe(
                    "a bad size is told before a pin", HINTS["error-order"], _bad_size_before_pinned
                ),
            ),
            _machine(4),
        ),
        Step(
            5,
            "what a miss costs",
            (
                Probe("hits, misses and evictions are counted", HINTS["stats"], _c(counts)),
                Probe("an eviction is counted in _evict", HINTS["stats"], _c(evict_counts)),
            ),
            _machine(5),
        ),
    ),
)
