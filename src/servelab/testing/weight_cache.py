"""Invariants of a weight cache, as an executable model and a Hypothesis state machine.

The model is deliberately naive: an ordered list of resident keys (least recently used first)
with their sizes, and a pin count per key. ``put`` and a hit move a key to the end; eviction
removes the first unpinned keys until the new entry fits, and nothing more; a put that cannot
succeed raises before anything changes. Any implementation of the learner API
(``WeightCache(capacity)``, ``get``, ``put(key, value, size)``, ``pin``, ``unpin`` and the
inspection methods ``keys()``, ``used``, ``pin_count(key)``) is driven against it.

``level`` selects how much of the API a step has built: 1 bytes only (no eviction needed),
2 the eviction loop, 3 pins, 4 errors and exception safety, 5 statistics.
"""

from __future__ import annotations

import operator
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from servelab.testing.core import InvariantViolation, RecordingMachine
from servelab.weights import EntryPinned, EntryTooLarge, PinnedCapacityExceeded

__all__ = [
    "INVARIANTS",
    "KEYS",
    "Snapshot",
    "WeightCacheModel",
    "check_weight_cache_invariants",
    "snapshot",
    "stats_of",
    "weight_cache_machine",
]

KEYS = ("a", "b", "c", "d", "e", "f")

#: Every rule the weight-cache machine checks, by the id its :class:`InvariantViolation`
#: carries; the grader's hints are keyed by the same ids.
INVARIANTS: dict[str, str] = {
    "resident-set": "keys() lists each resident key once",
    "pinned-evicted": "a pinned entry is never evicted",
    "evicted-too-few": "the eviction loop runs until the new entry fits",
    "evicted-too-many": "the eviction loop stops as soon as the new entry fits",
    "wrong-victim": "the eviction loop removes the least recently used unpinned entry",
    "within-budget": "used <= capacity",
    "recency-order": "keys() lists the entries least recently used first",
    "bytes-accounted": "used == sum of resident sizes",
    "get-value": "get returns what put stored, and None on a miss",
    "unpin-error-type": "unpin of a key that is not pinned (resident or not) raises ValueError",
    "pin-error-type": "pin of an absent key raises KeyError, not another LookupError",
    "size-not-int": "a size that is not an int raises ValueError",
    "error-order": "a put with two faults raises the error checked first: size, too large, "
    "pinned key, pinned bytes",
    "pin-count": "pin_count counts the pins of each replica",
    "stats": "hits, misses, evictions and evicted bytes are counted",
    "changed-on-error": "a put that raises leaves the cache unchanged",
    "pins-on-error": "a pin or unpin that raises leaves the pin counts unchanged",
    "unexpected-error": "a call the model says succeeds does not raise",
    "wrong-error": "a call that must fail raises the documented error",
    "miss-instead-of-raise": "a put blocked by pins raises MemoryError",
    "error-names-keys": "the MemoryError names the pinned keys",
    "replace-pinned": "a pinned entry is not replaced",
    "pin-missing": "pin of an absent key raises KeyError",
    "pin-returns-count": "pin returns the pin count after the pin, unpin the pins left",
    "unpin-too-many": "unpin without a matching pin raises",
    "bad-size": "a size must be a positive number of bytes",
}


#: Stored values a program must hand back as they are: a cache may hold a falsy value (an
#: empty or placeholder entry), and whether a get hits depends on the key, never on the value.
FALSY_VALUES: dict[str, Any] = {"e": None, "f": b""}


def weights_for(key: str) -> Any:
    return FALSY_VALUES.get(key, f"<{key} weights>")


