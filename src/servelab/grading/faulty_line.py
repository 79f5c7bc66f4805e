"""The line of the learner's method that made the difference, and the values it saw.

Localisation (:mod:`servelab.grading.localise`) finds the first call whose outcome differs from
the reference's and keeps a copy of the learner's object and arguments just before it. Here that
call is run again, on a fresh copy of that state, with the learner's own class, under a trace
of the learner's method (and of the learner's methods it calls on the same object): after each
line the observed fields are read again, and the line after which a differing entry first
enters (or leaves) a field, as it stays at the end of the call, is the one shown; for a
call whose state agrees and whose result does not, the ``return`` line that returned it.

The reference's method is run the same way on another copy, every line on that object read:
a line is shown only where it takes the state somewhere the reference's call never goes, by
a change the reference's call never makes, from a state whose every field the reference's
call passes through too. So a correct line that a slip earlier or a line left out makes
wrong (``used += size`` after an eviction left out) shows nothing.

A fact, never a guess: nothing is shown when the source cannot be read (a class built by
``exec``), when the re-run does not end as the call did, when no line or more than one
crossing creates an entry's difference, or when the difference is one of order alone.
"""

from __future__ import annotations

import ast
import copy
import inspect
import io
import itertools
import linecache
import sys
import textwrap
import types
from collections import Counter, deque
from collections.abc import Callable, Hashable, Mapping
from contextlib import redirect_stdout
from typing import Any

from servelab.grading.graft import _classes, _split
from servelab.grading.localise import (
    Divergence,
    _arg_fields,
    _out_fields,
    _outcome,
    _parameters,
    _Text,
    _view,
)
from servelab.grading.observe import Unreadable, frozen
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget
from servelab.grading.steady import stable_text

__all__ = ["faulty_line"]

#: The longest line the report shows, and the longest value it shows on it.
MAX_LINE = 160
MAX_VALUE = 40
MAX_CODE = 90
#: The most reads of the fields one re-run may take (a long loop is not worth it).
MAX_READS = 2_000

Observe = Callable[[Any], "dict[str, Any]"]


def faulty_line(d: Divergence | None, fields: Observe | None) -> str | None:
    """``at your line `...`, where a = 1, b = 2`` for the call ``d``; None when the line is
    not known for certain (or reading it fails: the report stands without it)."""
    try:
        return _faulty_line(d, fields)
    except Exception:
        return None


def _faulty_line(d: Divergence | None, fields: Observe | None) -> str | None:
    if d is None or fields is None or d.subject is None or d.impl is None:
        return None
    if not d.mine[0].startswith(("returned", "raised")):  # a call that never returned
        return None
    prefix, name = _split(d.method)
    cls = _classes(d.impl).get(prefix)
    if cls is None:
        return None
    codes = _own_codes(cls)
    top = getattr(inspect.getattr_static(cls, name, None), "__code__", None)
    if top not in codes:
        return None
    targets = _Targets(d)
    if not targets.keys and not targets.returned:
        return None
    mine = _traced(d, cls, codes, targets, fields)
    if mine is None or stable_text(mine.outcome) != stable_text(d.mine[0]):
        return None
    if targets.returned:
        return None if mine.returned_at is None else _said(mine.returned_at, top)
    if d.reference_class is None:
        return None
    theirs = _traced(d, d.reference_class, None, targets, fields)
    if theirs is None or stable_text(theirs.outcome) != stable_text(d.theirs[0]):
        return None
    found = targets.line(mine, theirs)
    return None if found is None else _said(found, top)


def _traced(
    d: Divergence,
    cls: type,
    codes: set[types.CodeType] | None,
    targets: _Targets,
    fields: Observe,
) -> _Watch | None:
    """The call run again on a copy of its state, by ``cls``'s method, traced: the lines of
    ``codes`` on that object (every line on it: None); None when it cannot be run."""
    name = _split(d.method)[1]
    try:
        obj, args, kwargs = copy.deepcopy((d.subject, d.args, d.kwargs))
        obj.__class__ = cls
        method = getattr(obj, name)
        names = _parameters(getattr(cls, name), len(args))
    except Exception:
        return None
    watch = _Watch(obj, codes, lambda: targets.read(fields, obj, args, kwargs, names))
    try:
        with redirect_stdout(io.StringIO()), line_budget(LINES_PER_CALL):
            watch.outcome = _outcome("returned", watch.run(method, args, kwargs))
    except OutOfLines:
        return None
    except Exception as exc:
        watch.outcome = _outcome("raised", exc)
    return None if watch.failed else watch


