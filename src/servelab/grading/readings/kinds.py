"""The kinds of difference every topic shares, read from the first diverging call alone.

A topic's reader knows its methods' rules; when none of its readings fits, the difference still
has a kind a learner can act on: a number off by one or by a unit's factor (1000, 1024, 1e9, 8),
the same entries in another order (and which end moved), an entry missing from or left in a
collection, an entry put in one collection where the reference puts it in another, a field
changed where the reference changes a different one, or left as it was. These readings state
what the call shows, and ask about a cause; they claim one only where a copy proves it (a
change counted twice: the call run again, and a method it calls seen to make the change again).
"""

from __future__ import annotations

import ast
import copy
import functools
import math
import re
import sys
from collections.abc import Callable
from typing import Any

from servelab.grading.readings.difference import Difference, failed_call, other_error
from servelab.grading.readings.kinds_offset import offset_holds
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["block_size_of", "count_moved", "factor_words", "kind_reading", "number_words"]

#: Factors that a unit slip leaves between two numbers, and the slips that leave them.
FACTORS: tuple[tuple[float, str, str], ...] = (
    (1e9, "1e9", "bytes vs GB, or FLOPs vs GFLOPs"),
    (1024**3, "1024^3", "bytes vs GiB"),
    (1e6, "1e6", "bytes vs MB, or seconds vs microseconds"),
    (1024**2, "1024^2", "bytes vs MiB"),
    (1e3, "1000", "seconds vs milliseconds, or bytes vs KB"),
    (1024, "1024", "bytes vs KiB"),
    (8, "8", "bits vs bytes"),
    (2, "2", "a factor of 2 missing or doubled"),
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def factor_words(mine: float, theirs: float) -> str | None:
    """``mine`` as a unit's factor of ``theirs`` ("1000 times the reference's: seconds vs
    milliseconds ...?"), or None when the ratio is none of :data:`FACTORS`."""
    if mine == 0 or theirs == 0 or mine == theirs:
        return None
    ratio = mine / theirs
    for factor, name, slips in FACTORS:
        if math.isclose(ratio, factor, rel_tol=1e-6):
            return f"{name} times the reference's: a unit slip ({slips})?"
        if math.isclose(ratio, 1 / factor, rel_tol=1e-6):
            return f"1/{name} of the reference's: a unit slip ({slips})?"
    return None


def _block_factor(a: float, b: float, block_size: Any) -> bool:
    """Whether ``a`` is ``block_size`` times ``b``, or ``b`` that many times ``a``."""
    sized = isinstance(block_size, int) and not isinstance(block_size, bool) and block_size > 1
    return bool(sized and a and b and (a * block_size == b or b * block_size == a))


def number_words(mine: Any, theirs: Any, block_size: Any = None, second: Any = None) -> str | None:
    """How two numbers differ when the difference has a kind: off by one, a unit's factor, or
    ``block_size`` (blocks counted where tokens belong, or the other way round). A ratio of
    ``block_size`` is a unit's factor only when ``second`` (yours, the reference's and the
    block size, from a second state) shows it again the same way round: in one small state
    a count of free blocks is as likely half another count by chance. Unconfirmed, such a
    ratio has no kind (not even off by one: 1 and 2 are both)."""
    a, b = _number(mine), _number(theirs)
    if a is None or b is None or a == b:
        return None
    if _block_factor(a, b, block_size):
        if not _confirmed_factor(a < b, second):
            return None
        way = "1/" if a < b else ""
        return (
            f"{way}block_size ({block_size}) times the reference's: a count of blocks "
            "where tokens belong, or of tokens where blocks belong?"
        )
    if isinstance(mine, int) and isinstance(theirs, int) and abs(mine - theirs) == 1:
        more = "one more" if mine > theirs else "one less"
        return f"{more} than the reference's"  # a cause only where offset_holds proves it
    return factor_words(a, b)


def _factor_shown(a: Any, b: Any, block_size: Any) -> bool:
    """Two numbers a block size apart (which one state cannot say is a unit's factor)."""
    x, y = _number(a), _number(b)
    return x is not None and y is not None and _block_factor(x, y, block_size)


def _confirmed_factor(smaller: bool, second: Any) -> bool:
    """Whether ``second`` (yours, the reference's, the block size) parts by the block size
    again, yours the smaller (``smaller``) or the larger as in the first state."""
    if second is None:
        return False
    a, b = _number(second[0]), _number(second[1])
    if a is None or b is None or a == b:
        return False
    return _block_factor(a, b, second[2]) and (a < b) == smaller


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _unread(value: Any) -> bool:
    """A field whose reading raised (an :class:`~servelab.grading.observe.Unreadable`, or
    the pair it is once replayed)."""
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and value[0] == "unreadable"
        and isinstance(value[1], str)
    )


