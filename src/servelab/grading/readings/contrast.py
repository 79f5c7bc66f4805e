"""Neighbouring calls: the condition under which the learner's method and the reference's part.

The first diverging call shows *that* yours and the reference differ, not *when*. Here the same
call is repeated from the same state, by both methods, with one argument changed: a number one
or a few either side, a key that is in no field or one that is. Where they agree at every
neighbour but this one, or where each side's outcome switches (returned to raised, True to
False) at a different number, or where a key already stored and a new one part them, the hint
says so in one sentence. It is a fact of the experiment on the learner's own code: the range
tried is named, and nothing is said when the pattern is not clean, when any neighbour cannot run
or when the object cannot be copied. Bounded by counts (calls, lines), so the same failure gets
the same sentence on any machine. A relation ("where `n_tokens` (1) equals `num_free` (1)")
is said only once a second state confirms it (the parting point moves with the quantity): a
tiny state makes true coincidences that lead the wrong way.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import io
import math
import re
import types
from collections.abc import Iterator, Sequence
from contextlib import redirect_stdout
from dataclasses import dataclass
from typing import Any

from servelab.grading.graft import _split
from servelab.grading.localise import Divergence, Skeleton, _plain_args, agree, state_before
from servelab.grading.readings.kinds import block_size_of
from servelab.grading.replay import LINE_TIMEOUT_S, LINES_PER_CALL, OutOfLines, line_budget
from servelab.testing.core import ImplementationHung, hang_guard

__all__ = ["MAX_TRIES", "agrees_near", "appended", "condition", "second_results"]

#: Argument variants tried per report; each runs your method and the reference's once.
MAX_TRIES = 16
#: How far either side of a number the scan for switch points goes.
SCAN = 4
#: Entries in the state before the call above which no experiment is run (its cost grows).
MAX_ENTRIES = 256
#: An int argument this large is an id or a hash, not a count: no scan around it.
MAX_COUNT = 1 << 20
#: Lines all the neighbouring calls of one report may execute together.
MAX_LINES = 2 * LINES_PER_CALL
#: Programs built with another number replayed, at most, to confirm a relation.
MAX_VARIANTS = 4

_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


class _Stop(Exception):
    """A neighbour could not run (no copy, out of lines, out of tries): say nothing."""


@dataclass(frozen=True)
class _Trial:
    """One variant of the call: whether both sides agree, and each side's outcome in words."""

    agree: bool
    mine: str
    theirs: str


def _label(kind: str, value: Any) -> str:
    """An outcome as a switch reads it: "raises OutOfBlocks", "returns True", "returns None"
    (a miss, often), "returns" (any other value)."""
    if kind == "raised":
        return f"raises {type(value).__name__}"
    if isinstance(value, bool) or value is None:
        return f"returns {value}"
    return "returns"