# ----------------------------------------------------------------------------- the code


def _own_codes(cls: type) -> set[types.CodeType]:
    """The code of every method the learner wrote on ``cls`` (none of the package's own)."""
    found: set[types.CodeType] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("servelab.") or klass is object:
            continue
        for value in vars(klass).values():
            if isinstance(value, property):
                value = value.fget
            elif isinstance(value, staticmethod | classmethod):
                value = value.__func__
            code = getattr(value, "__code__", None)
            if isinstance(code, types.CodeType):
                found.add(code)
    return found


def _function_node(code: types.CodeType) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The method's source as a tree whose line numbers are the file's, or None."""
    # code objects compare equal across files (a cell run again, a comment changed): the
    # file's name is part of the key
    key = (code.co_filename, code)
    if key not in _TREES:
        if len(_TREES) > 1_000:
            _TREES.clear()
        _TREES[key] = _parsed(code)
    return _TREES[key]


_TREES: dict[tuple[str, types.CodeType], ast.FunctionDef | ast.AsyncFunctionDef | None] = {}


def _parsed(code: types.CodeType) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    lines = linecache.getlines(code.co_filename)
    if not lines or code.co_firstlineno > len(lines):
        return None
    try:
        block = inspect.getblock(lines[code.co_firstlineno - 1 :])
        tree = ast.parse(textwrap.dedent("".join(block)))
    except (SyntaxError, IndentationError, ValueError):
        return None
    ast.increment_lineno(tree, code.co_firstlineno - 1)
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name != code.co_name:
        return None
    return node


def _statement(
    node: ast.AST, line: int, heads: tuple[ast.AST, ...] = ()
) -> tuple[ast.stmt, tuple[ast.AST, ...]] | None:
    """The innermost statement that runs at ``line``, and what decided that it runs: the
    tests of the ``if``/``while``/``for``/``match`` headers around it (and a ``case``'s
    guard), and of the guards before it in its block (``if ...: break``)."""
    for _, value in ast.iter_fields(node):
        children = value if isinstance(value, list) else [value]
        guards: list[ast.AST] = []
        for child in children:
            if isinstance(child, ast.excepthandler):
                if child.lineno <= line <= (child.end_lineno or child.lineno):
                    return _statement(child, line, heads)  # its header alone: None
                continue
            if isinstance(child, ast.match_case):
                if child.pattern.lineno <= line <= (child.body[-1].end_lineno or line):
                    guard = (child.guard,) if child.guard is not None else ()
                    return _statement(child, line, (*heads, *guard))  # its header: None
                continue
            if not isinstance(child, ast.stmt) or child.end_lineno is None:
                continue
            if child.lineno <= line <= child.end_lineno:
                around = (*heads, *guards)
                decides = _heads(child) if isinstance(child, _DECIDING) else []
                inner = _statement(child, line, (*around, *decides))
                if inner is not None:
                    return inner
                # the header itself, not an ``else:`` or ``finally:`` line below it
                return (child, around) if line <= _header_end(child) else None
            if isinstance(child, ast.If) and _leaves(child.body) and not child.orelse:
                guards.append(child.test)
    return None


_DECIDING = (ast.If, ast.While, ast.For, ast.AsyncFor, ast.Match)


def _leaves(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Break | ast.Continue | ast.Return | ast.Raise)


def _header_end(stmt: ast.stmt) -> int:
    if isinstance(stmt, ast.Match):
        return max(stmt.lineno, stmt.cases[0].pattern.lineno - 1)
    body = getattr(stmt, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        return max(stmt.lineno, body[0].lineno - 1)
    return stmt.end_lineno or stmt.lineno


def _read_names(nodes: list[ast.AST]) -> list[str]:
    """The plain names ``nodes`` read, in order. A name a line assigns holds, before the line
    runs, what it held before (the last round's, in a loop): only ``n += 1`` reads it, and a
    ``for`` target given whole (for the lines of its body) holds the item they run on."""
    found: list[str] = []
    for node in nodes:
        bound = isinstance(getattr(node, "ctx", None), ast.Store)
        for sub in ast.walk(node):
            if isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
                sub = sub.target
            elif not (isinstance(sub, ast.Name) and (bound or isinstance(sub.ctx, ast.Load))):
                continue
            if sub.id not in found:
                found.append(sub.id)
    return found


def _heads(stmt: ast.stmt) -> list[ast.AST]:
    """What a compound statement's header reads: an ``if``'s or ``while``'s test, a ``for``'s
    target and iterable, a ``match``'s subject; a simple statement is read whole."""
    if isinstance(stmt, ast.If | ast.While):
        return [stmt.test]
    if isinstance(stmt, ast.Match):
        return [stmt.subject]
    if isinstance(stmt, ast.For | ast.AsyncFor):
        return [stmt.target, stmt.iter]
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return list(stmt.items)
    if isinstance(stmt, ast.Try | ast.FunctionDef | ast.ClassDef):
        return []
    return [stmt]


class _Line:
    """One line of the learner's source: its text and the names worth showing on it."""

    def __init__(self, code: types.CodeType, line: int) -> None:
        self.text: str | None = None
        self.names: list[str] = []
        node = _function_node(code)
        found = None if node is None else _statement(node, line)
        if found is None:
            return
        stmt, heads = found
        lines = linecache.getlines(code.co_filename)
        text = " ".join(s.strip() for s in lines[stmt.lineno - 1 : _header_end(stmt)])
        if not text:
            return
        self.text = text
        self.is_return = isinstance(stmt, ast.Return)
        # a ``for`` header's own target, read before the line runs, holds the last item
        own = [stmt.iter] if isinstance(stmt, ast.For | ast.AsyncFor) else _heads(stmt)
        self.names = _read_names([*heads, *own])


_LINES: dict[tuple[str, types.CodeType, int], _Line] = {}


def _line(code: types.CodeType, line: int) -> _Line:
    key = (code.co_filename, code, line)
    if key not in _LINES:
        if len(_LINES) > 10_000:
            _LINES.clear()
        _LINES[key] = _Line(code, line)
    return _LINES[key]


def _value(value: Any) -> str | None:
    """A value as the report writes it, or None where it is not worth a place on one line."""
    if callable(value) or isinstance(value, types.ModuleType | type):
        return None
    try:
        text = repr(_view(_sets_sorted(value)))
    except Exception:
        return None
    if len(text) > MAX_VALUE or " at 0x" in text or (text.startswith("<") and " object" in text):
        return None
    return text


def _sets_sorted(value: Any) -> Any:
    """``value`` with each set in it, at any depth, written in sorted order: the order a set
    iterates in may change from run to run."""
    if isinstance(value, set | frozenset):
        items = sorted(repr(_view(_sets_sorted(v))) for v in value)
        text = "{" + ", ".join(items) + "}" if items else ""
        if isinstance(value, frozenset) or not items:
            text = f"{type(value).__name__}({text})"
        return _Text(text)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_sets_sorted(v) for v in value))
    if isinstance(value, deque):
        return type(value)((_sets_sorted(v) for v in value), value.maxlen)
    if isinstance(value, list | tuple):
        return type(value)(_sets_sorted(v) for v in value)
    if isinstance(value, Mapping):
        return {_sets_sorted(k): _sets_sorted(v) for k, v in value.items()}
    return value