def _entries(value: Any) -> list[Any] | None:
    """A collection field's entries (a dict's keys), or None for a field that is no collection
    (nor one whose reading raised: an unreadable field has no entries to compare)."""
    if _unread(value):
        return None
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, dict):
        return list(value)
    return None


def _multiset_minus(a: list[Any], b: list[Any]) -> list[Any]:
    """The entries of ``a`` that ``b`` lacks, counting repeats."""
    rest, out = list(b), []
    for x in a:
        if x in rest:
            rest.remove(x)
        else:
            out.append(x)
    return out


def _order(
    name: str, mine: list[Any], theirs: list[Any], before: list[Any] | None = None
) -> str | None:
    """Same entries, another order: which entry went to which end. Two entries that swapped
    ends read both ways (yours put the one at the back, or the other at the front): the one
    the call added (not in ``before``) is the one said; with both added or neither, only the
    reversal is."""
    if len(mine) < 2 or mine == theirs or sorted(map(repr, mine)) != sorted(map(repr, theirs)):
        return None
    back = mine[-1] == theirs[0] and mine[:-1] == theirs[1:]
    front = mine[0] == theirs[-1] and mine[1:] == theirs[:-1]
    if back and front:  # two entries swapped: say the one the call added, else neither
        added = [x not in (before or []) for x in (theirs[0], mine[0])]
        back, front = added == [True, False], added == [False, True]
    if back:
        return (
            f"yours put {_shown(theirs[0])} at the back of `{name}`; the reference puts it at "
            "the front"
        )
    if front:
        return (
            f"yours put {_shown(mine[0])} at the front of `{name}`; the reference puts it at "
            "the back"
        )
    if mine == theirs[::-1] and len(mine) > 2:  # two entries swapped say nothing of a reversal
        return f"yours left `{name}` in the reverse of the reference's order"
    return (
        f"yours left the same entries in `{name}` in another order ({_shown(mine)}, not "
        f"{_shown(theirs)})"
    )


_Missing = object()


def _read(d: Difference, obj: Any, name: str, key: Any) -> Any:
    """Field ``name`` of ``obj`` (its value at ``key`` for a mapping, absent 0), as the topic
    shows it; :data:`_Missing` when it cannot be read."""
    try:
        value = d.fields(obj).get(name, _Missing) if d.fields is not None else _Missing
        if key is not _Missing and isinstance(value, dict):
            value = value.get(key, 0)
    except Exception:
        return _Missing
    return value if _number(value) is not None else _Missing


