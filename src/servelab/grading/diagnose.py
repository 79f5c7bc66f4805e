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

import dataclasses
import random
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from servelab.grading.localise import (
    Localisation,
    Skeleton,
    changed_methods,
    localise,
    place_hint,
    where_lines,
)
from servelab.grading.mistakes import Mistake, correct_impl, mistakes
from servelab.grading.observe import (
    DETAILS,
    FIELDS,
    Canon,
    blocks_fields,
    budget_fields,
    frozen,
    policy_fields,
    prefix_fields,
    scheduler_fields,
    weight_cache_fields,
)
from servelab.grading.readings import reading
from servelab.grading.replay import (
    Observation,
    TopicReplay,
    plain,
    program_of,
    remember_program,
    replay,
)
from servelab.grading.separating import (
    BLOCKS_SEPARATING,
    KV_OFFLOAD_SEPARATING,
    POLICY_SEPARATING,
    PREFIX_SEPARATING,
    SCHEDULER_SEPARATING,
    TOKEN_BUDGET_SEPARATING,
    WEIGHT_CACHE_SEPARATING,
)

__all__ = [
    "Diagnoser",
    "Finding",
    "Observation",
    "TopicReplay",
    "diagnosed",
    "explained",
    "for_topic",
    "program_of",
    "remember_program",
    "replay",
    "where_lines",
    "with_place",
]


import os

KEEP_CHECK_HINT = os.environ.get("KEEP") == "1"
#: Variants of each program replayed before a claim of certainty (a count, not seconds).
VARIANTS = 12
_NUMBER = re.compile(r"(?<![\w'\".])\d+(?![\w'\".])")


def variants(program: str, count: int) -> list[str]:
    """``count`` copies of ``program`` with its integer literals changed (0 to twice the value
    plus 8), each by a generator seeded with its index: the same variants on every run."""
    return [_NUMBER.sub(_changer(random.Random(i)), program) for i in range(count)]


def _changer(rng: random.Random) -> Callable[[re.Match[str]], str]:
    def change(match: re.Match[str]) -> str:
        value = int(match.group())
        choices = [value, value + 1, max(0, value - 1), rng.randint(0, 2 * value + 8)]
        return str(rng.choice(choices))

    return change


@dataclass(frozen=True)
class Finding:
    """What diagnosis found: a hint (None keeps the check's), the lines that show where the
    difference starts, whether the hint claims certainty, and the localised methods."""

    hint: str | None = None
    where: tuple[str, ...] = ()
    certain: bool = False
    methods: tuple[str, ...] = ()
    place: str | None = None
    """Where to start, naming no cause: put before the check's hint when no hint is earned."""
    rule: str | None = None
    """The rule the first diverging call breaks (:mod:`servelab.grading.readings`): shown in
    place of the check's own hint, which was written for whatever that check targets."""