class _Experiment:
    """Runs a variant of the call by both methods, each on its own copy of the state before."""

    def __init__(self, skeleton: Skeleton, d: Divergence) -> None:
        self.skeleton = skeleton
        self.d = d
        self.name = _split(d.method)[1]
        self.graded = self.name not in skeleton.ungraded_returns
        self.tries = 0

    def _call(self, obj: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[str, Any]:
        """One side's call, quiet (a learner's print) and bounded in lines and in time (a
        learner's sleep)."""
        try:
            with (
                redirect_stdout(io.StringIO()),
                hang_guard(self.d.call, LINE_TIMEOUT_S),
                line_budget(LINES_PER_CALL),
            ):
                return ("returned", getattr(obj, self.name)(*args, **kwargs))
        except Exception as exc:
            return ("raised", exc)
        except (OutOfLines, ImplementationHung):
            raise _Stop from None

    def trial(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Trial:
        if self.tries >= MAX_TRIES:
            raise _Stop
        self.tries += 1
        try:
            mine_obj, margs, mkwargs = copy.deepcopy((self.d.subject, args, kwargs))
            their_obj, targs, tkwargs = copy.deepcopy((self.d.subject, args, kwargs))
            their_obj.__class__ = self.d.reference_class
        except Exception:
            raise _Stop from None
        mine = self._call(mine_obj, margs, mkwargs)
        theirs = self._call(their_obj, targs, tkwargs)
        same = agree(
            self.skeleton,
            (mine, mine_obj, _plain_args(margs, mkwargs)),
            (theirs, their_obj, _plain_args(targs, tkwargs)),
            graded=self.graded,
        )
        return _Trial(same, _label(*mine), _label(*theirs))


# ----------------------------------------------------------------------------- the arguments


def _parameters(subject: Any, name: str, count: int) -> list[str]:
    """The names of the learner's method's first ``count`` parameters after ``self``."""
    for cls in type(subject).__mro__:
        fn = vars(cls).get(name)
        if isinstance(fn, types.FunctionType) and not fn.__code__.co_flags & inspect.CO_VARARGS:
            names = list(inspect.signature(fn).parameters)[1:]
            return [names[i] if i < len(names) else f"argument {i + 1}" for i in range(count)]
    return [f"argument {i + 1}" for i in range(count)]


def _collections(before: dict[str, Any]) -> dict[str, Any]:
    """The before-state's collection fields, by name (step outputs left out, and a field
    whose reading raised: its marker, ("unreadable", "TypeError"), holds no keys)."""
    return {
        k: v
        for k, v in before.items()
        if isinstance(v, list | tuple | set | frozenset | dict)
        and not k.startswith("out.")
        and not (isinstance(v, tuple) and len(v) == 2 and v[0] == "unreadable")
    }


def _scalars(before: dict[str, Any]) -> list[Any]:
    """The before-state's string fields' values (a hand on a key holds that key)."""
    return [v for k, v in before.items() if isinstance(v, str) and not k.startswith("out.")]


def _holders(before: dict[str, Any], key: str) -> list[str]:
    """The fields that hold ``key``, as an entry or a dict's key. Only a string is read as a
    key: an int in a field may be a block id, a sequence id or a count all at once."""
    found = []
    for name, value in _collections(before).items():
        try:
            held = key in value
        except TypeError:
            held = False
        if held:
            found.append(name)
    return found


def _absent_keys(d: Divergence, key: str, count: int = 2) -> list[str]:
    """Keys that appear nowhere in the object, not even in a private field."""
    try:
        seen = repr(vars(d.subject)) + repr(d.before)
    except Exception:
        return []
    pool = [*"cdefghxyz", *(f"k{i}" for i in range(9))]
    return [k for k in pool if repr(k) not in seen and k != key][:count]


def _present_keys(before: dict[str, Any], key: str, count: int = 2) -> list[tuple[str, str]]:
    """Keys already held by a field, with the field that holds them."""
    found: list[tuple[str, str]] = []
    for name, value in _collections(before).items():
        for entry in value:
            if isinstance(entry, str) and entry != key and entry not in [f[0] for f in found]:
                found.append((entry, name))
    return found[:count]


def _with(args: tuple[Any, ...], kwargs: dict[str, Any], at: int | str, value: Any) -> Any:
    if isinstance(at, int):
        return (*args[:at], value, *args[at + 1 :]), kwargs
    return args, {**kwargs, at: value}


def _fields_list(names: Sequence[str]) -> str:
    return " and ".join(f"`{n}`" for n in names)


def _keys_list(keys: Sequence[Any]) -> str:
    return ", ".join(repr(k) for k in keys)


def _shown_outcome(outcome: str) -> str:
    """A divergence's outcome ("returned None", "raised OutOfBlocks") as a trial labels one
    (:func:`_label`)."""
    if outcome.startswith("raised "):
        return "raises " + outcome[len("raised ") :]
    shown = outcome[len("returned ") :]
    return f"returns {shown}" if shown in ("None", "True", "False") else "returns"


def _by_key(exp: _Experiment, at: int | str, key: str, d: Divergence) -> str | None:
    """A key already held against one in no field (or the reverse): do they part on that?"""
    holders = _holders(d.before, key)
    if not holders and key in _scalars(d.before):
        return None  # a field such as the hand holds it: "a key in no field" would be false
    others = _absent_keys(d, key) if holders else [k for k, _ in _present_keys(d.before, key)]
    if not others:
        return None
    trials = [exp.trial(*_with(d.args, d.kwargs, at, k)) for k in others]
    if not all(_returned(t) for t in trials):
        return None  # agreeing by refusing the other key on both sides says nothing of this one
    if any(t.theirs != _shown_outcome(d.theirs[0]) for t in trials):
        # the reference answers the other key otherwise (a stored key's early return where a
        # new one misses): agreeing there says nothing of what parts the two at this key
        return None
    if holders:
        return (
            f"yours and the reference part for a key already in {_fields_list(holders)} "
            f"({key!r}); for a key in no field ({_keys_list(others)}) they agree"
        )
    where = sorted({n for _, n in _present_keys(d.before, key)})
    return (
        f"yours and the reference part for a key in no field ({key!r}); for one already in "
        f"{_fields_list(where)} ({_keys_list(others)}) they agree"
    )


# ----------------------------------------------------------------------------- the numbers


def _block_size(subject: Any) -> int | None:
    """The block size, when it is one a number can be a multiple of (an int above 1)."""
    size = block_size_of(subject)
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 1 else None


def _switch(labels: Sequence[str]) -> tuple[int, str, str] | None:
    """Where a run of outcomes switches once, from one label to another: (index, from, to)."""
    cuts = [i for i in range(1, len(labels)) if labels[i] != labels[i - 1]]
    if len(cuts) != 1:
        return None
    return cuts[0], labels[0], labels[-1]


@dataclass(frozen=True)
class _Relation:
    """``v`` (or the blocks it needs: ``size``) equals ``q``, the value of a field of the state
    before the call or of another argument (``at``, its place in the call; None for a field)."""

    said: str
    name: str
    q: int
    v: int
    size: int | None
    at: int | str | None

    def point(self, w: int) -> int:
        """Where the parting point would be if it moves with the quantity, at its value ``w``."""
        return w if self.size is None else self.v + (w - self.q) * self.size


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _relation(
    d: Divergence, name: str, v: int, args: dict[str, tuple[int | str, Any]]
) -> _Relation | None:
    """A quantity of the state before the call, or another of its arguments, that equals ``v``
    (or the blocks ``v`` tokens need): one int field or argument; None when none or several do
    (a collection's length is left out: it equals a small number too often to mean much)."""
    if v == 0:
        return None
    size = _block_size(d.subject)
    quantities: list[tuple[str, int, int | None]] = [(f"`{name}` ({v})", v, None)]
    if size is not None:
        said = f"ceil(`{name}` / block_size) ({math.ceil(v / size)})"
        quantities.append((said, -(-v // size), size))
    ints = {k: x for k, x in d.before.items() if _int(x) and not k.startswith("out.")}
    ints.update((k, x) for k, (_, x) in args.items() if _int(x))
    for said, q, per in quantities:
        hits = [k for k, x in ints.items() if x == q]
        if len(hits) == 1:
            at = args[hits[0]][0] if hits[0] in args else None
            return _Relation(f"{said} equals `{hits[0]}` ({q})", hits[0], q, v, per, at)
        if len(hits) > 1:
            return None
    return None


def _keyed(before: dict[str, Any], n: int) -> frozenset[str]:
    """The dict fields that hold ``n`` as a key (a sequence id, a block id)."""
    return frozenset(k for k, x in _collections(before).items() if isinstance(x, dict) and n in x)


def _returned(trial: _Trial) -> bool:
    """Both sides agree by returning (not by refusing the value on both sides alike)."""
    return trial.agree and not trial.mine.startswith("raises")


def _span(points: Sequence[int], v: int) -> str:
    """The numbers tried, in words: "from 0 to 8", or "from 0 to 8 and at 16"."""
    run = [p for p in points if abs(p - v) <= SCAN]
    extra = [str(p) for p in points if p not in run]
    said = f"from {run[0]} to {run[-1]}"
    return f"{said} and at {' and '.join(extra)}" if extra else said


def _by_number(
    exp: _Experiment,
    at: int | str,
    label: str,
    v: int,
    d: Divergence,
    others: dict[str, tuple[int | str, Any]],
) -> _Said | None:
    """Scan a number argument either side of ``v``: a single point where they part, or each
    side's outcome switching at a different number. ``others``: the call's other arguments,
    by name, with their places in the call."""
    low = 0 if v >= 0 else v - SCAN
    points = list(range(max(low, v - SCAN), v + SCAN + 1))
    size = _block_size(d.subject)
    if size is not None:
        points = sorted({*points, *(p for p in (v - size, v + size) if p >= low)})
    near = [p for p in (v - 1, v + 1) if p in points]
    trials: dict[int, _Trial] = {v: exp.trial(*_with(d.args, d.kwargs, at, v))}
    if trials[v].agree:
        return None  # the experiment does not reproduce the call: say nothing
    for p in near:
        trials[p] = exp.trial(*_with(d.args, d.kwargs, at, p))
    if all(not trials[p].agree and trials[p] == trials[v] for p in near):
        return None  # this argument does not decide it, near here
    for p in points:
        if p not in trials:
            trials[p] = exp.trial(*_with(d.args, d.kwargs, at, p))
    differ = [p for p in points if not trials[p].agree]
    scanned = f"tried with {label} {_span(points, v)}"
    mine = _switch([trials[p].mine for p in points])
    theirs = _switch([trials[p].theirs for p in points])
    switched = short = None
    if mine and theirs and mine[1:] == theirs[1:] and mine[0] != theirs[0]:
        a, b = points[mine[0]], points[theirs[0]]
        gap = abs(a - b)
        how = ("one" if gap == 1 else str(gap)) + (" too early" if a < b else " too late")
        short = f"yours {mine[2]} from {a} on, the reference from {b} on"
        switched = f"yours {mine[2]} from {label} = {a} on, the reference from {b} on: {how}"
    if short is None and any(_keyed(d.before, p) != _keyed(d.before, v) for p in near):
        # v is an id some field holds and a neighbour is not (or the reverse): what parts them
        # may be that, not the number; only a switch of outcome at the number says more
        return None
    if differ == [v] and any(_returned(trials[p]) for p in near):
        # (agreeing only by refusing every other number on both sides says nothing of this one)
        agree = " and ".join(str(p) for p in near)
        said = f"{scanned}, yours and the reference part only at {v} (they agree at {agree})"
        relation = _relation(d, label.strip("`"), v, others)
        return _Said(said, f": {short}" if short else "", relation, at)
    multiples = [p for p in points if size is not None and p % size == 0]
    between = [trials[p] for p in points if p not in multiples]
    if len(differ) > 1 and differ == multiples and any(_returned(t) for t in between):
        shown = ", ".join(map(str, differ[:-1])) + f" and {differ[-1]}"
        return _Said(
            f"{scanned}, yours and the reference part only at {shown}, the multiples of "
            f"block_size ({size}) among them"
        )
    run = list(range(differ[0], differ[-1] + 1)) if differ else []
    if switched and differ and differ == run and points[0] < differ[0] and differ[-1] < points[-1]:
        return _Said(f"{scanned}, {switched}")
    return None


# ----------------------------------------------------------------------------- a relation confirmed


@dataclass(frozen=True)
class _Said:
    """A sentence, and a relation to put in it (after ``head``) once another state confirms
    it; ``at``: the place in the call of the number scanned."""

    head: str
    tail: str = ""
    relation: _Relation | None = None
    at: int | str = 0

    def text(self, confirmed: bool) -> str:
        where = f", where {self.relation.said}" if confirmed and self.relation else ""
        return f"{self.head}{where}{self.tail}"


def _variants(program: str) -> list[str]:
    """The program with one number of its first line (the one that builds the object: a
    pool's size, a capacity) raised by one or two: the same calls from another state."""
    lines = program.splitlines()
    if not lines:
        return []
    found = []
    for m in _NUMBER.finditer(lines[0]):
        for step in (1, 2):
            first = f"{lines[0][: m.start()]}{int(m.group()) + step}{lines[0][m.end() :]}"
            found.append("\n".join([first, *lines[1:]]))
    return found[:MAX_VARIANTS]


def _second_states(skeleton: Skeleton, d: Divergence, rel: _Relation) -> Iterator[Divergence]:
    """The same call from states where the quantity the relation names has another value:
    the other argument it names one higher, or the program built with another number."""
    if rel.at is not None:
        args, kwargs = _with(d.args, d.kwargs, rel.at, rel.q + 1)
        yield dataclasses.replace(d, args=args, kwargs=kwargs)
        return
    for program in _variants(d.program):
        with redirect_stdout(io.StringIO()):  # each line bounded in lines and time by the replay
            state = state_before(skeleton, d, program)
        if state is None:
            continue
        subject, args, kwargs, fields = state
        w = fields.get(rel.name)
        if isinstance(w, int) and _int(w) and w != rel.q and rel.point(w) > 0:
            yield dataclasses.replace(d, subject=subject, args=args, kwargs=kwargs, before=fields)


def _quantity(d: Divergence, rel: _Relation) -> int:
    """The relation's quantity in the state of ``d``."""
    if rel.at is None:
        return int(d.before[rel.name])
    return int(d.args[rel.at] if isinstance(rel.at, int) else d.kwargs[rel.at])


def _moves(skeleton: Skeleton, d: Divergence, said: _Said, rel: _Relation) -> bool:
    """Whether, from the state of ``d``, yours and the reference part at the point the
    relation predicts alone (its neighbours agree, one of them by returning), and no longer
    at the first state's point."""
    p = rel.point(_quantity(d, rel))
    if p <= 0 or p == rel.v:
        return False
    exp = _Experiment(skeleton, d)
    trials = {x: exp.trial(*_with(d.args, d.kwargs, said.at, x)) for x in (p - 1, p, p + 1, rel.v)}
    near = (trials[p - 1], trials[p + 1])
    return (
        not trials[p].agree
        and all(t.agree for t in near)
        and any(_returned(t) for t in near)
        and trials[rel.v].agree
    )


def _confirmed(skeleton: Skeleton, d: Divergence, said: _Said) -> bool:
    """Whether the relation holds beyond the first state: the parting point moves with the
    quantity it names, from the first second state found (a tiny state makes coincidences:
    a pool of one block, two fields both 30). Unconfirmed, it is left out of the sentence."""
    rel = said.relation
    if rel is None:
        return False
    try:
        for second in _second_states(skeleton, d, rel):
            with line_budget(MAX_LINES):
                return _moves(skeleton, second, said, rel)
    except (_Stop, OutOfLines):
        return False
    except Exception:
        return False
    return False


def second_results(skeleton: Skeleton, d: Divergence) -> tuple[Any, Any, Any] | None:
    """The values yours and the reference return from the first second state that parts
    them (the program built with another number, :func:`_variants`), with the block size
    there; None when no second state does, or one cannot run."""
    if d.subject is None or d.reference_class is None:
        return None
    try:
        with line_budget(MAX_LINES):
            for program in _variants(d.program):
                with redirect_stdout(io.StringIO()):
                    state = state_before(skeleton, d, program)
                if state is None:
                    continue
                subject, args, kwargs, _ = state
                second = dataclasses.replace(d, subject=subject, args=args, kwargs=kwargs)
                exp = _Experiment(skeleton, second)
                mine_obj, their_obj = copy.deepcopy(subject), copy.deepcopy(subject)
                their_obj.__class__ = d.reference_class
                mine = exp._call(mine_obj, *copy.deepcopy((args, kwargs)))
                theirs = exp._call(their_obj, *copy.deepcopy((args, kwargs)))
                if mine[0] != "returned" or theirs[0] != "returned" or mine[1] == theirs[1]:
                    continue
                return mine[1], theirs[1], block_size_of(subject)
    except (_Stop, OutOfLines):
        return None
    except Exception:  # a learner's object in an unexpected shape: no second state
        return None
    return None


# ----------------------------------------------------------------------------- the sentence


def _size(before: dict[str, Any]) -> int:
    return sum(len(v) for v in _collections(before).values())


def _sentence(skeleton: Skeleton, d: Divergence) -> _Said | None:
    exp = _Experiment(skeleton, d)
    names = _parameters(d.subject, exp.name, len(d.args))
    slots: list[tuple[int | str, str, Any]] = [
        *((i, f"`{n}`", a) for i, (n, a) in enumerate(zip(names, d.args, strict=True))),
        *((k, f"`{k}`", a) for k, a in d.kwargs.items()),
    ]
    for at, _, value in slots:
        if isinstance(value, str):
            keyed = _by_key(exp, at, value, d)
            if keyed:
                return _Said(keyed)
    for at, label, value in slots:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) < MAX_COUNT:
            others = {n.strip("`"): (t, a) for t, n, a in slots if t != at}
            found = _by_number(exp, at, label, value, d, others)
            if found:
                return found
    return None


def condition(skeleton: Skeleton, d: Divergence | None) -> str | None:
    """The condition under which yours and the reference part on the call ``d``, in a
    sentence, or None when the experiment shows none cleanly (or cannot be run)."""
    if d is None or d.subject is None or d.reference_class is None or not d.args + tuple(d.kwargs):
        return None
    if _size(d.before) > MAX_ENTRIES:
        return None
    try:
        with line_budget(MAX_LINES):
            said = _sentence(skeleton, d)
    except (_Stop, OutOfLines):
        return None
    except Exception:  # a learner's object in an unexpected shape: no sentence
        return None
    if said is None:
        return None
    return said.text(said.relation is not None and _confirmed(skeleton, d, said))


def appended(hint: str | None, said: str | None) -> str | None:
    """``hint`` with the condition ``said`` after it, as its own sentence."""
    if hint is None or said is None:
        return hint
    stop = "" if hint.endswith(("?", ".")) else "."
    return f"{hint}{stop} {said[0].upper()}{said[1:]}"


# ----------------------------------------------------------------------------- a look-alike


def _near(d: Divergence) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The call's own arguments, then each one moved a little: a count one either side, a
    list empty or one entry shorter, a key in no field."""
    yield d.args, d.kwargs
    slots: list[tuple[int | str, Any]] = [*enumerate(d.args), *d.kwargs.items()]
    for at, value in slots:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) < MAX_COUNT:
            others: list[Any] = [value - 1, value + 1]
        elif isinstance(value, list | tuple):
            others = [type(value)(), type(value)(value[:-1])] if value else []
        elif isinstance(value, str):
            others = _absent_keys(d, value, 1)
        else:
            others = []
        for other in others:
            yield _with(d.args, d.kwargs, at, other)


def agrees_near(skeleton: Skeleton, d: Divergence | None, other: type) -> bool:
    """Whether ``other`` (the learner's class with the diverging method taken from a
    look-alike mistake) behaves as the learner's does on the diverging call and on calls
    next to it, each from the same state: a shared symptom elsewhere is no evidence that
    the look-alike's cause is this one. False when any call cannot be run."""
    if d is None or d.subject is None or _size(d.before) > MAX_ENTRIES:
        return False
    exp = _Experiment(skeleton, dataclasses.replace(d, reference_class=other))
    seen: list[Any] = []
    try:
        with line_budget(MAX_LINES):
            for args, kwargs in _near(d):
                if (args, kwargs) in seen:
                    continue
                seen.append((args, kwargs))
                if not exp.trial(args, kwargs).agree:
                    return False
    except (_Stop, OutOfLines):
        return False
    except Exception:  # a learner's object in an unexpected shape: no evidence
        return False
    return True
