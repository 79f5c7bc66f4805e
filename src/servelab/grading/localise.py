"""Localisation by method graft: find the method where a learner's class starts to differ.

A notebook's skeleton fixes each step's method names and fields, and ``servelab.checkpoint(topic,
step)`` is a correct class with the same names. A failing check's program is replayed on
hybrids: the learner's class with one (then two) of those methods taken from the checkpoint;
the smallest set whose replacement makes the program agree is where the mistake lives. Then
every call into that method, in a replay on the learner's class, is repeated on a copy by the
checkpoint's method: the first whose result or state change differs is the one to show.

The hybrids are built by :mod:`servelab.grading.graft`. Everything here is bounded by counts
(lines executed, programs replayed), never by seconds: the same failure, the same answer.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import itertools
import types
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from servelab.grading.graft import (
    _classes,
    _layer,
    _split,
    changed_methods,
    graft,
    skeleton_methods,
)
from servelab.grading.observe import Unreadable
from servelab.grading.replay import ACTIVE_BUDGETS, OBSERVING, Lines, OutOfLines, line_budget

__all__ = [
    "Divergence",
    "Localisation",
    "Skeleton",
    "agree",
    "changed_methods",
    "graft",
    "line_budget",
    "localise",
    "skeleton_methods",
    "state_before",
]

#: Pairs of methods tried when no single graft makes the program agree.
MAX_PAIRS = 66
#: The most methods a group grown one by one may hold (:func:`_grown_group`).
MAX_GROUP = 3

Observe = Callable[[Any], "dict[str, Any]"]


@dataclass(frozen=True)
class Skeleton:
    """What localisation needs from a topic.

    ``namespace(impl)`` binds a program's names; ``run(program, impl)`` replays a program and
    returns what a learner could see after each line (comparable between two implementations);
    ``subject`` is the program's name for the graded object; ``fields(obj)`` is every field
    the topic exposes, by name, as the learner reads them; ``key(obj)`` is its state as far as
    the rules care (a free list in another order may be fine); ``ungraded_returns`` are
    methods whose return value no rule checks.
    """

    subject: str
    namespace: Callable[[Any], dict[str, Any]]
    run: Callable[[str, Any], list[Any]]
    fields: Observe
    key: Callable[[Any], Hashable]
    ungraded_returns: frozenset[str] = frozenset()
    detail: Callable[[Any], dict[str, Any]] | None = None
    """The skeleton's own fields that no call shows at once (an LFU's counts): compared after
    each spied call too, where the learner's object keeps them."""


@dataclass(frozen=True)
class Divergence:
    """The first call into a localised method whose outcome differs from the checkpoint's."""

    method: str
    call: str
    before: dict[str, Any]
    mine: tuple[str, dict[str, Any]]
    theirs: tuple[str, dict[str, Any]]
    index: int
    args: tuple[Any, ...] = field(default=(), compare=False)
    """The call's positional arguments, as the learner's method received them."""
    subject: Any = field(default=None, compare=False, repr=False)
    """A copy of the learner's object just before the call (None when it cannot be copied),
    for a reading of the difference that needs more than the fields (sizes, a capacity)."""
    their_before: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """The same state read through the reference's methods: what its change is measured from
    (a field read by a method of the learner's, such as ``len``, may read differently)."""
    after: tuple[Any, Any] | None = field(default=None, compare=False, repr=False)
    """The learner's object and the reference's just after the call (for the picture)."""
    reference_class: type | None = field(default=None, compare=False, repr=False)
    """The learner's class with the method taken from the checkpoint: ``subject`` with this
    class calls the reference's method on the learner's own state (to try other arguments)."""
    kwargs: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The call's keyword arguments, as the learner's method received them."""
    ordinal: int = field(default=0, compare=False, repr=False)
    """Which outermost call of the method it is (1 for the first), to find the same call in
    another program (:func:`state_before`)."""
    program: str = field(default="", compare=False, repr=False)
    impl: Any = field(default=None, compare=False, repr=False)
    """The program replayed and the learner's classes, to build the same call's state anew."""
    unkeyed: bool = field(default=False, compare=False, repr=False)
    """The call differs only in fields the state's key leaves out (an order)."""
    their_error: BaseException | None = field(default=None, compare=False, repr=False)
    """What the reference's run on the copy raised (None: it returned), with its traceback."""