class Diagnoser:
    """The hook of one topic: ``Diagnoser(topic)(program, impl) -> str | None``."""

    def __init__(self, topic: str, spec: TopicReplay, subject: str = "") -> None:
        self.topic = topic
        self.spec = spec
        self.skeleton = Skeleton(
            subject,
            spec.namespace,
            lambda program, impl: replay(program, spec, impl),
            FIELDS[topic],
            lambda obj: spec.observe({subject: obj}, Canon()),
            frozenset(spec.ungraded),
            DETAILS.get(topic),
        )

    def matches(
        self, program: str, impl: Any, catalogue: Sequence[Mistake] | None = None
    ) -> list[Mistake]:
        """The known mistakes whose replay of ``program`` equals ``impl``'s; empty when the
        correct implementation's replay equals it too (the program cannot tell them apart).
        ``catalogue`` replaces the topic's (to measure how an unknown mistake is treated)."""
        return self._matches(program, impl, catalogue)[0]

    def _matches(
        self, program: str, impl: Any, catalogue: Sequence[Mistake] | None
    ) -> tuple[list[Mistake], list[Mistake]]:
        """(the matches, allowing a mistake to behave correctly on a separating program; the
        matches that equal the learner on every separating program)."""
        learner = replay(program, self.spec, impl)
        if replay(program, self.spec, correct_impl(self.topic)) == learner:
            return [], []
        known = mistakes(self.topic) if catalogue is None else catalogue
        found = [m for m in known if replay(program, self.spec, m.impl) == learner]
        strict = list(found)
        for extra in self.spec.separating:
            if not found:
                break
            theirs = replay(extra, self.spec, impl)
            right = replay(extra, self.spec, correct_impl(self.topic))
            seen = {m.name: replay(extra, self.spec, m.impl) for m in found}
            found = [m for m in found if seen[m.name] in (theirs, right)]
            strict = [m for m in strict if seen.get(m.name) == theirs]
        return found, strict

    def _alike_on_variants(self, program: str, impl: Any, other: Any) -> bool:
        """``impl`` and ``other`` agree on :data:`VARIANTS` variants of the failing and the
        separating programs, each with its numbers changed (a fixed, seeded choice): an
        independent signal before a claim of certainty."""
        for text in (program, *self.spec.separating):
            for variant in variants(text, VARIANTS):
                if replay(variant, self.spec, impl) != replay(variant, self.spec, other):
                    return False
        return True

    def localised(self, program: str, impl: Any, step: int | None = None) -> Localisation:
        """Where ``impl`` starts to differ from the checkpoint of ``step`` (the last: None)."""
        from servelab.checkpoints import checkpoint

        reference = correct_impl(self.topic) if step is None else checkpoint(self.topic, step)
        return localise(self.skeleton, program, impl, reference)

    def explain(
        self,
        program: str,
        impl: Any,
        step: int | None = None,
        catalogue: Sequence[Mistake] | None = None,
        read: bool = True,
    ) -> Finding:
        """Where the difference starts, and a known mistake only as far as it is earned:
        "behaves exactly like one that ..." when the mistake agrees with the learner on the
        failing program and on every separating program and changes the localised method; a
        question when it only shares the symptom; nothing otherwise."""
        if not program.strip():
            return Finding()
        place = self.localised(program, impl, step)
        found, strict = self._matches(program, impl, catalogue)
        methods = set(place.methods)
        correct = correct_impl(self.topic)

        def at_place(m: Mistake) -> bool:
            return bool(methods & changed_methods(m.impl, correct))

        where = where_lines(place)
        if (
            len(strict) == 1
            and methods
            and at_place(strict[0])
            and self._alike_on_variants(program, impl, strict[0].impl)
        ):
            hint = f"your {self.spec.noun} behaves exactly like one that {strict[0].like}"
            return Finding(hint, where, True, place.methods)
        if methods:
            found = [m for m in found if at_place(m)]
        rule = reading(self.topic, place.divergence, program) if read else None
        start = None
        if rule is not None and place.divergence is not None:
            start = f"start at your `{place.divergence.method}`: {rule}"
        if len(found) == 1:
            hint = (
                f"the same symptom comes from a {self.spec.noun} that {found[0].like}: does "
                "yours do that?"
            )
            if start is not None:
                hint = f"{start}. The {hint[len('the ') :]}"
            return Finding(hint, where, False, place.methods, start, rule)
        if start is not None:
            return Finding(None, where, False, place.methods, start, rule)
        return Finding(None, where, False, place.methods, place_hint(place))

    def __call__(
        self, program: str, impl: Any, catalogue: Sequence[Mistake] | None = None
    ) -> str | None:
        return self.explain(program, impl, None, catalogue).hint


# ----------------------------------------------------------------------------- the topics


def _weight_cache_ns(impl: Any) -> dict[str, Any]:
    return {"WeightCache": impl}


def _weight_cache_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    cache = ns.get("cache")
    return None if cache is None else frozen(weight_cache_fields(cache))


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
    return None if p is None else frozen(policy_fields(p))


def _blocks_ns(name: str) -> Callable[[Any], dict[str, Any]]:
    def namespace(impl: Any) -> dict[str, Any]:
        from servelab.kv import blocks

        ns: dict[str, Any] = {name: impl}
        for error in ("OutOfBlocks", "UnknownSequence", "SequenceExists", "InvalidLength"):
            ns[error] = getattr(blocks, error)
        return ns

    return namespace


def _graded_blocks(fields: dict[str, Any]) -> Hashable:
    """Block fields as the rules see them: the free list's order is the learner's choice, but
    not a block listed twice, nor a block both free and held."""
    free = fields["free"]
    held = {b for t in fields["tables"].values() for b in t}
    fields = dict(fields, free=(len(free), len(free) - len(set(free)), sorted(held & set(free))))
    return frozen(fields)


