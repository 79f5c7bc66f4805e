"""The last line of a "reproduce:" program: the read that shows the difference the check found.

A check runs the learner's calls and then reads the state they left (``cache.keys()``, the
step's scheduled chunks) without writing that read into the program. Pasted after the grade
cell, such a program runs to its end and shows nothing wrong, and the learner distrusts the
whole report. So when the program as printed neither raises nor ends in an expression whose
value differs from the reference's, the program is run again, on the learner's class and on
the step's checkpoint, each in a fresh namespace of the notebook's names, followed by the
topic's reads of what a learner can see; the first read whose values differ (one whose value
the check's message quotes, if any) becomes the last line. It ran as printed, and it ends in
the value that differs.
"""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout
from typing import Any

from servelab.grading._script import graded_names
from servelab.grading.replay import TopicReplay, plain
from servelab.grading.topic import ProbeFailed, Topic
from servelab.testing.core import ImplementationHung, InvariantViolation, hang_guard
from servelab.testing.pasteable import SUPPRESS_IMPORT

__all__ = ["READS", "shown_at_end"]

_BM = (
    "{s: {bm}.block_table(s) for s in {bm}.sequences()}",
    "{s: {bm}.seq_len(s) for s in {bm}.sequences()}",
    "list({bm}.free_list())",
    "{bm}.num_free",
    "{b: {bm}.refcount(b) for b in range({bm}.num_blocks) if {bm}.refcount(b)}",
)
_PREFIX = ("sorted({bm}.cached().values())", "list({bm}.evictable())")


def _on(reads: tuple[str, ...], bm: str) -> tuple[str, ...]:
    return tuple(r.replace("{bm}", bm) for r in reads)


_QUEUES = ("[x.seq_id for x in sched.running]", "[x.seq_id for x in sched.waiting]")
_STEP_OUT = (
    "[x.seq.seq_id for x in out.prefills]",
    "[x.seq.seq_id for x in out.decodes]",
    "[x.seq_id for x in out.preempted]",
    "[x.seq_id for x in out.finished]",
)

#: What a learner can read of each topic's objects, in the order a check reads them; a read
#: that raises on either class (a name the program never made, a field yours lacks) is skipped.
READS: dict[str, tuple[str, ...]] = {
    "weight-cache": (
        "list(cache.keys())",
        "cache.used",
        "{k: cache.pin_count(k) for k in cache.keys()}",
        "(cache.hits, cache.misses, cache.evictions, cache.evicted_bytes)",
        "(cache.stats.hits, cache.stats.misses, cache.stats.evictions, cache.stats.evicted_bytes)",
    ),
    "eviction-policy": (
        "len(p)",
        "list(p.eviction_order())",
        "p.count",
        "p.visited",
        "sorted(p.pinned)",
        "p.hand",
        "list(p.queue)",
    ),
    "block-manager": _on(_BM, "bm"),
    "prefix-cache": _on(_BM + _PREFIX, "bm"),
    "scheduler": _STEP_OUT + _QUEUES + _on(_BM, "sched.bm"),
    "token-budget": (
        "[(c.seq.seq_id, c.start, c.num_tokens, c.samples) for c in out.scheduled]",
        "[(c.seq.seq_id, c.start, c.num_cached) for c in out.scheduled]",
        "[c.slots for c in out.scheduled]",
        "[x.seq_id for x in out.preempted]",
        *_QUEUES,
        "{x.seq_id: sched.num_computed_tokens(x.seq_id) for x in [*sched.running, *sched.waiting]}",
        *_on(_BM + _PREFIX, "sched.bm"),
    ),
    "kv-offload": (
        "list(tier.keys())",
        "tier.used",
        "list(disk.keys())",
        "disk.used",
        "{f.name: f.stat().st_size for f in sorted(disk.root.iterdir())}",
        "[list(t.keys()) for t in h.tiers]",
        "[t.used for t in h.tiers]",
        "h.held_bytes()",
        "{k: tier.can_evict(k) for k in tier.keys()}",
        "[{k: t.can_evict(k) for k in t.keys()} for t in h.tiers]",
    ),
}

#: What a state machine reads after each call, where a read of yours may change the object
#: (an eviction order trialled on the policy itself): written between the calls when the
#: program shows the difference only with them, as they ran.
BETWEEN: dict[str, tuple[str, ...]] = {
    "weight-cache": ("list(cache.keys())",),
    "eviction-policy": ("len(p)", "list(p.eviction_order())"),
}

_ASSIGNED = re.compile(r"^([A-Za-z_]\w*)\s*=[^=]")
#: Reads of one key, made for each key the program's calls name first (a pin of an absent key).
PER_KEY: dict[str, tuple[str, ...]] = {"weight-cache": ("cache.pin_count({key})",)}
_KEY = re.compile(r"\b\w+\.\w+\(('[^']*')")
_LINE_S = 2.0


class _Raised(Exception):
    """A line of the program raised or never returned: pasted, it fails there already."""


def _run(lines: list[str], ns: dict[str, Any]) -> Any:
    """Run ``lines`` as a pasted cell would; the last line's value (None for a statement)."""
    value = None
    for line in lines:
        try:
            with hang_guard(line, _LINE_S):
                try:
                    code = compile(line, "<reproduce>", "eval")
                except SyntaxError:
                    exec(compile(line, "<reproduce>", "exec"), ns)
                    value = None
                    continue
                value = eval(code, ns)
        except (Exception, ImplementationHung) as exc:
            raise _Raised from exc
    return value


_DATA = (list, tuple, dict, int, float, str, bool)


class _Hung(Exception):
    """A read never returned: no further read is tried (each would cost its seconds again)."""