@dataclass(frozen=True)
class Localisation:
    """Where the mistake lives: the methods whose graft fixes the program, and the first call
    that shows it; or ``note``, one line saying why the grader cannot point at a method."""

    methods: tuple[str, ...] = ()
    divergence: Divergence | None = None
    note: str | None = None


# ----------------------------------------------------------------------------- replays


def _run(skeleton: Skeleton, program: str, impl: Any) -> list[Any]:
    try:
        with line_budget():
            return skeleton.run(program, impl)
    except OutOfLines:
        return [("ran out of lines",)]


def _built(skeleton: Skeleton, program: str, impl: Any) -> Any:
    """The graded object right after the program's lines that build it, or None."""
    lines = program.splitlines()
    upto = next((i for i, ln in enumerate(lines) if ln.startswith(f"{skeleton.subject} =")), None)
    if upto is None:
        return None
    try:
        ns = skeleton.namespace(impl)
        with line_budget():
            for line in lines[: upto + 1]:
                exec(line, ns)
    except (Exception, OutOfLines):
        return None
    return ns.get(skeleton.subject)


def _missing_fields(skeleton: Skeleton, program: str, impl: Any, reference: Any) -> list[str]:
    """Fields the checkpoint's object has once built and the learner's lacks."""
    mine, theirs = (_built(skeleton, program, c) for c in (impl, reference))
    if mine is None or theirs is None:
        return []
    return sorted(set(getattr(theirs, "__dict__", {})) - set(getattr(mine, "__dict__", {})))


# ----------------------------------------------------------------------------- divergence


def _show(value: Any) -> str:
    seq_id = getattr(value, "seq_id", None)
    if seq_id is not None and hasattr(value, "num_tokens"):
        return f"<sequence {seq_id}>"
    if _is_step_output(value):
        return "out"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_step_output(value: Any) -> bool:
    """A scheduler step's output, which a method fills in (``out.preempted.append(...)``)."""
    return hasattr(value, "preempted") and (
        hasattr(value, "decodes") or hasattr(value, "scheduled")
    )


def _entry(item: Any) -> Any:
    """A step output's entry as a report shows it: the sequence id (of a decode or chunk too)."""
    seq_id = getattr(item, "seq_id", getattr(getattr(item, "seq", None), "seq_id", None))
    if seq_id is not None:
        return seq_id
    number = isinstance(item, int | float) and not isinstance(item, bool)  # else read as an id
    return _Text(f"<{type(item).__name__} {item!r}>" if number else _show(item))


def _out_fields(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What a call's step output holds (``out.preempted [1]``): a method's effect on it is part
    of what it does, as much as its effect on the scheduler."""
    found: dict[str, Any] = {}
    for value in [*args, *kwargs.values()]:
        if _is_step_output(value):
            for name, entries in _public_fields(value).items():
                if isinstance(entries, list):
                    found[f"out.{name}"] = [_entry(e) for e in entries]
    return found


def _public_fields(obj: Any) -> dict[str, Any]:
    """An object's public fields as it set them: public attributes, and a property that stands
    for a private one (``StepOutput.decodes``, kept in ``_decodes``)."""
    props = {n for n in dir(type(obj)) if isinstance(getattr(type(obj), n, None), property)}
    names = [n[1:] if n[:1] == "_" and n[1:] in props else n for n in vars(obj)]
    return {n: getattr(obj, n) for n in names if not n.startswith("_")}


class _Text(str):
    """A value already written for a report: shown as it is, without quotes."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def _view(value: Any) -> Any:
    """A value as a report shows it: a sequence by its id, a named tuple (a ``Chunk``) by its
    fields, containers element by element."""
    seq_id = getattr(value, "seq_id", None)
    if seq_id is not None and hasattr(value, "num_tokens"):
        return _Text(f"<sequence {seq_id}>")
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        inner = ", ".join(f"{f}={_view(v)!r}" for f, v in zip(value._fields, value, strict=True))
        return _Text(f"{type(value).__name__}({inner})")
    if isinstance(value, list | tuple):
        return type(value)(_view(v) for v in value)
    if isinstance(value, Mapping):
        return {k: _view(v) for k, v in value.items()}
    return value


def _parameters(original: Callable[..., Any], count: int) -> list[str]:
    """The names of a method's first ``count`` parameters after ``self`` (``out``)."""
    try:
        names = list(inspect.signature(original).parameters)[1:]
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"argument {i + 1}" for i in range(count)]