def _tables(bm: Any, canon: Canon) -> Hashable:
    return _graded_blocks(blocks_fields(bm, canon))


def _blocks_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    bm = ns.get("bm")
    return None if bm is None else _tables(bm, canon)


def _prefix_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    bm = ns.get("bm")
    return None if bm is None else _graded_blocks(prefix_fields(bm, canon))


def _block_value(value: Any, canon: Canon) -> Hashable:
    if isinstance(value, tuple) and len(value) == 3:  # a Slot(block, offset, cow_src)
        block, offset, src = value
        return ("slot", canon(block), offset, canon(src))
    if isinstance(value, list) and all(_chain_link(v) for v in value):
        return tuple((canon.hashed(h), tuple(tokens)) for h, tokens in value)
    if isinstance(value, list):
        return tuple(plain(v) for v in value)
    return plain(value)


def _chain_link(value: Any) -> bool:
    """A (hash, block tokens) pair of a prefix chain: the hash is the learner's choice."""
    return isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], tuple)


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

    out = ns.get("out")
    step: Hashable = None
    if out is not None:
        step = (
            tuple((p.seq.seq_id, p.num_tokens) for p in out.prefills),
            tuple(d.seq.seq_id for d in out.decodes),
            tuple(s.seq_id for s in out.preempted),
            tuple(s.seq_id for s in out.finished),
        )
    fields = scheduler_fields(sched, canon)
    return (step, _graded_blocks(fields) if "tables" in fields else frozen(fields))


def _offload_ns(impl: Any) -> dict[str, Any]:
    from servelab.testing.kv_offload import (
        crashing_writes,
        hierarchy_class,
        payload_for,
        tier_class_of,
    )

    ns: dict[str, Any] = {"Tier": tier_class_of(impl), "payload": payload_for}
    if isinstance(impl, dict):
        ns["DiskTier"] = impl["DiskTier"]
        ns["Hierarchy"] = hierarchy_class(impl)
        ns["crashing_writes"] = crashing_writes
    return ns


def _offload_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    from servelab.testing.kv_offload import offload_fields

    obj = next((ns[n] for n in ("h", "tier", "disk") if ns.get(n) is not None), None)
    return None if obj is None else frozen(offload_fields(obj))


def _offload_value(value: Any, canon: Canon) -> Hashable:
    """Payloads as bytes, times to three significant digits (a closed form may differ from
    the reference's in the last digits), containers element by element."""
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, float):
        return float(f"{value:.3g}")
    if isinstance(value, list | tuple):
        return tuple(_offload_value(v, canon) for v in value)
    return plain(value)


def _budget_ns(impl: Any) -> dict[str, Any]:
    from servelab.kv.blocks import BlockManager
    from servelab.kv.prefix import PrefixCachingBlockManager
    from servelab.kv.scheduler import Sequence
    from servelab.kv.sim import emit_tokens

    return {
        "TokenBudgetScheduler": impl,
        "BlockManager": BlockManager,
        "PrefixCachingBlockManager": PrefixCachingBlockManager,
        "Sequence": Sequence,
        "emit_tokens": emit_tokens,
    }


def _budget_state(ns: dict[str, Any], canon: Canon) -> Hashable:
    sched = ns.get("sched")
    if sched is None:
        return None
    out = ns.get("out")
    step: Hashable = None
    if out is not None:
        step = (
            tuple(
                (c.seq.seq_id, c.start, c.num_tokens, c.samples, tuple(canon(s) for s in c.slots))
                for c in _read_chunks(out)
            ),
            tuple(s.seq_id for s in out.preempted),
            tuple(s.seq_id for s in out.finished),
        )
    fields = budget_fields(sched, canon)
    return (step, _graded_blocks(fields) if "tables" in fields else frozen(fields))


def _read_chunks(out: Any) -> list[Any]:
    return list(getattr(out, "scheduled", ()))


_BLOCK_ERRORS = ("OutOfBlocks", "UnknownSequence", "SequenceExists", "InvalidLength")