@dataclass
class WeightCacheModel:
    """The rules, as plainly as they can be written."""

    capacity: int
    order: OrderedDict[str, int] = field(default_factory=OrderedDict)  # key -> size, LRU first
    pins: dict[str, int] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    evicted_bytes: int = 0

    @property
    def used(self) -> int:
        return sum(self.order.values())

    def unpinned_bytes(self) -> int:
        return sum(s for k, s in self.order.items() if not self.pins.get(k))

    def put_outcome(self, key: str, size: int) -> str:
        """'ok', 'too-large' (permanent) or 'pinned-out' (transient) — decided before any change."""
        if size > self.capacity:
            return "too-large"
        if size > self.capacity - self.used + self.unpinned_bytes():
            return "pinned-out"
        return "ok"

    def victims_for(self, key: str, size: int) -> list[str]:
        used = self.used - self.order.get(key, 0)
        victims = []
        for k, s in self.order.items():
            if used + size <= self.capacity:
                break
            if k == key or self.pins.get(k):
                continue
            victims.append(k)
            used -= s
        return victims

    def put(self, key: str, size: int) -> list[str]:
        victims = self.victims_for(key, size)
        self.order.pop(key, None)
        for v in victims:
            self.evictions += 1
            self.evicted_bytes += self.order.pop(v)
        self.order[key] = size
        return victims

    def get(self, key: str) -> bool:
        if key in self.order:
            self.order.move_to_end(key)
            self.hits += 1
            return True
        self.misses += 1
        return False


@dataclass(frozen=True)
class Snapshot:
    keys: tuple[Any, ...]
    used: int
    pins: tuple[tuple[Any, int], ...]  # (key, count) for every non-zero count
    stats: tuple[Any, ...] = field(default=(), compare=False)  # judged by their own rule

    def fields(self) -> dict[str, Any]:
        """Every field, by name, as a report shows it (non-zero pin counts only)."""
        pins = dict(self.pins)
        named = dict(
            zip(("hits", "misses", "evictions", "evicted_bytes"), self.stats, strict=False)
        )
        return {"resident": list(self.keys), "used": self.used, "pins": pins, **named}

    def changed_to(self, after: Snapshot) -> str:
        """``name old -> new`` for every field that differs in ``after``."""
        mine, theirs = self.fields(), after.fields()
        return ", ".join(
            f"{name} {mine.get(name)!r} -> {value!r}"
            for name, value in theirs.items()
            if mine.get(name) != value
        )


def _count(value: Any) -> Any:
    """A counter as the learner keeps it: a Python number as it is (a float of bytes is shown,
    not cut to an int that may happen to match), another integer type (numpy's) as an int."""
    if isinstance(value, int | float):
        return value
    try:
        return operator.index(value)
    except TypeError:
        return value  # shown as it is: it equals no count


def stats_of(cache: Any) -> tuple[Any, Any, Any, Any]:
    """(hits, misses, evictions, evicted_bytes) from ``cache.stats`` or the cache's attributes."""
    source = getattr(cache, "stats", cache)
    return (
        _count(source.hits),
        _count(source.misses),
        _count(source.evictions),
        _count(source.evicted_bytes),
    )


def snapshot(cache: Any, with_pins: bool) -> Snapshot:
    keys = tuple(cache.keys())
    pins: tuple[tuple[Any, int], ...] = ()
    if with_pins:  # every non-zero count: the machine's keys, resident ones, and any other pinned
        field_pins = getattr(cache, "_pins", None)
        extra = list(field_pins) if isinstance(field_pins, dict) else []
        named = dict.fromkeys([*KEYS, *keys, *extra])
        pins = tuple((k, n) for k in named if (n := int(cache.pin_count(k))))
    source = getattr(cache, "stats", cache)
    stats = tuple(
        getattr(source, n, None) for n in ("hits", "misses", "evictions", "evicted_bytes")
    )
    return Snapshot(keys, int(cache.used), pins, stats)