def _counted_again(d: Difference, name: str, key: Any, step: float) -> str | None:
    """The method, called by yours on the same object (a ``super()`` call included), that
    moves field ``name`` (at ``key``) by the reference's whole ``step`` while the call's own
    lines move it by that step too: the call run again on a copy, each call it makes timed
    by the field. None when that is not what the copy shows (a step of 2 written as such,
    the same method called twice)."""
    if d.subject is None or d.fields is None:
        return None
    try:
        obj = copy.deepcopy(d.subject)
    except Exception:
        return None
    if _read(d, obj, name, key) is _Missing:
        return None
    top: list[Any] = []
    through: set[int] = set()  # comprehensions of the call's own lines: looked through
    open_calls: dict[int, tuple[str, Any]] = {}
    moves: list[tuple[str, Any]] = []

    def watch(frame: Any, event: str, _: Any) -> None:
        # a profiler's own calls are not profiled: the fields read here are not the call's
        if event == "call" and frame.f_locals.get("self") is obj:
            direct = top and (frame.f_back is top[0] or id(frame.f_back) in through)
            if not top and frame.f_code.co_name == d.method:
                top.append(frame)
            elif direct and frame.f_code.co_name.startswith("<"):
                through.add(id(frame))  # <listcomp>, <genexpr>: no method a learner named
            elif direct:
                open_calls[id(frame)] = (frame.f_code.co_name, _read(d, obj, name, key))
        elif event == "return" and id(frame) in through:
            through.discard(id(frame))
        elif event == "return" and id(frame) in open_calls:
            called, was = open_calls.pop(id(frame))
            now = _read(d, obj, name, key)
            moves.append((called, _Missing if _Missing in (was, now) else now - was))

    was = _read(d, obj, name, key)
    before = sys.getprofile()
    try:
        with line_budget(LINES_PER_CALL):
            sys.setprofile(watch)
            try:
                getattr(type(obj), d.method)(obj, *d.args)
            finally:
                sys.setprofile(before)
        total = _read(d, obj, name, key) - was
    except (Exception, OutOfLines):
        return None
    inner = [(called, m) for called, m in moves if m]
    if total != 2 * step or any(m is _Missing for _, m in inner):
        return None
    again = sorted({called for called, m in inner if m == step})
    if len(again) != 1 or sum(m for _, m in inner) != step:
        return None
    if again[0] == d.method:
        return f"the `{again[0]}` it calls through super()"
    return f"`{again[0]}`, which it calls"


def _moves_again(d: Difference, name: str, key: Any, step: float) -> bool:
    """Whether your call, run once more on a copy of the object as yours leaves it, moves
    field ``name`` (at ``key``) by ``step`` again: a sign written the other way does, a
    value reset or scaled does not."""
    obj = d.after() if d.subject is not None and d.fields is not None else None
    if obj is None:
        return False
    was = _read(d, obj, name, key)
    try:
        with line_budget(LINES_PER_CALL):
            getattr(obj, d.method)(*d.args)
    except (Exception, OutOfLines):
        return False
    now = _read(d, obj, name, key)
    return _Missing not in (was, now) and now - was == step


def _value(
    label: str,
    before: Any,
    mine: Any,
    theirs: Any,
    again: Callable[[], str | None] | None = None,
    back: Callable[[float], bool] | None = None,
) -> str:
    """One value yours left other than the reference: not updated, updated where the
    reference leaves it, moved twice as far or the other way, off by one, a unit's factor.
    Twice as far is said to be counted twice only where ``again`` (the method that moved it
    a second time, on a copy) names the method that did it; the other way is said to be a
    sign written the other way only where ``back`` (the call run again on a copy) moves it
    the same wrong step again."""
    if mine == before:
        return f"yours left {label} at {_shown(mine)}; the reference changes it to {_shown(theirs)}"
    if theirs == before:
        return (
            f"yours changed {label} to {_shown(mine)}; the reference leaves it at {_shown(before)}"
        )
    said = f"yours left {label} at {_shown(mine)}, the reference at {_shown(theirs)}"
    if _number(before) is not None and _number(mine) is not None and _number(theirs) is not None:
        step_mine, step_theirs = mine - before, theirs - before
        if step_mine == 2 * step_theirs:
            moved = (
                f"yours moved {label} from {_shown(before)} to {_shown(mine)}, the reference to "
                f"{_shown(theirs)}"
            )
            twice = again() if again is not None else None
            if twice is None:  # a step of 2 written as such is as likely: the arithmetic only
                return f"{moved}: twice as far"
            return f"{moved}: counted twice, once in this method's own lines and again in {twice}"
        if step_mine == -step_theirs:
            moved = (
                f"yours moved {label} from {_shown(before)} to {_shown(mine)}, the reference to "
                f"{_shown(theirs)}: the same step the other way"
            )
            if back is None or not back(step_mine):
                return moved  # a reset or a scaled value can land there once: no cause
            signs = ("-", "+") if step_mine < 0 else ("+", "-")
            return f"{moved}, and again on a second call: {signs[0]} where {signs[1]} belongs"
    kind = number_words(mine, theirs)
    return f"{said}: {kind}" if kind else said


