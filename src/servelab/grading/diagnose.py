"""Diagnosis by matching behaviour: name the known mistake that behaves like the learner's code.

Two different mistakes can break the same invariant, so the invariant alone cannot say which
one was made. When a check fails, the failing program (the paste-able lines of the report) is
replayed on the learner's implementation, on the correct one and on every implementation in
the topic's catalogue of known mistakes (:mod:`servelab.grading.mistakes`). After every line
the replay writes down what a learner could see: the value returned or the kind of error
raised, and the topic's observable state. If exactly one known mistake reproduces the
learner's observations call for call, and the correct implementation does not, the mistake is
named: "your cache behaves exactly like one that evicts the most recently used entry".
Otherwise the hook answers None and the grader keeps the failed invariant's hint.

Programs found by Hypothesis are shrunk to the fewest calls that break a rule, and such a
program often cannot tell two alike mistakes apart (the newest entry and the largest one are the
same entry in it). So a few fixed programs per topic, written to separate alike mistakes, are
replayed too: a mistake stays a candidate only if, wherever it shows in them, the learner's
class shows it the same way. That also keeps a mistake nobody listed from being named after a
known one that merely agrees with it on the failing program.

A topic's hook is ``diagnose(program, impl) -> str | None``; :func:`for_topic` returns it, and
:func:`diagnosed` is the one call the grader makes when a check fails::

    hint = diagnosed(topic.name, code, exc, impl) or hint
A learner's exception inside a probe carries the probe's program so far in ``repro``
(:func:`remember_program`), so it can be diagnosed like any other failure.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from typing import Any

from servelab.grading.mistakes import Mistake, correct_impl, mistakes
from servelab.testing.core import ImplementationHung, hang_guard

__all__ = [
    "Diagnoser",
    "Observation",
    "diagnosed",
    "for_topic",
    "program_of",
    "remember_program",
    "replay",
]

Observation = tuple[Hashable, ...]
"""What one line of the program showed: (value or error, observable state)."""

LINE_TIMEOUT_S = 0.5
PROGRAM_ATTRIBUTE = "repro"


def remember_program(exc: BaseException, lines: list[str]) -> None:
    """Attach the lines run so far to a learner's exception (the first program wins)."""
    if not hasattr(exc, PROGRAM_ATTRIBUTE):
        try:
            setattr(exc, PROGRAM_ATTRIBUTE, "\n".join(lines))
        except AttributeError:  # pragma: no cover - an exception type without a __dict__
            pass


def program_of(exc: BaseException) -> str:
    """The program attached by :func:`remember_program`, or an empty string."""
    program = getattr(exc, PROGRAM_ATTRIBUTE, "")
    return program if isinstance(program, str) else ""


_SUPPRESS = re.compile(r"^with suppress\([^)]*\):\s*")


class Canon:
    """Renames block ids in order of first appearance, so two implementations that hand out
    different physical blocks for the same logical ones observe the same thing."""

    def __init__(self) -> None:
        self.names: dict[Any, int] = {}

    def __call__(self, block: Any) -> Any:
        if block is None or isinstance(block, bool) or not isinstance(block, int):
            return block
        return self.names.setdefault(block, len(self.names))


@dataclass(frozen=True)
class TopicReplay:
    """How one topic's programs are replayed: the names they use and what a learner sees."""

    noun: str
    namespace: Callable[[Any], dict[str, Any]]
    observe: Callable[[dict[str, Any], Canon], Hashable]
    value: Callable[[Any, Canon], Hashable]
    error_kinds: tuple[str, ...] = ()
    separating: tuple[str, ...] = ()
    """Fixed programs that tell alike mistakes apart, replayed when several match."""
    error_detail: Callable[[BaseException], Hashable] = lambda exc: None


def _error(exc: BaseException, kinds: tuple[str, ...]) -> str:
    """An error as a learner's own class and a catalogue class would both be described."""
    for kind in kinds:
        if any(cls.__name__ == kind for cls in type(exc).__mro__):
            return kind
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins":
            return cls.__name__
    return type(exc).__name__  # pragma: no cover - every exception derives from a builtin