def _values(frame: types.FrameType, names: list[str]) -> tuple[tuple[str, str], ...]:
    code = frame.f_code
    skip = code.co_varnames[:1] if code.co_argcount else ()
    shown: list[tuple[str, str]] = []
    local = frame.f_locals
    for name in names:
        if name in skip:
            continue
        if name in local:
            value = local[name]
        elif name in frame.f_globals:
            value = frame.f_globals[name]
        else:
            continue
        text = _value(value)
        if text is not None:
            shown.append((name, text))
    return tuple(shown)


Step = tuple[types.CodeType, int, tuple[tuple[str, str], ...]]
"""A line the learner's code ran: its code, line number and the values it saw."""


def _said(step: Step, top: types.CodeType) -> str | None:
    code, number, values = step
    line = _line(code, number)
    if line.text is None:
        return None
    text = line.text if len(line.text) <= MAX_CODE else line.text[: MAX_CODE - 3] + "..."
    head = f"at your line `{text}`"
    if code is not top:
        head += f" in `{code.co_name}`"
    shown = [f"{n} = {v}" for n, v in values]
    while shown and len(head) + len(", where ") + len(", ".join(shown)) > MAX_LINE:
        shown.pop()
    return f"{head}, where {', '.join(shown)}" if shown else head


# ----------------------------------------------------------------------------- the trace