def _arg_fields(args: Sequence[Any], names: Sequence[str]) -> dict[str, Any]:
    """What a call can change in its arguments: each attribute of an object argument (a step's
    ``out``), as ``out.scheduled``."""
    found: dict[str, Any] = {}
    for name, arg in zip(names, args, strict=False):
        attrs = getattr(arg, "__dict__", None)
        if not isinstance(attrs, dict) or getattr(arg, "seq_id", None) is not None:
            continue
        for attr, value in _public_fields(arg).items():
            found[f"{name}.{attr}"] = _view(value)
    return found


def _with_args(fields: dict[str, Any], args: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {**fields, **{k: args.get(k) for k in keys}}


def _outcome(kind: str, value: Any) -> str:
    if kind == "raised":
        return f"raised {type(value).__name__}"
    if kind == "ran out of lines":
        return "never returned"
    return f"returned {_show(value)}"


class _Spy:
    """Repeats each outermost call into ``method`` on a copy of the object, by the checkpoint's
    method, and keeps the first call whose outcome differs."""

    def __init__(
        self, skeleton: Skeleton, method: str, hybrid: type, graded_return: bool, strict: bool
    ) -> None:
        self.skeleton = skeleton
        self.strict = strict
        self.method = method
        self.hybrid = hybrid
        self.graded_return = graded_return
        self.depth = 0
        self.calls = 0  # outermost calls seen, the diverging one included
        self.aside = 0  # lines spent on the checkpoint's copies, not on the program
        self.found: Divergence | None = None
        self.spoiled = False  # the reference's run on a copy changed the learner's object

    def __call__(
        self, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any], original: Callable[..., Any]
    ) -> Any:
        if self.depth or self.found is not None or self.spoiled or OBSERVING[0]:
            return original(obj, *args, **kwargs)
        self.calls += 1
        self.depth += 1
        try:
            return self._compare(obj, args, kwargs, original)
        finally:
            self.depth -= 1

    def _fields(self, obj: Any) -> dict[str, Any]:
        try:
            return self.skeleton.fields(obj)
        except Exception:
            return {}

    def _compare(
        self, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any], original: Callable[..., Any]
    ) -> Any:
        clock = ACTIVE_BUDGETS[0] if ACTIVE_BUDGETS else Lines(0)
        when = clock.spent - self.aside
        before = {**self._fields(obj), **_out_fields(args, kwargs)}
        try:
            clone, cargs, ckwargs = copy.deepcopy((obj, args, kwargs))
            clone.__class__ = self.hybrid
        except Exception:
            return original(obj, *args, **kwargs)
        copying = clock.spent
        try:
            pristine, pristine_args, pristine_kwargs = copy.deepcopy((obj, args, kwargs))
        except Exception:  # pragma: no cover - it was copied just above
            pristine, pristine_args, pristine_kwargs = None, args, kwargs
        self.aside += clock.spent - copying
        name = _split(self.method)[1]
        started = clock.spent
        their_before = {**self._fields(clone), **_out_fields(cargs, ckwargs)}
        try:
            theirs: tuple[str, Any] = ("returned", getattr(clone, name)(*cargs, **ckwargs))
        except Exception as exc:
            theirs = ("raised", exc)
        their_fields = {**self._fields(clone), **_out_fields(cargs, ckwargs)}
        their_args = _plain_args(cargs, ckwargs)
        # a function the copy shares changed the learner's object: the runs start apart
        self.spoiled = {**self._fields(obj), **_out_fields(args, kwargs)} != before
        self.aside += clock.spent - started
        if self.spoiled:
            return original(obj, *args, **kwargs)
        try:
            mine: tuple[str, Any] = ("returned", original(obj, *args, **kwargs))
            error: BaseException | None = None
        except Exception as exc:
            mine, error = ("raised", exc), exc
        my_fields = {**self._fields(obj), **_out_fields(args, kwargs)}
        sides = ((mine, obj, _plain_args(args, kwargs)), (theirs, clone, their_args))
        if not agree(self.skeleton, *sides, graded=self.graded_return) or (
            self.strict and my_fields != their_fields
        ):
            names = _parameters(original, len(args))
            # the arguments as they were passed: a method that empties a list it was given
            # (``found.pop()``) is shown the list it received
            shown = ", ".join(
                [
                    *(
                        n if _arg_fields([a], [n]) else _show(a)
                        for a, n in zip(pristine_args, names, strict=True)
                    ),
                    *(f"{k}={_show(v)}" for k, v in pristine_kwargs.items()),
                ]
            )
            views = [_arg_fields(a, names) for a in (pristine_args, args, cargs)]
            # an output list read as ids (``out.preempted [1]``) stays so where the ids differ;
            # where they agree and the entries do not (a chunk's slots), the entries are shown
            keys = [
                k
                for k in views[0]
                if not views[0][k] == views[1].get(k) == views[2].get(k)
                and (k not in before or my_fields.get(k) == their_fields.get(k))
            ]
            before = _with_args(before, views[0], keys)
            my_fields = _with_args(my_fields, views[1], keys)
            their_fields = _with_args(their_fields, views[2], keys)
            their_before = _with_args(their_before, views[0], keys)
            try:
                after: tuple[Any, Any] | None = (copy.deepcopy(obj), clone)
            except Exception:  # the picture then draws the fields alone
                after = None
            self.found = Divergence(
                self.method,
                f"{self.skeleton.subject}.{name}({shown})",
                before,
                (_outcome(*mine), my_fields),
                (_outcome(*theirs), their_fields),
                when,
                tuple(pristine_args),
                pristine,
                their_before,
                after,
                self.hybrid,
                dict(pristine_kwargs),
                self.calls,
                their_error=theirs[1] if theirs[0] == "raised" else None,
            )
        if error is not None:
            raise error
        return mine[1]