def _safe(fn: Callable[[], Hashable]) -> Hashable:
    try:
        return fn()
    except Exception as exc:
        return ("unreadable", type(exc).__name__)


def _plain(value: Any, canon: Canon | None = None) -> Hashable:
    """A hashable, implementation-neutral form of a returned value."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _plain(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_plain(v) for v in value)
    return repr(type(value).__name__)


@contextmanager
def _quiet() -> Iterator[None]:
    with redirect_stdout(io.StringIO()):
        yield


def replay(program: str, spec: TopicReplay, impl: Any) -> list[Observation]:
    """Run ``program`` line by line with ``impl`` bound to its class names; observe each line."""
    try:
        ns = spec.namespace(impl)
    except Exception as exc:
        return [("namespace", type(exc).__name__)]
    canon = Canon()
    seen: list[Observation] = []
    for raw in program.splitlines():
        line = _SUPPRESS.sub("", raw.strip())
        if not line or line.startswith(("#", "from ", "import ")):
            continue
        result: Hashable
        try:
            with _quiet(), hang_guard(line, LINE_TIMEOUT_S):
                try:
                    code = compile(line, "<replay>", "eval")
                except SyntaxError:
                    exec(compile(line, "<replay>", "exec"), ns)
                    result = None
                else:
                    result = spec.value(eval(code, ns), canon)
        except ImplementationHung:
            seen.append(("hung",))
            break
        except Exception as exc:
            result = ("raised", _error(exc, spec.error_kinds), spec.error_detail(exc))
        seen.append((result, _safe(lambda: spec.observe(ns, canon))))
    return seen


class Diagnoser:
    """The hook of one topic: ``Diagnoser(topic)(program, impl) -> str | None``."""

    def __init__(self, topic: str, spec: TopicReplay) -> None:
        self.topic = topic
        self.spec = spec

    def matches(
        self, program: str, impl: Any, catalogue: Sequence[Mistake] | None = None
    ) -> list[Mistake]:
        """The known mistakes whose replay of ``program`` equals ``impl``'s; empty when the
        correct implementation's replay equals it too (the program cannot tell them apart).
        ``catalogue`` replaces the topic's (to measure how an unknown mistake is treated)."""
        learner = replay(program, self.spec, impl)
        if replay(program, self.spec, correct_impl(self.topic)) == learner:
            return []
        known = mistakes(self.topic) if catalogue is None else catalogue
        found = [m for m in known if replay(program, self.spec, m.impl) == learner]
        for extra in self.spec.separating:
            if not found:
                break
            theirs = replay(extra, self.spec, impl)
            right = replay(extra, self.spec, correct_impl(self.topic))
            found = [m for m in found if replay(extra, self.spec, m.impl) in (theirs, right)]
        return found

    def __call__(
        self, program: str, impl: Any, catalogue: Sequence[Mistake] | None = None
    ) -> str | None:
        if not program.strip():
            return None
        try:
            found = self.matches(program, impl, catalogue)
        except ImplementationHung:  # pragma: no cover - each line is guarded
            return None
        if len(found) != 1:
            return None
        return f"your {self.spec.noun} behaves exactly like one that {found[0].like}"


# ----------------------------------------------------------------------------- the topics


def _weight_cache_ns(impl: Any) -> dict[str, Any]:
    return {"WeightCache": impl}


def _weight_cache_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    cache = ns.get("cache")
    if cache is None:
        return None
    keys = tuple(cache.keys())
    pins = tuple(_safe(lambda k=k: int(cache.pin_count(k))) for k in keys)  # type: ignore[misc]
    source = getattr(cache, "stats", cache)
    stats = tuple(
        getattr(source, n, None) for n in ("hits", "misses", "evictions", "evicted_bytes")
    )
    return (keys, _safe(lambda: int(cache.used)), pins, stats)


def _policy_ns(impl: Any) -> dict[str, Any]:
    from servelab.grading.eviction_policy import policy_class

    ns: dict[str, Any] = {}
    for name in ("LFU", "SIEVE"):
        try:
            ns[name] = policy_class(impl, name)
        except Exception:
            continue
    return ns