def _dict_values(name: str, d: Difference) -> str | None:
    """A dict field whose keys agree and one value differs (a count: absent is 0)."""
    mine, theirs, before = d.mine.get(name), d.theirs.get(name), d.before.get(name)
    if not isinstance(mine, dict) or not isinstance(theirs, dict) or set(mine) != set(theirs):
        return None
    for key in mine:
        if mine[key] != theirs[key]:
            absent = 0 if _number(mine[key]) is not None else None
            was = before.get(key, absent) if isinstance(before, dict) else absent
            numbers = _number(theirs[key]) is not None and _number(was) is not None
            step, at = (theirs[key] - was if numbers else 0), key
            return _value(
                f"`{name}` of {_shown(key)}",
                was,
                mine[key],
                theirs[key],
                functools.partial(_counted_again, d, name, at, step),
                functools.partial(_moves_again, d, name, at),
            )
    return None


def _moved(d: Difference, names: list[str]) -> str | None:
    """An entry yours put in one list where the reference puts it in another (``finished``
    for ``preempted``); lists only, as a dict's keys and a list's entries name different
    things (a sequence id, a block id)."""
    for name in names:
        mine, theirs = d.mine.get(name), d.theirs.get(name)
        if not isinstance(mine, list) or not isinstance(theirs, list):
            continue
        for x in _multiset_minus(mine, theirs):
            for other in names:
                om, ot = d.mine.get(other), d.theirs.get(other)
                if other == name or not isinstance(om, list) or not isinstance(ot, list):
                    continue
                if other.startswith("out.") != name.startswith("out."):
                    continue  # a step's output names sequences; the state's lists, blocks too
                if x in _multiset_minus(ot, om):
                    return (
                        f"yours put {_shown(x)} in `{name}` where the reference puts it in "
                        f"`{other}`"
                    )
    return None


def _moves(name: str, before: list[Any], theirs: list[Any], args: Any = ()) -> str | None:
    """What the reference's call does to a list from ``before``: moves an entry to one end,
    adds or removes entries (said of the reference alone, when yours left the list as it was).
    Of two readings of a move (in [a, b] -> [b, a], a went back or b came forward), the one
    that moves an argument of the call is said."""
    if len(before) == len(theirs) and sorted(map(repr, before)) == sorted(map(repr, theirs)):
        for x in sorted(before, key=lambda y: not any(y == a for a in args)):
            rest = [y for y in before if y != x]
            if before.count(x) == 1 and theirs == [*rest, x]:
                return f"the reference moves {_shown(x)} to the back of `{name}`"
            if before.count(x) == 1 and theirs == [x, *rest]:
                return f"the reference moves {_shown(x)} to the front of `{name}`"
        return f"the reference reorders `{name}` to {_shown(theirs)}"
    added, removed = _multiset_minus(theirs, before), _multiset_minus(before, theirs)
    said = [
        *([f"adds {', '.join(map(_shown, added[:2]))} to `{name}`"] if added else []),
        *([f"removes {', '.join(map(_shown, removed[:2]))} from `{name}`"] if removed else []),
    ]
    return "the reference " + " and ".join(said) if said else None


_FIELD = re.compile(r"\b(\w+)=")


def _parted(x: Any, missing: list[Any]) -> tuple[str, str] | None:
    """One entry in place of the reference's one, both shown as ``Type(field=...)`` (a
    ``Chunk``): the first field where they part, for text that a cut would show alike."""
    if len(missing) != 1:
        return None
    a, b = str(x), str(missing[0])
    kind = a.split("(", 1)[0]
    if not (isinstance(x, str) and isinstance(missing[0], str)) or "(" not in a:
        return None
    if b.split("(", 1)[0] != kind:
        return None
    i = next((k for k, (p, q) in enumerate(zip(a, b, strict=False)) if p != q), None)
    starts = [m.start() for m in _FIELD.finditer(a[:i] if i is not None else "")]
    if i is None or not starts:
        return None

    def field(text: str) -> str:
        nxt = _FIELD.search(text, i + 1)
        return text[starts[-1] : nxt.start() - 2 if nxt else len(text) - 1]

    return f"a {kind} with {field(a)}", field(b)