def _read(line: str, ns: dict[str, Any]) -> Any:
    """The value of ``line`` in ``ns``; ``_Raised`` when reading it raised."""
    try:
        with hang_guard(line, _LINE_S):
            return eval(line, ns)
    except ImplementationHung as exc:
        raise _Hung from exc
    except Exception as exc:
        raise _Raised from exc


def _candidates(topic: str, lines: list[str]) -> list[str]:
    """The names the program assigned plain data to (the last first), then the topic's reads."""
    assigned = [m.group(1) for line in reversed(lines) if (m := _ASSIGNED.match(line))]
    keys = dict.fromkeys(key for line in lines for key in _KEY.findall(line))
    per_key = [read.format(key=key) for read in PER_KEY.get(topic, ()) for key in keys]
    return [*dict.fromkeys(assigned), *READS.get(topic, ()), *per_key]


def shown_at_end(topic: Topic, code: str, impl: Any, exc: BaseException | None, step: int) -> str:
    """``code`` with the read that shows the difference as its last line, where as printed
    it would run to its end without showing one; ``code`` itself otherwise."""
    spec = topic.replay
    if spec is None or not code or topic.name not in READS:
        return code
    if not isinstance(exc, Exception):
        return code
    from servelab.checkpoints import checkpoint  # the checkpoints import the grading package

    try:
        reference = checkpoint(topic.name, step)
        with redirect_stdout(io.StringIO()):
            # a learner's exception's own text is not read: its __str__ may never return
            said = str(exc) if isinstance(exc, ProbeFailed | InvariantViolation) else ""
            return _ended(topic.name, spec, code, impl, reference, said)
    except Exception:  # a failure to find the read never hides the check's report
        return code


def _ended(
    topic: str, spec: TopicReplay, code: str, impl: Any, reference: Any, message: str
) -> str:
    names = graded_names(spec, impl)

    def namespace(classes: Any) -> dict[str, Any]:
        return {names.get(k, k): v for k, v in spec.namespace(classes).items()}

    def shows(lines: list[str]) -> bool:
        """Pasted, ``lines`` raise on yours alone or end in a value not the reference's."""
        try:
            theirs = _run(lines, namespace(reference))
        except _Raised:
            return False
        try:
            mine = _run(lines, namespace(impl))
        except _Raised:
            return True
        return plain(mine) != plain(theirs)

    def raises(lines: list[str], classes: Any) -> bool:
        try:
            _run(lines, namespace(classes))
        except _Raised:
            return True
        return False

    lines = code.splitlines()
    try:
        mine = _run(lines, namespace(impl))
    except _Raised:
        return code  # pasted, it stops at the line that raised
    try:
        theirs = _run(lines, namespace(reference))
    except _Raised:
        return code  # the reference raises where yours did not: the check says so
    if plain(mine) != plain(theirs):
        return code  # its last value differs already
    bare = _unsuppressed(lines)
    if bare is not None and not raises(bare, impl) and raises(bare, reference):
        return "\n".join(bare)  # yours returns where the reference raises
    for program in _with_reads_between(topic, lines):
        if program is not lines and shows(program):
            return "\n".join(program)
        for read in _differing(topic, program, namespace(impl), namespace(reference), message):
            if shows([*program, read]):  # each read on a fresh run: a read may change yours
                return "\n".join([*program, read])
    return code


def _differing(
    topic: str, lines: list[str], mine_ns: dict[str, Any], theirs_ns: dict[str, Any], message: str
) -> list[str]:
    """The reads whose values differ after ``lines`` (those the message quotes first)."""
    try:
        _run(lines, mine_ns)
        _run(lines, theirs_ns)
    except _Raised:
        return []
    differing: list[tuple[str, Any]] = []
    for read in _candidates(topic, lines):
        try:
            want = _read(read, theirs_ns)
        except _Raised:
            continue  # a read the reference cannot make here
        try:
            got = _read(read, mine_ns)
        except _Raised:
            differing.append((read, None))  # pasted, the read raises on yours alone
            continue
        if isinstance(got, _DATA) and isinstance(want, _DATA) and plain(got) != plain(want):
            differing.append((read, got))
    quoted = [read for read, got in differing if _quoted(got, message)]
    return [*quoted, *(read for read, _ in differing if read not in quoted)][:3]


def _quoted(value: Any, message: str) -> bool:
    """Whether ``message`` quotes ``value`` as the check writes it."""
    form = repr(value)
    return value is not None and len(form) > 2 and form in message


def _with_reads_between(topic: str, lines: list[str]) -> list[list[str]]:
    """The program as it is, then with the machine's reads after each call but the last, then
    after the last too: what ran where a read of yours changes the object."""
    reads = BETWEEN.get(topic)
    if not reads or len(lines) < 2:
        return [lines]
    calls = {line for line in lines[1:] if not line.startswith(("from ", "import ", "#"))}
    between = [lines[0]]
    for line in lines[1:-1]:
        between += [line, *reads] if line in calls else [line]
    return [lines, [*between, lines[-1]], [*between, lines[-1], *reads]]


def _unsuppressed(lines: list[str]) -> list[str] | None:
    """The program with its last line, a refusal written under ``suppress``, bare (and the
    import dropped where no other line needs it); None when the last line is not one."""
    match = re.match(r"^with suppress\([^)]*\):\s*", lines[-1])
    if match is None:
        return None
    bare = [*lines[:-1], lines[-1][match.end() :]]
    if not any(line.startswith("with suppress(") for line in bare):
        bare = [line for line in bare if line != SUPPRESS_IMPORT]
    return bare