def _policy_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    p = ns.get("p")
    if p is None:
        return None
    return (_safe(lambda: len(p)), _safe(lambda: _plain(p.eviction_order())))


def _blocks_ns(name: str) -> Callable[[Any], dict[str, Any]]:
    def namespace(impl: Any) -> dict[str, Any]:
        from servelab.kv import blocks

        ns: dict[str, Any] = {name: impl}
        for error in ("OutOfBlocks", "UnknownSequence", "SequenceExists", "InvalidLength"):
            ns[error] = getattr(blocks, error)
        return ns

    return namespace


def _tables(bm: Any, canon: Canon) -> Hashable:
    seqs = sorted(bm.sequences())
    tables = tuple((s, tuple(canon(b) for b in bm.block_table(s)), bm.seq_len(s)) for s in seqs)
    used = sorted({b for s in seqs for b in bm.block_table(s)})
    refs = tuple((canon(b), bm.refcount(b)) for b in used)
    free = list(bm.free_list())
    return (tables, refs, bm.num_free, len(free), len(free) - len(set(free)))


def _blocks_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    bm = ns.get("bm")
    return None if bm is None else _tables(bm, canon)


def _prefix_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    bm = ns.get("bm")
    if bm is None:
        return None
    hashed = tuple(sorted(canon(b) for b in range(bm.num_blocks) if bm.block_hash(b) is not None))
    mapped = tuple(sorted(canon(b) for b in bm.cached().values()))
    evictable = tuple(canon(b) for b in bm.evictable())
    return (_tables(bm, canon), hashed, mapped, evictable)


def _block_value(value: Any, canon: Canon) -> Hashable:
    if isinstance(value, tuple) and len(value) == 3:  # a Slot(block, offset, cow_src)
        block, offset, src = value
        return ("slot", canon(block), offset, canon(src))
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    return _plain(value)


def _scheduler_ns(impl: Any) -> dict[str, Any]:
    from servelab.kv.blocks import BlockManager
    from servelab.kv.scheduler import Sequence
    from servelab.kv.sim import emit_tokens

    return {
        "Scheduler": impl,
        "BlockManager": BlockManager,
        "Sequence": Sequence,
        "emit_tokens": emit_tokens,
    }


def _scheduler_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    sched = ns.get("sched")
    if sched is None:
        return None

    def ids(seqs: Any) -> tuple[Any, ...]:
        return tuple((s.seq_id, s.num_tokens) for s in seqs)

    out = ns.get("out")
    step: Hashable = None
    if out is not None:
        step = (
            tuple((p.seq.seq_id, p.num_tokens) for p in out.prefills),
            tuple(d.seq.seq_id for d in out.decodes),
            tuple(s.seq_id for s in out.preempted),
            tuple(s.seq_id for s in out.finished),
        )
    return (
        _safe(lambda: ids(sched.running)),
        _safe(lambda: ids(sched.waiting)),
        step,
        _safe(lambda: _tables(sched.bm, canon)),
    )


def _program(*lines: str) -> str:
    return "\n".join(lines)


def _puts(var: str, *keys: str) -> list[str]:
    return [f"{var}.update_on_put({k!r}, 1)" for k in keys]


def _steps(n: int) -> list[str]:
    return ["out = sched.step()", "emit_tokens(out)"] * n