SPECS: dict[str, TopicReplay] = {
    "weight-cache": TopicReplay(
        "cache",
        _weight_cache_ns,
        _weight_cache_state,
        lambda v, c: plain(v),
        error_detail=lambda exc: "llama" in str(exc),  # a MemoryError names the pinned key
        separating=WEIGHT_CACHE_SEPARATING,
    ),
    "eviction-policy": TopicReplay(
        "policy",
        _policy_ns,
        _policy_state,
        lambda v, c: plain(v),
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
        lambda v, c: plain(v),
        ("RequestTooLarge",),
        SCHEDULER_SEPARATING,
    ),
    "kv-offload": TopicReplay(
        "KV offload",
        _offload_ns,
        _offload_state,
        _offload_value,
        ("ChunkTooLarge", "ChunkInUse", "ChunkNotFound", "ChunkNotPinned", "ChunkNotReferenced"),
        KV_OFFLOAD_SEPARATING,
    ),
    "token-budget": TopicReplay(
        "scheduler",
        _budget_ns,
        _budget_state,
        lambda v, c: None if type(v).__name__ == "BudgetStep" else plain(v),
        ("RequestTooLarge", "UnknownSequence"),
        TOKEN_BUDGET_SEPARATING,
    ),
}

SUBJECTS = {
    "weight-cache": "cache",
    "eviction-policy": "p",
    "block-manager": "bm",
    "prefix-cache": "bm",
    "scheduler": "sched",
    "kv-offload": "h",
    "token-budget": "sched",
}
"""The name each topic's programs give the graded object."""


class _SubjectPerProgram(Diagnoser):
    """kv-offload's programs build a tier (``tier``), a disk tier (``disk``) or a hierarchy
    (``h``): the report names the object the program built, not one fixed name."""

    def localised(self, program: str, impl: Any, step: int | None = None) -> Localisation:
        first = program.lstrip().split("=", 1)[0].strip()
        if first.isidentifier() and first != self.skeleton.subject:
            base = self.skeleton
            try:
                self.skeleton = dataclasses.replace(base, subject=first)
                return super().localised(program, impl, step)
            finally:
                self.skeleton = base
        return super().localised(program, impl, step)


HOOKS: dict[str, Diagnoser] = {
    name: (_SubjectPerProgram if name == "kv-offload" else Diagnoser)(name, spec, SUBJECTS[name])
    for name, spec in SPECS.items()
}


def for_topic(name: str) -> Callable[[str, Any], str | None] | None:
    """The diagnosis hook of topic ``name``, or None for a topic without a catalogue."""
    return HOOKS.get(name)


def explained(
    topic: str, code: str, exc: BaseException | None, impl: Any, step: int | None = None
) -> Finding:
    """The grader's call site: where the difference starts, and a hint when one is earned.

    ``code`` is the failing check's repro (may be empty); ``exc`` the exception it ended with,
    whose attached program stands in when a learner's error cut a probe short. Errors inside
    diagnosis propagate: the grader decides what to do with them.
    """
    hook = HOOKS.get(topic)
    program = code or (program_of(exc) if exc is not None else "")
    if hook is None or not program:
        return Finding()
    return hook.explain(program, impl, step, read=not _slip(exc))


#: Errors that say the code itself slipped (a typo, a call with the wrong arguments, a
#: ``next()`` past the end): their own hint says more than the rule of the method found.
SLIPS = frozenset(
    {
        "AttributeError",
        "IndexError",
        "NameError",
        "RecursionError",
        "StopIteration",
        "TypeError",
        "UnboundLocalError",
        "ZeroDivisionError",
    }
)


def _slip(exc: BaseException | None) -> bool:
    return exc is not None and any(c.__name__ in SLIPS for c in type(exc).__mro__)


def with_place(finding: Finding, check_hint: str) -> str:
    """The hint a report shows: the one diagnosis earned; else where to start, then the
    check's own hint as what the check was written for (a cause it often has, not a claim)."""
    if finding.hint:
        return finding.hint
    if finding.rule and finding.place:
        return finding.place
    if finding.place:
        return f"{finding.place}. This check was written for: {check_hint}"
    return check_hint


def diagnosed(topic: str, code: str, exc: BaseException | None, impl: Any) -> str | None:
    """The named mistake for a failed check, or None.

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
