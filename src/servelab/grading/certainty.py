"""Agreement a claim of certainty must earn: call by call, on every field, on many programs.

"Your policy behaves exactly like one that ..." is a claim about every program, yet a known
mistake and a slip nobody listed can agree on the failing program, on the fixed separating
ones and on their number and name variants, and still part on a state none of them reaches (a
sweep that clears every bit at a wrap, and one that falls back to the oldest key after a full
lap, part only where an unvisited key lies between the oldest and the hand). Before a claim,
the two are replayed once more, here, with every field the topic reads compared after each
call (the hidden ones too: pins, refcounts, the free list, queues, the hand, visited bits,
counters), on

- the failing program continued, after each of its calls, with every call it or the topic's
  separating programs make (their names put onto the failing program's), then a few seeded
  ones: the states next to the failing one, where a look-alike parts first;
- seeded programs of the calls the failing one makes, in random order and repeated: full
  laps, ties and repeated keys that a shrunk program never reaches.

The programs are chosen by generators seeded with their index: the same on every run.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Hashable, Sequence
from typing import Any

from servelab.grading.name_variants import _NAME
from servelab.grading.observe import Canon, frozen
from servelab.grading.replay import OutOfLines, TopicReplay, line_budget, replay

__all__ = ["SEEDED_PROGRAMS", "agrees_everywhere", "programs_around"]

#: Seeded programs of the failing program's calls, and the calls in each.
SEEDED_PROGRAMS = 20
SEEDED_CALLS = 12
#: Continuations after each prefix of the failing program, and the seeded calls after each.
CONTINUATIONS = 4
TAIL_CALLS = 3
#: Different calls the programs draw from, at most (the failing program's first).
VOCABULARY = 60
#: Lines of Python reading the fields after one call may run (a state no fixed program reaches
#: can send a learner's eviction_order round a loop), and the replays that may end hung before
#: the check gives up (no claim): each costs a budget of lines.
LINES_PER_READ = 20_000
HUNG_REPLAYS = 12
#: A key no program names, put beside the failing program's own.
FRESH = "zz"
_ASSIGNS = re.compile(r"^([A-Za-z_]\w*)\s*=[^=]")
_CLASS = re.compile(r"=\s*([A-Za-z_]\w*)\s*\(")
_NUMBER = re.compile(r"(?<![\w'\".])\d+(?![\w'\".])")


def number_variants(program: str, count: int) -> list[str]:
    """``count`` copies of ``program`` with its integer literals moved by one or drawn anew,
    each by a generator seeded with its index (as the number variants of a claim)."""
    out = []
    for i in range(count):
        rng = random.Random(i)

        def change(match: re.Match[str], rng: random.Random = rng) -> str:
            value = int(match.group())
            drawn = rng.randint(0, 2 * value + 8)
            return str(rng.choice([value, value + 1, max(0, value - 1), drawn]))

        out.append(_NUMBER.sub(change, program))
    return out


def _lines(program: str) -> list[str]:
    return [
        line.strip()
        for line in program.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def _split(spec: TopicReplay, program: str) -> tuple[list[str], list[str]]:
    """(the lines up to the one that builds the graded object, the calls after it)."""
    lines = _lines(program)
    subject = spec.subject
    if spec.subject_per_program:
        for line in lines:
            if (match := _ASSIGNS.match(line)) is not None:
                subject = match.group(1)
                break
    for i, line in enumerate(lines):
        match = _ASSIGNS.match(line)
        if match is not None and match.group(1) == subject:
            return lines[: i + 1], lines[i + 1 :]
    return [], lines


def _built(setup: Sequence[str]) -> str | None:
    """The class the last setup line builds."""
    match = _CLASS.search(setup[-1]) if setup else None
    return match.group(1) if match else None


def _renamed(line: str, names: Sequence[str], theirs: Sequence[str]) -> str:
    """``line`` with the quoted names of another program put onto ``names``, in order."""
    if not names or not theirs:
        return line
    swap = {n: names[i] if i < len(names) else f"{FRESH}{i}" for i, n in enumerate(theirs)}

    def put(match: re.Match[str]) -> str:
        name = swap.get(match.group(2), match.group(2))
        return f"{match.group(1)}{name}{match.group(1)}"

    return _NAME.sub(put, line)


def _names(text: str) -> list[str]:
    return sorted({m.group(2) for m in _NAME.finditer(text)})


def _vocabulary(spec: TopicReplay, program: str) -> tuple[list[str], list[str], list[str]]:
    """(the setup, the failing program's calls, every call the programs draw from)."""
    setup, calls = _split(spec, program)
    names = _names("\n".join(calls))
    found = list(dict.fromkeys(calls))
    for variant in number_variants(program, 3):
        found.extend(_split(spec, variant)[1])
    built = _built(setup)
    for text in spec.separating:
        their_setup, theirs = _split(spec, text)
        if built is None or _built(their_setup) != built:
            continue
        their_names = _names("\n".join(theirs))
        found.extend(_renamed(line, names, their_names) for line in theirs)
    for line in list(found):  # every call on every key, and on one more
        if len(_names(line)) == 1:
            found.extend(_renamed(line, [n], _names(line)) for n in (*names, FRESH))
    return setup, calls, list(dict.fromkeys(found))[:VOCABULARY]


def programs_around(spec: TopicReplay, program: str) -> list[str]:
    """The programs two implementations must agree on, beyond the failing and separating
    ones: the failing program continued after each of its calls, and seeded programs."""
    setup, calls, vocabulary = _vocabulary(spec, program)
    if not setup or not vocabulary:
        return []
    out = []
    turn = 0
    for k in range(len(calls) + 1):
        rng = random.Random(k)
        for _ in range(CONTINUATIONS):
            line = vocabulary[turn % len(vocabulary)]  # every call, after one prefix or another
            turn += 1
            tail = [rng.choice(vocabulary) for _ in range(TAIL_CALLS)]
            out.append("\n".join([*setup, *calls[:k], line, *tail]))
    for i in range(SEEDED_PROGRAMS):
        rng = random.Random(1000 + i)
        drawn = [rng.choice(vocabulary) for _ in range(SEEDED_CALLS)]
        out.append("\n".join([*setup, *drawn]))
    return out


def _fields(spec: TopicReplay, program: str) -> TopicReplay:
    """Every field of the graded object and its hidden detail, as one hashable value."""
    setup, _ = _split(spec, program)
    match = _ASSIGNS.match(setup[-1]) if setup else None
    subject = match.group(1) if match else spec.subject
    observe = spec.observe

    def seen(ns: dict[str, Any], canon: Canon) -> Hashable:
        obj = ns.get(subject)
        try:
            with line_budget(LINES_PER_READ) as spent:
                if obj is None:
                    return observe(ns, canon)
                fields = spec.fields(obj, canon) if spec.fields is not None else {}
                detail = spec.detail(obj) if spec.detail is not None else {}
                return (observe(ns, canon), frozen(fields), frozen(detail))
        except OutOfLines:
            if spent.left >= 0:
                raise  # an enclosing budget's, not this read's
            return ("hung",)

    return dataclasses.replace(spec, observe=seen)


def _common(a: list[Any], b: list[Any]) -> bool:
    """Equal replays; where one object keeps a hidden field the other lacks (a learner's own
    bookkeeping), that field is left out rather than counted as a difference."""
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        if not (_whole(x[1]) and _whole(y[1])):
            return False
        if x[0] != y[0] or x[1][0] != y[1][0]:
            return False
        for mine, theirs in ((x[1][1], y[1][1]), (x[1][2], y[1][2])):
            if not isinstance(mine, tuple) or not isinstance(theirs, tuple):
                if mine != theirs:
                    return False
                continue
            a_map, b_map = dict(_pairs(mine)), dict(_pairs(theirs))
            if any(a_map[k] != b_map[k] for k in a_map.keys() & b_map.keys()):
                return False
    return True


def _whole(seen: Any) -> bool:
    """An observation with the fields read (see :func:`_fields`)."""
    return isinstance(seen, tuple) and len(seen) == 3


def _pairs(value: tuple[Any, ...]) -> list[tuple[Any, Any]]:
    return [p for p in value if isinstance(p, tuple) and len(p) == 2]


def agrees_everywhere(spec: TopicReplay, program: str, impl: Any, other: Any) -> bool:
    """``impl`` and ``other`` agree call by call, on every field, on the failing and the
    separating programs and on :func:`programs_around` the failing one."""
    hung = 0
    for text in (program, *spec.separating, *programs_around(spec, program)):
        seen = _fields(spec, text)
        mine, theirs = replay(text, seen, impl), replay(text, seen, other)
        if not _common(mine, theirs):
            return False
        hung += any(_hung(x) for x in (*mine, *theirs))
        if hung > HUNG_REPLAYS:  # too costly to decide: no claim
            return False
    return True


def _hung(seen: Any) -> bool:
    """A line that never returned, or a read of the fields after it that never did."""
    return seen == ("hung",) or (
        isinstance(seen, tuple) and len(seen) == 2 and seen[1] == ("hung",)
    )