def check_weight_cache_invariants(cache: Any, model: WeightCacheModel, level: int) -> None:
    """Compare the implementation's visible state with the model's; raise InvariantViolation."""
    keys = list(cache.keys())
    used = cache.used
    expected_keys = list(model.order)
    if len(set(keys)) != len(keys):
        raise InvariantViolation("resident-set", f"keys() lists a key twice: {keys}")
    sizes = {k: model.order.get(k) for k in keys}
    if set(keys) != set(expected_keys):
        missing = [k for k in expected_keys if k not in keys]
        extra = [k for k in keys if k not in expected_keys]
        pinned_gone = [k for k in missing if model.pins.get(k)]
        if pinned_gone:
            inv = "pinned-evicted"
        elif extra and not missing:
            inv = "evicted-too-few"
        elif missing and not extra:
            inv = "evicted-too-many"
        else:
            inv = "wrong-victim"
        raise InvariantViolation(
            inv,
            f"resident keys are {keys}, expected {expected_keys} "
            f"(missing {missing}, unexpected {extra})",
        )
    if used > model.capacity:
        raise InvariantViolation(
            "within-budget",
            f"used is {used} bytes but the capacity is {model.capacity}: resident {keys}",
        )
    if keys != expected_keys:
        raise InvariantViolation(
            "recency-order",
            f"keys() (least recently used first) is {keys}, expected {expected_keys}",
        )
    expected_used = model.used
    if used != expected_used:
        raise InvariantViolation(
            "bytes-accounted",
            f"used is {used} bytes, but the resident sizes {sizes} add up to {expected_used}",
        )
    if level >= 3:
        for k in KEYS:
            got, want = cache.pin_count(k), model.pins.get(k, 0)
            if got != want:
                raise InvariantViolation("pin-count", f"pin_count({k!r}) is {got}, expected {want}")
    if level >= 5:
        got_stats = stats_of(cache)
        want_stats = (model.hits, model.misses, model.evictions, model.evicted_bytes)
        if got_stats != want_stats:
            names = ("hits", "misses", "evictions", "evicted_bytes")
            diff = ", ".join(
                f"{n} {g} (expected {w})"
                for n, g, w in zip(names, got_stats, want_stats, strict=True)
                if g != w
            )
            raise InvariantViolation("stats", f"stats disagree: {diff}")