WEIGHT_CACHE_SEPARATING = (
    _program(  # LRU evicts the small old entry first, then the large one; not the newest
        "cache = WeightCache(100)",
        "cache.put('a', '<a weights>', 10)",
        "cache.put('b', '<b weights>', 60)",
        "cache.put('c', '<c weights>', 20)",
        "cache.put('d', '<d weights>', 30)",
        "cache.keys()",
    ),
    _program(  # a hit and an unpin, then one eviction
        "cache = WeightCache(80)",
        "cache.put('a', '<a weights>', 40)",
        "cache.put('b', '<b weights>', 40)",
        "cache.pin('a')",
        "cache.pin('a')",
        "cache.unpin('a')",
        "cache.get('b')",
        "cache.put('c', '<c weights>', 40)",
        "cache.unpin('a')",
        "cache.get('b')",
        "cache.put('d', '<d weights>', 40)",
        "cache.keys()",
    ),
    _program(  # every rule once: hits, misses, pins, the errors, an entry as large as the budget
        "cache = WeightCache(100)",
        *[f"cache.put({k!r}, '<{k} weights>', 10)" for k in "abcde"],
        "cache.get('a')",
        "cache.get('zz')",
        "cache.put('f', '<f weights>', 60)",
        "cache.pin('llama')",
        "cache.put('llama', '<llama weights>', 10)",
        "cache.pin('llama')",
        "cache.put('big', '<big weights>', 95)",
        "cache.put('huge', '<huge weights>', 150)",
        "cache.put('llama', '<llama weights>', 20)",
        "cache.unpin('llama')",
        "cache.unpin('llama')",
        "cache.put('whole', '<whole weights>', 100)",
        "cache.keys()",
    ),
    _program(  # equal sizes: only the recency order decides
        "cache = WeightCache(90)",
        "cache.put('a', '<a weights>', 30)",
        "cache.put('b', '<b weights>', 30)",
        "cache.put('c', '<c weights>', 30)",
        "cache.put('a', '<a weights>', 30)",
        "cache.put('d', '<d weights>', 30)",
        "cache.keys()",
    ),
)