def _collection(name: str, d: Difference) -> str | None:
    """One collection field: another order, an entry missing, an entry left or added."""
    before = _entries(d.before.get(name)) or []
    mine, theirs = _entries(d.mine.get(name)), _entries(d.theirs.get(name))
    if mine is None or theirs is None:
        return None
    if (
        mine == before
        and isinstance(d.before.get(name), list)
        and isinstance(d.theirs.get(name), list)
    ):
        moved = _moves(name, before, theirs, d.args)
        if moved:
            return f"yours left `{name}` as it was ({_shown(mine)}); {moved}"
    if isinstance(d.mine.get(name), list):
        found = _order(name, mine, theirs, before)
        if found:
            return found
    extra, missing = _multiset_minus(mine, theirs), _multiset_minus(theirs, mine)
    if extra:
        x = extra[0]
        if mine.count(x) > 1 and x in theirs:
            return f"yours has {_shown(x)} in `{name}` {mine.count(x)} times; the reference once"
        if x in before:
            return f"yours left {_shown(x)} in `{name}`; the reference removes it"
        parted = _parted(x, missing) if len(extra) == 1 else None
        if parted:
            return (
                f"yours added {parted[0]} to `{name}` where the reference adds one with {parted[1]}"
            )
        return f"yours added {_shown(x)} to `{name}`; the reference does not"
    if missing:
        x = missing[0]
        if x in before:
            return f"yours removed {_shown(x)} from `{name}`; the reference keeps it"
        return f"yours did not add {_shown(x)} to `{name}`; the reference does"
    return _dict_values(name, d)


def _scalar(name: str, d: Difference) -> str | None:
    mine, theirs = d.mine.get(name), d.theirs.get(name)
    if _number(mine) is None or _number(theirs) is None:
        return None
    was: Any = d.before.get(name)
    step = theirs - was if _number(was) is not None else 0
    return _value(
        f"`{name}`",
        was,
        mine,
        theirs,
        functools.partial(_counted_again, d, name, _Missing, step),
        functools.partial(_moves_again, d, name, _Missing),
    )


def _wrong_field(d: Difference) -> str | None:
    mine = {n for n in d.mine if d.mine.get(n) != d.before.get(n)}
    theirs = {n for n in d.theirs if d.theirs.get(n) != d.before.get(n)}
    if mine and theirs and not mine & theirs and len(mine) == 1 and len(theirs) == 1:
        return (
            f"yours changed `{next(iter(mine))}` where the reference changes "
            f"`{next(iter(theirs))}`: the wrong field?"
        )
    return None


def block_size_of(subject: Any) -> Any:
    """The block size of a block manager, or of the one a scheduler holds (``bm``)."""
    size = getattr(subject, "block_size", None)
    return size if size is not None else getattr(getattr(subject, "bm", None), "block_size", None)


def _work_right(a: Any, b: Any) -> str:
    """A call whose changes to the state are the reference's, with another return value."""
    return (
        f"yours changed the state as the reference does but returned {_shown(a)}, not "
        f"{_shown(b)}: the work is right and the answer it returns is not"
    )