class _Watch:
    """Runs one call under a trace of the frames on ``obj`` whose code is in ``codes`` (all
    of them: None): before each of their lines, and as each returns, ``observe`` reads the
    fields; each read is kept with the line that ran just before it (``steps``)."""

    def __init__(
        self, obj: Any, codes: set[types.CodeType] | None, observe: Callable[[], Any]
    ) -> None:
        self.obj = obj
        self.codes = codes
        self.observe = observe
        self.stack: list[list[Any]] = []  # per traced frame: [its code, the line running in it]
        self.steps: list[tuple[Step | None, Any]] = []
        self.returned_at: Step | None = None
        self.failed = False
        self.outcome = ""

    def run(self, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        previous = sys.gettrace()
        self.steps.append((None, self._observed()))
        top = getattr(getattr(method, "__func__", None), "__code__", None)

        def trace(frame: types.FrameType, event: Any, arg: Any) -> Any:
            inner = previous(frame, event, arg) if previous is not None else None
            if (self.codes is None or frame.f_code in self.codes) and self._mine(frame):
                return self._local(inner, frame.f_code is top)
            return inner

        sys.settrace(trace)
        try:
            return method(*args, **kwargs)
        finally:
            sys.settrace(previous)

    def _mine(self, frame: types.FrameType) -> bool:
        code = frame.f_code
        if not code.co_argcount:
            return False
        return frame.f_locals.get(code.co_varnames[0]) is self.obj

    def _local(self, inner: Any, outermost: bool) -> Any:
        chained = [inner]

        def local(frame: types.FrameType, event: str, arg: Any) -> Any:
            if chained[0] is not None:
                chained[0] = chained[0](frame, event, arg)
            try:
                self._event(frame, event, outermost)
            except Exception:
                self.failed = True
            return local

        try:
            self._settle()
        except Exception:
            self.failed = True
        self.stack.append([None, None])
        return local

    def _event(self, frame: types.FrameType, event: str, outermost: bool) -> None:
        if self.failed or not self.stack:
            return
        if event == "line":
            self._settle()
            line = frame.f_lineno
            names = _line(frame.f_code, line).names if self.codes is not None else []
            self.stack[-1][1] = (frame.f_code, line, _values(frame, names))
        elif event == "return":
            self._settle()
            running = self.stack.pop()[1]
            if outermost and not self.stack and running is not None:
                line = _line(running[0], running[1])
                self.returned_at = running if getattr(line, "is_return", False) else None

    def _settle(self) -> None:
        if len(self.steps) >= MAX_READS:
            raise OutOfLines
        running = self.stack[-1][1] if self.stack else None
        self.steps.append((running, self._observed()))

    def _observed(self) -> Any:
        try:
            return self.observe()
        except Exception:
            return None


# ----------------------------------------------------------------------------- the difference


def _entries(value: Any) -> Counter[Hashable]:
    """A field's value as a multiset of entries: a list's items, a dict's pairs, a scalar."""
    if isinstance(value, Mapping):
        return Counter(frozen((k, v)) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return Counter(frozen(v) for v in value)
    return Counter([frozen(value)])


class _Targets:
    """What differs after the call: per field, the entries yours has more of and fewer of
    than the reference's; or, where every field agrees, the value returned."""

    def __init__(self, d: Divergence) -> None:
        mine, theirs = d.mine[1], d.theirs[1]
        self.keys = [
            k
            for k in mine
            if k in theirs
            and mine[k] != theirs[k]
            and not isinstance(mine[k], Unreadable)
            and not isinstance(theirs[k], Unreadable)
        ]
        self.mine = {k: mine[k] for k in self.keys}
        self.theirs = {k: _entries(theirs[k]) for k in self.keys}
        both_returned = d.mine[0].startswith("returned") and d.theirs[0].startswith("returned")
        self.returned = not self.keys and both_returned and d.mine[0] != d.theirs[0]

    def read(
        self,
        fields: Observe,
        obj: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        names: list[str],
    ) -> tuple[dict[str, Hashable], dict[str, tuple[Any, Any]]]:
        """The whole state as it reads (to compare with the reference's), and each differing
        field as the object's fields read it and as an argument shows it."""
        own = {**fields(obj), **_out_fields(args, kwargs)}
        views = _arg_fields(args, names)
        state = {
            **{k: frozen(v) for k, v in own.items()},
            **{f"argument {k}": frozen(v) for k, v in views.items()},
        }
        return state, {
            k: (copy.deepcopy(own.get(k)), copy.deepcopy(views.get(k))) for k in self.keys
        }

    def line(self, watch: _Watch, reference: _Watch) -> Step | None:
        """The first line after which an entry of a differing field crosses to the side it
        ends on, into a state the reference's call never passes through, by a change the
        reference's call never makes; None when an entry crosses more than once, or no
        such line is found."""
        if watch.steps[0][1] is None or reference.steps[0][1] is None:
            return None  # a state before the call that could not be read
        reads = [(step, read) for step, read in watch.steps if read is not None]
        # the reference's states (a read that failed left out), and the fields that read
        # alike before the call (an order read through a method of yours may not): the
        # reference's path through them, and the values each takes on it
        states = [read[0] for _, read in reference.steps if read is not None]
        start = reads[0][1][0]
        alike = sorted(k for k in start if k in states[0] and start[k] == states[0][k])
        if not alike:
            return None
        path = {tuple(state.get(k) for k in alike) for state in states}
        seen = {k: {state.get(k) for state in states} for k in alike}
        found: list[int] = []
        sources: dict[str, int] = {}
        for key in self.keys:
            source = next((i for i in (0, 1) if reads[-1][1][1][key][i] == self.mine[key]), None)
            if source is None:
                return None
            sources[key] = source
            values = [read[1][key][source] for _, read in reads]
            for crossing in _crossings(values, self.mine[key], self.theirs[key]):
                if crossing is None:
                    return None
                found.append(crossing)

        theirs = _changes_made(reference, sources)
        for index in sorted(set(found)):
            state = reads[index][1][0]
            if tuple(state.get(k) for k in alike) in path:  # the reference's call is here too
                continue
            moved = [
                _change(*(_read(reads[i], k, sources) for i in (index - 1, index)))
                for k in self.keys
            ]
            made = [c for c in moved if c is not None]
            # a change the reference's call makes as well (`used += size` after an eviction
            # left out, a count the reference adds too) is not what made the difference
            if made and all(
                c in theirs.get(k, ()) for c, k in zip(moved, self.keys, strict=True) if c
            ):
                continue
            # each field just before the line read as the reference's call has it at some
            # point (in whatever order its lines run): else the state had left the reference's
            # path already, by a line that moved no differing entry (a victim chosen wrongly,
            # whose freed block a later correct line takes), and this line is not the slip
            before = reads[index - 1][1][0]
            if any(before.get(k) not in seen.get(k, ()) for k in alike):
                return None
            return reads[index][0]
        return None


def _change(before: Any, after: Any) -> Hashable | None:
    """How a field's value moved in one line: by how much for a number, else from what to
    what; None when it did not."""
    if before == after:
        return None
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (before, after))
    return ("by", after - before) if numbers else (before, after)


def _read(read: tuple[Step | None, Any], key: str, sources: dict[str, int]) -> Hashable:
    return frozen(read[1][1][key][sources[key]])


def _changes_made(watch: _Watch, sources: dict[str, int]) -> dict[str, set[Hashable]]:
    """Every change of each differing field over a traced call, line by line, read as the
    learner's call is read (``sources``: by the object's fields or by an argument)."""
    reads = [read for read in watch.steps if read[1] is not None]
    made: dict[str, set[Hashable]] = {k: set() for k in sources}
    for a, b in itertools.pairwise(reads):
        for k in sources:
            change = _change(_read(a, k, sources), _read(b, k, sources))
            if change is not None:
                made[k].add(change)
    return made


def _crossings(values: list[Any], mine: Any, theirs: Counter[Hashable]) -> list[int | None]:
    """For each entry that differs at the end, the read after which it crossed to the side it
    ends on (None: more than once); an entry that never crosses gives nothing. A pair of a
    mapping whose key appears with its value while the reference's has that key too is no
    crossing: the value was decided before it could be read (a count a queue shows)."""
    ending = _entries(mine)
    out: list[int | None] = []
    for entry in set(ending) | set(theirs):
        if ending[entry] == theirs[entry]:
            continue
        more = ending[entry] > theirs[entry]
        counts = [_entries(v)[entry] for v in values]
        wrong = [c > theirs[entry] if more else c < theirs[entry] for c in counts]
        crossings = [i for i in range(1, len(values)) if wrong[i] and not wrong[i - 1]]
        if len(crossings) > 1:
            out.append(None)
        elif crossings:
            i = crossings[0]
            if isinstance(mine, Mapping) and _key_appeared(values[i - 1], entry, theirs):
                continue
            out.append(i)
    return out


def _key_appeared(before: Any, entry: Hashable, theirs: Counter[Hashable]) -> bool:
    """Whether ``entry``, a mapping's (key, value) pair, came with its key, which the
    reference's mapping has too."""
    if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(before, Mapping)):
        return False
    key = entry[0]
    theirs_has = any(isinstance(e, tuple) and len(e) == 2 and e[0] == key for e in theirs)
    return theirs_has and not any(frozen(k) == key for k in before)