POLICY_SEPARATING = (
    _program(
        "p = LFU()",
        *_puts("p", "a", "b", "c", "d"),
        *["p.update_on_hit('a')"] * 5,
        *["p.update_on_hit('b')"] * 4,
        "p.update_on_pin('c')",
        "p.update_on_hit('c')",
        "p.update_on_unpin('c')",
        "p.eviction_order()",
    ),
    _program(
        "p = LFU()",
        *_puts("p", "a", "c"),
        "p.update_on_hit('a')",
        "p.update_on_hit('c')",
        "p.update_on_pin('a')",
        "p.update_on_unpin('a')",
        "p.eviction_order()",
    ),
    _program(
        "p = LFU()",
        *_puts("p", "a", "b", "c"),
        "p.update_on_pin('a')",
        "p.update_on_unpin('a')",
        "p.update_on_hit('c')",
        "p.update_on_hit('b')",
        "p.eviction_order()",
        "p.pop_victim()",
    ),
    _program(  # a key removed and put again while its old heap entry remains
        "p = LFU()",
        *_puts("p", "a", "b", "c"),
        "p.update_on_remove('a')",
        "p.update_on_put('a', 1)",
        "p.pop_victim()",
        "p.eviction_order()",
    ),
    _program(  # a key's heap entry popped while it is pinned; then it is unpinned
        "p = LFU()",
        *_puts("p", "a", "b"),
        "p.update_on_pin('a')",
        "p.pop_victim()",
        "p.update_on_unpin('a')",
        "p.pop_victim()",
    ),
    _program(  # a key put while the hand rests mid-queue
        "p = SIEVE()",
        *_puts("p", "a", "b", "c", "d"),
        "p.update_on_hit('a')",
        "p.pop_victim()",
        "p.update_on_put('e', 1)",
        "p.eviction_order()",
    ),
    _program(  # a full lap: every key visited, the hand past the oldest
        "p = SIEVE()",
        *_puts("p", "a", "b", "c", "d"),
        "p.update_on_hit('a')",
        "p.pop_victim()",
        *[f"p.update_on_hit({k!r})" for k in "acd"],
        "p.pop_victim()",
        "p.eviction_order()",
    ),
    _program(  # a pinned key removed, then put again
        "p = LFU()",
        *_puts("p", "a", "b"),
        "p.update_on_pin('a')",
        "p.update_on_remove('a')",
        "p.update_on_put('a', 1)",
        "p.eviction_order()",
    ),
    _program(
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
    _program(
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

BLOCKS_SEPARATING = (
    _program(
        "bm = BlockManager(8, 4)",
        "bm.allocate(0, 6)",
        "bm.fork(0, 1)",
        "bm.append_slot(0)",
        "bm.append_slot(1)",
        "bm.append_slot(1)",
        "bm.append_slot(1)",
        "bm.free_seq(0)",
        "bm.free_seq(1)",
        "bm.free_seq(1)",
    ),
    _program(
        "bm = BlockManager(4, 4)",
        "bm.allocate(0, 8)",
        "bm.fork(0, 1)",
        "bm.append_slot(1)",
        "bm.allocate(2, 12)",
        "bm.allocate(2, 3)",
        "bm.fork(2, 3)",
        "bm.append_slot(2)",
        "bm.allocate(4, 0)",
        "bm.append_slot(4)",
    ),
)

PREFIX_SEPARATING = (
    _program(
        "bm = PrefixBlockManager(8, 2)",
        "bm.allocate(0, [1, 1, 5])",
        "bm.allocate(1, [1, 1, 1, 1, 5])",
        "bm.allocate(2, [1, 1, 1, 1])",
        "bm.free_seq(0)",
        "bm.free_seq(1)",
        "bm.free_seq(2)",
        "bm.allocate(3, [1, 1, 1, 1, 5])",
        "bm.free_seq(3)",
        "bm.allocate(4, [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7])",
        "bm.num_cached_tokens([1, 1, 1, 1, 5])",
        "bm.num_cached_tokens([1, 1, 2, 2, 5])",
    ),
    _program(  # a private copy of a cached block, then the cached one evicted
        "bm = PrefixBlockManager(5, 2)",
        "bm.allocate(0, [1, 2, 3])",
        "bm.allocate(1, [1, 2])",
        "bm.append_slot(1, 3)",
        "bm.append_slot(1, 4)",
        "bm.free_seq(0)",
        "bm.allocate(2, [7, 7, 7, 7, 7])",
        "bm.num_cached_tokens([1, 2, 3, 4, 5])",
    ),
    _program(  # reclaim order: least recently freed first, and a hit refreshes it
        "bm = PrefixBlockManager(4, 1)",
        "bm.allocate(0, [1, 2])",
        "bm.free_seq(0)",
        "bm.allocate(1, [5, 6])",
        "bm.free_seq(1)",
        "bm.allocate(2, [1, 9])",
        "bm.free_seq(2)",
        "bm.allocate(3, [7, 7, 7])",
        "bm.num_cached_tokens([1, 1])",
        "bm.evictable()",
    ),
    _program(
        "bm = PrefixBlockManager(4, 2)",
        "bm.allocate(0, [1, 2, 3, 4, 5])",
        "bm.free_seq(0)",
        "bm.allocate(1, [1, 2, 9])",
        "bm.allocate(2, [6, 6, 6])",
        "bm.append_slot(2, 6)",
        "bm.num_cached_tokens([1, 2, 3, 4, 5])",
        "bm.allocate(3, [3, 4, 3])",
    ),
    _program(  # a hash that collides, then the same block evicted: trusting vs keeping a hash
        "bm = PrefixBlockManager(5, 2)",
        "bm.allocate(0, [1, 2, 3])",
        "bm.free_seq(0)",
        "bm.tokens[0] = (0, 0)",
        "bm.num_cached_tokens([1, 2, 3])",
        "bm.allocate(1, [7, 7, 7, 7, 7, 7, 7, 7, 7])",
        "bm.num_cached_tokens([1, 2, 3])",
    ),
)

SCHEDULER_SEPARATING = (
    _program(
        "bm = BlockManager(num_blocks=4, block_size=2)",
        "sched = Scheduler(bm, watermark=1)",
        "sched.add(Sequence.dummy(0, prompt_len=2, max_new_tokens=2))",
        "sched.add(Sequence.dummy(1, prompt_len=1, max_new_tokens=3))",
        "sched.add(Sequence.dummy(2, prompt_len=3, max_new_tokens=1))",
        "sched.add(Sequence.dummy(3, prompt_len=4, max_new_tokens=2))",
        "sched.add(Sequence.dummy(4, prompt_len=6, max_new_tokens=1))",
        *_steps(8),
    ),
    _program(
        "bm = BlockManager(num_blocks=3, block_size=1)",
        "sched = Scheduler(bm, watermark=0)",
        "sched.add(Sequence.dummy(0, prompt_len=1, max_new_tokens=2))",
        "sched.add(Sequence.dummy(1, prompt_len=1, max_new_tokens=2))",
        "sched.add(Sequence.dummy(2, prompt_len=1, max_new_tokens=2))",
        "sched.add(Sequence.dummy(3, prompt_len=5, max_new_tokens=1))",
        *_steps(6),
    ),
    _program(  # too large with its tokens to come, small by its prompt alone
        "bm = BlockManager(num_blocks=4, block_size=2)",
        "sched = Scheduler(bm, watermark=1)",
        "sched.add(Sequence.dummy(0, prompt_len=2, max_new_tokens=10))",
        "sched.add(Sequence.dummy(1, prompt_len=2, max_new_tokens=6))",
        *_steps(1),
    ),
    _program(  # ids falling with arrival; a step with two victims
        "bm = BlockManager(num_blocks=4, block_size=1)",
        "sched = Scheduler(bm, watermark=0)",
        *[f"sched.add(Sequence.dummy({i}, prompt_len=1, max_new_tokens=3))" for i in (3, 2, 1, 0)],
        *_steps(5),
    ),
    _program(
        "bm = BlockManager(num_blocks=8, block_size=4)",
        "sched = Scheduler(bm, watermark=0)",
        "sched.add(Sequence.dummy(0, prompt_len=20, max_new_tokens=1))",
        "sched.add(Sequence.dummy(1, prompt_len=16, max_new_tokens=1))",
        "sched.add(Sequence.dummy(2, prompt_len=4, max_new_tokens=1))",
        *_steps(3),
    ),
)


_BLOCK_ERRORS = ("OutOfBlocks", "UnknownSequence", "SequenceExists", "InvalidLength")

SPECS: dict[str, TopicReplay] = {
    "weight-cache": TopicReplay(
        "cache",
        _weight_cache_ns,
        _weight_cache_state,
        lambda v, c: _plain(v),
        error_detail=lambda exc: "llama" in str(exc),  # a MemoryError names the pinned key
        separating=WEIGHT_CACHE_SEPARATING,
    ),
    "eviction-policy": TopicReplay(
        "policy",
        _policy_ns,
        _policy_state,
        lambda v, c: _plain(v),
        ("LookupError",),
        POLICY_SEPARATING,
    ),
    "block-manager": TopicReplay(
        "block manager",
        _blocks_ns("BlockManager"),
        _blocks_state,
        _block_value,
        _BLOCK_ERRORS,
        BLOCKS_SEPARATING,
    ),
    "prefix-cache": TopicReplay(
        "prefix cache",
        _blocks_ns("PrefixBlockManager"),
        _prefix_state,
        _block_value,
        _BLOCK_ERRORS,
        PREFIX_SEPARATING,
    ),
    "scheduler": TopicReplay(
        "scheduler",
        _scheduler_ns,
        _scheduler_state,
        lambda v, c: _plain(v),
        ("RequestTooLarge",),
        SCHEDULER_SEPARATING,
    ),
}

HOOKS: dict[str, Diagnoser] = {name: Diagnoser(name, spec) for name, spec in SPECS.items()}


def for_topic(name: str) -> Callable[[str, Any], str | None] | None:
    """The diagnosis hook of topic ``name``, or None for a topic without a catalogue."""
    return HOOKS.get(name)


def diagnosed(topic: str, code: str, exc: BaseException | None, impl: Any) -> str | None:
    """The grader's call site: the named mistake for a failed check, or None.

    ``code`` is the failing check's repro (may be empty); ``exc`` the exception it ended with,
    whose attached program stands in when a learner's error cut a probe short. Diagnosis
    never fails a grade of its own accord: any error inside it means no diagnosis.
    """
    hook = for_topic(topic)
    program = code or (program_of(exc) if exc is not None else "")
    if hook is None or not program:
        return None
    try:
        return hook(program, impl)
    except Exception:
        return None