#: One side of a call run twice: its outcome ("returned" or "raised", the value), the object
#: after the call, and its arguments after it as :func:`_plain_args` reads them.
Side = tuple[tuple[str, Any], Any, Hashable]


def agree(skeleton: Skeleton, mine: Side, theirs: Side, graded: bool) -> bool:
    """Whether the learner's run of a call and the reference's agree: the same state (by the
    skeleton's key, then its detail where the learner's object keeps one), the same outcome
    (the same error, or an equal value where a rule reads the return: ``graded``) and the
    same arguments after it. Localisation and the neighbouring calls of
    :mod:`~servelab.grading.readings.contrast` judge a call by this one rule."""
    (my_outcome, my_obj, my_args), (their_outcome, their_obj, their_args) = mine, theirs
    same_state = _key(skeleton, my_obj) == _key(skeleton, their_obj)
    if same_state and skeleton.detail is not None:
        my_detail = _detail(skeleton, my_obj)
        same_state = not my_detail or my_detail == _detail(skeleton, their_obj)
    if my_outcome[0] != their_outcome[0]:
        same_outcome = False
    elif my_outcome[0] == "raised":
        same_outcome = _same_error(my_outcome[1], their_outcome[1])
    else:
        same_outcome = not graded or _plain(my_outcome[1]) == _plain(their_outcome[1])
    return same_outcome and same_state and my_args == their_args


def _key(skeleton: Skeleton, obj: Any) -> Hashable:
    try:
        return skeleton.key(obj)
    except Exception as exc:
        return Unreadable(exc)


def _detail(skeleton: Skeleton, obj: Any) -> dict[str, Any]:
    try:
        return skeleton.detail(obj) if skeleton.detail is not None else {}
    except Exception:
        return {}


def _same_error(mine: Any, theirs: Any) -> bool:
    """Same name, or same builtin base and neither is it: an IndexError is no NoVictim."""
    a, b = type(mine), type(theirs)
    same_base = _builtin(mine) == _builtin(theirs)
    return a.__name__ == b.__name__ or (
        same_base and (a.__module__ == "builtins") == (b.__module__ == "builtins")
    )


def _builtin(exc: Any) -> str:
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins":
            return cls.__name__
    return type(exc).__name__  # pragma: no cover


def _plain(value: Any) -> Hashable:
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return value
    if isinstance(value, Mapping):
        return tuple(sorted((repr(k), _plain(v)) for k, v in value.items()))
    iterable = hasattr(value, "__iter__") and not hasattr(value, "__dict__")
    if isinstance(value, list | tuple | set | frozenset) or iterable:
        try:
            return tuple(_plain(v) for v in value)
        except Exception:
            return type(value).__name__
    seq_id = getattr(value, "seq_id", None)
    if seq_id is not None:
        return ("seq", seq_id, getattr(value, "num_tokens", None))
    if hasattr(value, "__dict__"):
        return (type(value).__name__, _plain(vars(value)))
    return type(value).__name__