def weight_cache_machine(impl: Any, level: int, capacity: int = 100) -> type[RecordingMachine]:
    """A state machine driving ``impl`` (a class or factory) at the given level of the API."""

    # mostly entries that leave room for others, sometimes one that needs many evictions (or is
    # blocked by the pinned ones), sometimes one larger than the whole cache
    small = st.integers(min_value=1, max_value=capacity // 8)
    sizes = st.one_of(
        small,
        st.integers(min_value=1, max_value=capacity // 4),
        st.integers(min_value=1, max_value=capacity),
        st.integers(min_value=capacity * 3 // 4, max_value=capacity),
        st.integers(min_value=capacity + 1, max_value=2 * capacity),
        st.just(capacity),  # exactly the budget: it fits (size > capacity is too large)
    )

    class WeightCacheMachine(RecordingMachine):
        # Puts are one rule among many, so a program starts from a few small entries: states
        # with more than four residents (where a count-based budget shows) are then common
        # whatever the seed.
        @initialize(fill=st.lists(small, max_size=len(KEYS)))
        def create(self, fill: list[int]) -> None:
            self.model = WeightCacheModel(capacity)
            self.cache = self.do(f"cache = WeightCache({capacity})", lambda: impl(capacity))
            for key, size in zip(KEYS, fill, strict=False):
                self.put(key, size)

        def _expect_unchanged(self, before: Snapshot, what: str) -> None:
            after = snapshot(self.cache, level >= 3)
            if after != before:
                rule = "changed-on-error" if what.startswith("cache.put(") else "pins-on-error"
                raise InvariantViolation(
                    rule, f"{what} raised, but the cache changed: {before.changed_to(after)}"
                )

        @rule(key=st.sampled_from(KEYS), size=sizes)
        def put(self, key: str, size: int) -> None:
            model = self.model
            if model.pins.get(key):
                if level >= 4:  # from step 4 on, replacing a pinned key raises
                    self._put_pinned(key, size)
                return
            outcome = model.put_outcome(key, size)
            if level < 2 and model.victims_for(key, size):
                return  # step 1 builds no eviction yet
            if level < 4 and outcome != "ok":
                return  # the two errors are step 4
            code = f"cache.put({key!r}, {weights_for(key)!r}, {size})"
            before = snapshot(self.cache, level >= 3)
            try:
                self.do(code, lambda: self.cache.put(key, weights_for(key), size))
            except (ValueError, MemoryError) as exc:
                if outcome == "ok":
                    raise InvariantViolation(
                        "unexpected-error",
                        f"{code} raised {type(exc).__name__}: {exc} — but it fits after "
                        f"evicting {model.victims_for(key, size)}",
                    ) from exc
                # the notebook's own classes, not merely their builtin bases: a caller
                # catches PinnedCapacityExceeded to retry, and a plain MemoryError escapes it
                want: type[Exception] = (
                    EntryTooLarge if outcome == "too-large" else PinnedCapacityExceeded
                )
                other: type[Exception] = MemoryError if want is EntryTooLarge else ValueError
                named = any(c.__name__ == want.__name__ for c in type(exc).__mro__)
                if not named or isinstance(exc, other):
                    why = (
                        "larger than the whole cache"
                        if outcome == "too-large"
                        else "blocked by pinned entries"
                    )
                    raise InvariantViolation(
                        "wrong-error",
                        f"{code} raised {type(exc).__name__}; expected {want.__name__} ({why})",
                    ) from exc
                self._expect_unchanged(before, code)
                if outcome == "pinned-out":
                    self._names_pinned_keys(code, exc)
                return
            if outcome != "ok":
                raise InvariantViolation(
                    "miss-instead-of-raise",
                    f"{code} returned normally, but it "
                    + (
                        "is larger than the whole cache"
                        if outcome == "too-large"
                        else "cannot fit while the pinned entries stay"
                    ),
                )
            model.put(key, size)

        def _names_pinned_keys(self, code: str, exc: BaseException) -> None:
            pinned = sorted(k for k, n in self.model.pins.items() if n)
            missing = [k for k in pinned if not re.search(rf"\b{re.escape(k)}\b", str(exc))]
            if missing:
                raise InvariantViolation(
                    "error-names-keys",
                    f"{code} raised MemoryError({str(exc)!r}), which does not name the pinned "
                    f"keys {missing}",
                )

        def _put_pinned(self, key: str, size: int) -> None:
            code = f"cache.put({key!r}, {weights_for(key)!r}, {size})"
            before = snapshot(self.cache, True)
            try:
                self.do(code, lambda: self.cache.put(key, weights_for(key), size))
            except Exception:
                self._expect_unchanged(before, code)
                return
            raise InvariantViolation(
                "replace-pinned",
                f"{code} returned normally, but {key!r} is pinned: its bytes were replaced "
                "under the replicas reading them",
            )

        @rule(key=st.sampled_from(KEYS))
        def get(self, key: str) -> None:
            code = f"cache.get({key!r})"
            value = self.do(code, lambda: self.cache.get(key))
            hit = self.model.get(key)
            want = weights_for(key) if hit else None
            if value != want:
                raise InvariantViolation(
                    "get-value", f"{code} returned {value!r}, expected {want!r}"
                )

        @precondition(lambda self: level >= 3 and bool(self.model.order))
        @rule(data=st.data())
        def pin(self, data: st.DataObject) -> None:
            key = data.draw(st.sampled_from(sorted(self.model.order)), label="key")
            code = f"cache.pin({key!r})"
            got = self.do(code, lambda: self.cache.pin(key))
            self.model.pins[key] = self.model.pins.get(key, 0) + 1
            self._returns_count(code, got, self.model.pins[key], "the pin count after the pin")

        @precondition(lambda self: level >= 3 and any(self.model.pins.values()))
        @rule(data=st.data())
        def unpin(self, data: st.DataObject) -> None:
            pinned = sorted(k for k, n in self.model.pins.items() if n)
            key = data.draw(st.sampled_from(pinned), label="key")
            code = f"cache.unpin({key!r})"
            got = self.do(code, lambda: self.cache.unpin(key))
            self.model.pins[key] -= 1
            self._returns_count(code, got, self.model.pins[key], "the pins left")

        def _returns_count(self, code: str, got: Any, want: int, what: str) -> None:
            if got != want:
                raise InvariantViolation(
                    "pin-returns-count", f"{code} returned {got!r}, expected {want} ({what})"
                )

        @precondition(lambda self: level >= 2 and 0 < self.model.used < capacity)
        @rule(key=st.sampled_from(KEYS))
        def put_exact_fit(self, key: str) -> None:
            # A new entry that fills the budget to the byte: it fits without evicting anything,
            # which a loop testing `>=` instead of `>` gets wrong. Aimed at, as random sizes
            # rarely add up to the capacity exactly.
            if key not in self.model.order:
                self.put(key, capacity - self.model.used)

        @precondition(
            lambda self: (
                level >= 4
                and self.model.used > self.model.unpinned_bytes()
                and not all(self.model.pins.get(k) for k in KEYS)
            )
        )
        @rule(data=st.data())
        def put_beside_pins(self, data: st.DataObject) -> None:
            # The edge of PinnedCapacityExceeded: it fits the budget, but not beside the pinned
            # entries. Aimed at on purpose, since random sizes rarely land in that window.
            pinned = self.model.used - self.model.unpinned_bytes()
            key = data.draw(st.sampled_from([k for k in KEYS if not self.model.pins.get(k)]))
            size = data.draw(st.integers(capacity - pinned - 2, capacity), label="size")
            self.put(key, max(size, 1))

        @precondition(lambda self: level >= 4)
        @rule(key=st.sampled_from(KEYS))
        def pin_absent(self, key: str) -> None:
            if key in self.model.order:
                return
            code = f"cache.pin({key!r})"
            before = snapshot(self.cache, True)
            try:
                self.do(code, lambda: self.cache.pin(key))
            except LookupError:
                self._expect_unchanged(before, code)
                return
            raise InvariantViolation(
                "pin-missing", f"{code} returned normally, but {key!r} is not resident"
            )

        @precondition(lambda self: level >= 4)
        @rule(key=st.sampled_from(KEYS))
        def unpin_unpinned(self, key: str) -> None:
            if self.model.pins.get(key) or key not in self.model.order:
                return
            code = f"cache.unpin({key!r})"
            before = snapshot(self.cache, True)
            try:
                self.do(code, lambda: self.cache.unpin(key))
            except Exception:
                self._expect_unchanged(before, code)
                return
            raise InvariantViolation(
                "unpin-too-many", f"{code} returned normally, but {key!r} is not pinned"
            )

        @precondition(lambda self: level >= 4)
        @rule(key=st.sampled_from(KEYS), size=st.sampled_from([0, -1, -capacity]))
        def put_bad_size(self, key: str, size: int) -> None:
            code = f"cache.put({key!r}, {weights_for(key)!r}, {size})"
            before = snapshot(self.cache, True)
            try:
                self.do(code, lambda: self.cache.put(key, weights_for(key), size))
            except ValueError:
                self._expect_unchanged(before, code)
                return
            raise InvariantViolation(
                "bad-size", f"{code} returned normally; a size must be a positive byte count"
            )

        def _raises_unchanged(
            self, code: str, call: Any, want: type[BaseException], rule_id: str, why: str
        ) -> None:
            """``call`` must raise ``want`` (and nothing else) and leave the cache as it was."""
            before = snapshot(self.cache, True)
            try:
                self.do(code, call)
            except Exception as exc:
                if not isinstance(exc, want):
                    raise InvariantViolation(
                        rule_id,
                        f"{code} raised {type(exc).__name__}; expected {want.__name__} ({why})",
                    ) from exc
                self._expect_unchanged(before, code)
                return
            raise InvariantViolation(
                rule_id, f"{code} returned normally; expected {want.__name__} ({why})"
            )

        @precondition(lambda self: level >= 4)
        @rule(data=st.data(), which=st.integers(0, 3))
        def documented_error(self, data: st.DataObject, which: int) -> None:
            # One rule for the four checks of the notebook's error contract, so that they do
            # not crowd out the puts and gets every other rule depends on
            if which == 0:
                self.unpin_unpinned_is_value_error(data.draw(st.sampled_from(KEYS), "key"))
            elif which == 1:
                self.pin_absent_is_key_error(data.draw(st.sampled_from([*KEYS, "zz"]), "key"))
            elif which == 2:
                key = data.draw(st.sampled_from(KEYS), "key")
                self.put_size_not_int(key, data.draw(st.sampled_from([2.5, 10.0, 0.5]), "size"))
            elif any(self.model.pins.values()):
                self.put_pinned_key_order_of_checks(data)

        def unpin_unpinned_is_value_error(self, key: str) -> None:
            # the notebook: unpin of any key that is not pinned (resident or not) is ValueError
            if self.model.pins.get(key):
                return
            resident = key in self.model.order
            self._raises_unchanged(
                f"cache.unpin({key!r})",
                lambda: self.cache.unpin(key),
                ValueError,
                "unpin-error-type",
                f"{key!r} is {'resident but not pinned' if resident else 'not even resident'}",
            )

        def pin_absent_is_key_error(self, key: str) -> None:
            if key in self.model.order:
                return
            self._raises_unchanged(
                f"cache.pin({key!r})",
                lambda: self.cache.pin(key),
                KeyError,
                "pin-error-type",
                f"{key!r} is not resident",
            )

        def put_size_not_int(self, key: str, size: float) -> None:
            if self.model.pins.get(key):
                return  # a pinned key: the order of the checks, below
            self._raises_unchanged(
                f"cache.put({key!r}, {weights_for(key)!r}, {size!r})",
                lambda: self.cache.put(key, weights_for(key), size),
                ValueError,
                "size-not-int",
                "a size must be a positive int number of bytes",
            )

        def put_pinned_key_order_of_checks(self, data: st.DataObject) -> None:
            # A put of a pinned key with a second fault: the checks run in the notebook's
            # order (size, larger than the cache, pinned key, pinned bytes), so the first wins.
            pinned = sorted(k for k, n in self.model.pins.items() if n)
            key = data.draw(st.sampled_from(pinned), label="key")
            pinned_bytes = self.model.used - self.model.unpinned_bytes()
            kind = data.draw(
                st.sampled_from(["bad", "float", "large", "pinned-out", "pinned-out"]), "kind"
            )
            code_of = f"cache.put({key!r}, {weights_for(key)!r}, {{}})"
            want: type[BaseException]
            if kind == "bad":
                size: Any = data.draw(st.sampled_from([0, -1]), label="size")
                want, why = ValueError, "the size is checked first: it is not positive"
            elif kind == "float":
                size = 2.5
                want, why = ValueError, "the size is checked first: it is not an int"
            elif kind == "large":
                size = capacity + data.draw(st.integers(1, capacity), label="excess")
                want, why = EntryTooLarge, "larger than the whole cache is checked before pins"
            elif pinned_bytes > 0:
                size = capacity - pinned_bytes + 1
                want, why = EntryPinned, "the key itself is pinned: checked before pinned bytes"
            else:
                return
            self._raises_unchanged(
                code_of.format(repr(size)),
                lambda: self.cache.put(key, weights_for(key), size),
                want,
                "error-order",
                why,
            )

        @invariant()
        def agrees_with_model(self) -> None:
            if hasattr(self, "cache"):
                check_weight_cache_invariants(self.cache, self.model, level)

    WeightCacheMachine.__name__ = f"WeightCacheMachine_level{level}"
    return WeightCacheMachine