def _returned(d: Difference) -> str | None:
    if d.i_raised or d.they_raised or d.same_outcome:
        return None
    mine, theirs = d.returned("mine"), d.returned("theirs")
    try:
        a, b = ast.literal_eval(mine or ""), ast.literal_eval(theirs or "")
    except (ValueError, SyntaxError):
        a = b = None
    if isinstance(a, bool) and isinstance(b, bool) and not d.differ:
        return _work_right(a, b)
    size = block_size_of(d.subject)
    second = None
    if d.second is not None and _factor_shown(a, b, size):
        second = d.second()  # a second state, asked only when the factor needs one
    kind = number_words(a, b, size, second)
    if kind and abs(a - b) == 1:
        moved = _count_moved_twice(d)
        if moved:  # a count dropped by 2 where the reference drops 1 is no off-by-one
            return f"yours returned {_shown(a)}, the reference {_shown(b)}; {moved}"
        # fields that differ after a call of yours that changed none are read through your
        # own methods (len): the number is still the method's own answer
        own = not d.differ or not d.changed("mine")
        if offset_holds(a - b, not own, d.others, d.second):
            kind += " here and in another call: off by one?"
    if kind:
        return f"yours returned {_shown(a)}, the reference {_shown(b)}: {kind}"
    if not d.differ and _factor_shown(a, b, size):
        return f"yours returned {_shown(a)}, the reference {_shown(b)}"  # no cause confirmed
    if isinstance(a, list) and isinstance(b, list):
        order = _order("the result", a, b)
        if order:
            return order.replace("`the result`", "the result")
        extra, missing = _multiset_minus(a, b), _multiset_minus(b, a)
        if missing and not extra:
            return (
                f"yours returned {_shown(a)}, without {_shown(missing[0])}: the reference "
                f"returns {_shown(b)}"
            )
        if extra and not missing and extra[0] in b:  # the reference's entry, more times
            said = f"yours returned {_shown(a)}, with {_shown(extra[0])} {a.count(extra[0])} times"
            return f"{said}: the reference returns {_shown(b)}"
        if extra and not missing:
            return f"yours returned {_shown(a)}, with {_shown(extra[0])} the reference leaves out"
    if not d.differ and d.changed("theirs") and a is not None and b is not None:
        return _work_right(a, b)  # the same changes, only the answer differs
    return None


def _count(d: Difference, name: str, key: Any, twice: bool = False) -> str | None:
    """How yours moved count ``name`` of ``key`` where the reference moves it (with ``twice``,
    only a move twice as far as the reference's, from where yours may have left it too)."""
    before, mine, theirs = d.before.get(name), d.mine.get(name), d.theirs.get(name)
    if not (isinstance(before, dict) and isinstance(mine, dict) and isinstance(theirs, dict)):
        return None
    was, a, b = (x.get(key, 0) for x in (before, mine, theirs))
    if not all(_number(x) is not None for x in (was, a, b)) or a == b or b == was:
        return None
    if (a == was and not twice) or (twice and a - was != 2 * (b - was)):
        return None
    again = functools.partial(_counted_again, d, name, key, b - was)
    back = functools.partial(_moves_again, d, name, key)
    return _value(f"`{name}` of {_shown(key)}", was, a, b, again, back)


def count_moved(d: Difference, name: str, key: Any) -> str | None:
    """How yours moved count ``name`` of ``key`` where the reference moves it too (twice as
    far, counted twice where a copy proves it, the other way, off by one), or None where
    either side left it or it is no number."""
    return _count(d, name, key)


def _count_moved_twice(d: Difference) -> str | None:
    """A count (a field of numbers by key, an absent key 0) that yours moved twice as far as
    the reference: the returned numbers one apart then say the count's step, not an off-by-one
    (a refcount of 2 dropped to 0 where the reference drops it to 1)."""
    for name in sorted(d.differ):
        values = d.mine.get(name), d.theirs.get(name)
        keys = {k for v in values if isinstance(v, dict) for k in v}
        for key in sorted(keys, key=repr):
            said = _count(d, name, key, twice=True)
            if said:
                return said
    return None


def _derived(name: str, differ: frozenset[str]) -> bool:
    """A field that follows from another one that differs too (``num_free`` from ``free``)."""
    return (name == "num_free" and "free" in differ) or name == "held_bytes"


Reading = Callable[[Difference], "str | None"]


def kind_reading(d: Difference) -> str | None:
    """What kind of difference the first diverging call shows, in a line, or None."""
    if d.hidden:
        return None
    found = failed_call(d) or other_error(d) or _returned(d)
    return found if found else _fields(d)


def _fields(d: Difference) -> str | None:
    """What the fields that differ show: an entry put in another list, an entry or a value
    other than the reference's, the wrong field changed."""
    differ = d.differ
    names = [n for n in d.mine if n in differ and not _derived(n, differ)]
    names += [n for n in d.theirs if n in differ and n not in names and not _derived(n, differ)]
    found = _moved(d, names)
    if found:
        return found
    facts = [f for f in (_collection(n, d) or _scalar(n, d) for n in names) if f]
    if not facts:
        return _wrong_field(d)
    wrong = _wrong_field(d)
    return wrong if wrong else "; ".join(facts[:2])