def _plain_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable:
    return (_plain(args), _plain(kwargs))


Spy = Callable[[Any, tuple[Any, ...], dict[str, Any], Callable[..., Any]], Any]


def _spied(cls: type, name: str, spy: Spy) -> type | None:
    static = inspect.getattr_static(cls, name, None)
    if not isinstance(static, types.FunctionType):
        return None
    original = static

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return spy(self, args, kwargs, original)

    return _layer(cls, name, wrapper)


def _divergence(
    skeleton: Skeleton,
    program: str,
    impl: Any,
    reference: Any,
    method: str,
    support: Sequence[str],
    strict: bool = False,
) -> Divergence | None:
    """The first call into ``method`` that differs; ``strict``: in any field, not the key alone."""
    prefix, name = _split(method)
    classes = _classes(impl)
    hybrid = _classes(graft(impl, reference, [method, *support]))[prefix]
    spy = _Spy(skeleton, method, hybrid, name not in skeleton.ungraded_returns, strict)
    watched = _spied(classes[prefix], name, spy)
    if watched is None:
        return None
    spied_impl: Any = watched if isinstance(impl, type) else {**impl, prefix: watched}
    _run(skeleton, program, spied_impl)
    if spy.found is None:
        return None
    return dataclasses.replace(spy.found, program=program, impl=impl, unkeyed=strict)


class _Capture:
    """Keeps a copy of the object and the arguments just before one outermost call."""

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self.calls = 0
        self.depth = 0
        self.state: tuple[Any, tuple[Any, ...], dict[str, Any]] | None = None

    def __call__(
        self, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any], original: Callable[..., Any]
    ) -> Any:
        if self.depth or OBSERVING[0]:
            return original(obj, *args, **kwargs)
        self.calls += 1
        if self.calls == self.ordinal:
            try:
                self.state = copy.deepcopy((obj, args, kwargs))
            except Exception:
                self.state = None
        self.depth += 1
        try:
            return original(obj, *args, **kwargs)
        finally:
            self.depth -= 1


def state_before(
    skeleton: Skeleton, d: Divergence, program: str
) -> tuple[Any, tuple[Any, ...], dict[str, Any], dict[str, Any]] | None:
    """The learner's object, the call's arguments and the fields just before the call that
    diverged in ``d``, the same method's call of the same rank, in ``program`` (another
    program, such as the same one built with other numbers); None when there is none."""
    if d.impl is None or not d.ordinal:
        return None
    prefix, name = _split(d.method)
    capture = _Capture(d.ordinal)
    classes = _classes(d.impl)
    if prefix not in classes:
        return None
    watched = _spied(classes[prefix], name, capture)
    if watched is None:
        return None
    _run(skeleton, program, watched if isinstance(d.impl, type) else {**d.impl, prefix: watched})
    if capture.state is None:
        return None
    obj, args, kwargs = capture.state
    try:
        fields = {**skeleton.fields(obj), **_out_fields(args, kwargs)}
    except Exception:
        return None
    return obj, tuple(args), dict(kwargs), fields


# ----------------------------------------------------------------------------- the search


def localise(skeleton: Skeleton, program: str, impl: Any, reference: Any) -> Localisation:
    """Where ``impl`` starts to differ from the checkpoint ``reference`` on ``program``."""
    if not _classes(impl) or set(_classes(impl)) != set(_classes(reference)):
        return Localisation(note="not a class built on the notebook's skeleton")
    candidates = skeleton_methods(reference)
    missing_fields = _missing_fields(skeleton, program, impl, reference)
    if missing_fields:
        shown = ", ".join(f"`{f}`" for f in missing_fields[:3])
        return Localisation(
            note=f"your class does not keep the skeleton's fields ({shown} missing), so the "
            "grader cannot point at one method"
        )
    classes = _classes(impl)
    support = [m for m in candidates if not hasattr(classes[_split(m)[0]], _split(m)[1])]
    present = [m for m in candidates if m not in support]
    spare = [m for m in skeleton_methods(reference, ready_made=True) if m not in support]
    if not present:
        return Localisation(note="your class has none of the skeleton's methods")
    expected = _run(skeleton, program, reference)
    absent = _not_at_this_step(expected)
    if absent:  # a finished class graded at an earlier step: what that step lacks is no rule
        run = skeleton.run
        skeleton = dataclasses.replace(skeleton, run=lambda p, i: _without(run(p, i), absent))
        expected = _run(skeleton, program, reference)
    if _run(skeleton, program, impl) == expected:
        return Localisation()
    fixers: list[tuple[str, ...]] = []
    for method in present:
        if _run(skeleton, program, graft(impl, reference, [method, *support])) == expected:
            fixers.append((method,))
    if not fixers:
        for pair in itertools.islice(itertools.combinations(present, 2), MAX_PAIRS):
            if _run(skeleton, program, graft(impl, reference, [*pair, *support])) == expected:
                fixers.append(pair)
    if not fixers:  # the skeleton's ready-made methods, which a learner may have changed too
        for method in spare:
            if _run(skeleton, program, graft(impl, reference, [method, *support])) == expected:
                fixers.append((method,))
    if not fixers:
        group = _grown_group(skeleton, program, impl, reference, present, support, expected)
        fixers.extend([group] if group else [])
    if not fixers:
        return Localisation(
            note="no one method of this step (nor two or three of them), replaced by the "
            "reference's, makes this program behave as expected"
        )
    best: tuple[tuple[str, ...], Divergence | None] | None = None
    # by the key first; then by every field (a free list's order, which a later line reads)
    for strict in (False, True):
        for group in fixers:
            for method in group:
                found = _divergence(skeleton, program, impl, reference, method, support, strict)
                if found is not None and (
                    best is None or best[1] is None or found.index < best[1].index
                ):
                    best = (group, found)
        if best is not None:
            break
    if best is None:
        best = (fixers[0], None)
    if len(fixers) > 1 and best[1] is None:
        return Localisation(methods=tuple(sorted({m for g in fixers for m in g})))
    return Localisation(methods=best[0], divergence=best[1])


def _not_at_this_step(run: Any) -> frozenset[str]:
    """The fields of a replay that the checkpoint cannot read for want of a method
    (AttributeError): at an earlier step it has no ``eviction_order`` yet, and a learner's
    finished class, which has one, is not wrong for showing it."""
    found: set[str] = set()
    if isinstance(run, tuple | list):
        for item in run:
            if (
                isinstance(item, tuple)
                and len(item) == 2
                and isinstance(item[0], str)
                and item[1] == ("unreadable", "AttributeError")  # an Unreadable, as replayed
            ):
                found.add(item[0])
            else:
                found |= _not_at_this_step(item)
    return frozenset(found)


def _without(run: Any, names: frozenset[str]) -> Any:
    """A replay with the fields ``names`` left out, wherever they are observed."""
    if not isinstance(run, tuple | list):
        return run
    kept = [
        _without(x, names)
        for x in run
        if not (isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) and x[0] in names)
    ]
    return type(run)(kept) if type(run) in (tuple, list) else run


def _agreeing(run: list[Any], expected: list[Any]) -> int:
    """How many of a replay's first lines observe what the reference's do."""
    pairs = enumerate(zip(run, expected, strict=False))
    return next((i for i, (a, b) in pairs if a != b), min(len(run), len(expected)))


def _grown_group(
    skeleton: Skeleton,
    program: str,
    impl: Any,
    reference: Any,
    present: Sequence[str],
    support: Sequence[str],
    expected: list[Any],
) -> tuple[str, ...] | None:
    """Up to :data:`MAX_GROUP` methods whose grafts together make the program agree, grown one
    method at a time: each time the one whose graft keeps the program agreeing longest. A
    slip spread over three methods (pins kept in a field of one's own by ``pin``, ``unpin``
    and the victim choice) is found in a few replays per method, not in every triple."""
    chosen: list[str] = []
    for _ in range(MAX_GROUP):
        best: tuple[int, str] | None = None
        for method in present:
            if method in chosen:
                continue
            run = _run(skeleton, program, graft(impl, reference, [*chosen, method, *support]))
            if run == expected:
                return (*chosen, method) if len(chosen) >= 2 else None
            if best is None or _agreeing(run, expected) > best[0]:
                best = (_agreeing(run, expected), method)
        if best is None:
            return None
        chosen.append(best[1])
    return None
