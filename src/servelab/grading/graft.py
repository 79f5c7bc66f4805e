"""Hybrids of a learner's class and a checkpoint: some methods taken from the reference.

The checkpoints are chains of step classes whose methods call zero-argument ``super()``, and a
function keeps the ``__class__`` cell of the class it was written in. So a graft copies the
checkpoint's whole chain of definitions of a method, each as its own small subclass on top of
the learner's class, with a fresh ``__class__`` cell pointing at that subclass.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["changed_methods", "graft", "skeleton_methods"]


def _classes(impl: Any) -> dict[str, type]:
    """The graded classes by prefix: ``{"": cls}``, or ``{"LFU": ..., "SIEVE": ...}``."""
    if isinstance(impl, type):
        return {"": impl}
    if isinstance(impl, Mapping):
        return {str(k): v for k, v in impl.items() if isinstance(v, type)}
    return {}


def _split(qualified: str) -> tuple[str, str]:
    prefix, _, name = qualified.rpartition(".")
    return prefix, name


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _step_classes(reference: type) -> list[type]:
    """The checkpoint's step classes, most derived first: its MRO within its own module,
    without the ready-made skeleton."""
    module = reference.__module__
    return [
        c
        for c in reference.__mro__
        if c.__module__ == module and not c.__name__.endswith("Skeleton") and c is not object
    ]


def _definable(value: Any) -> bool:
    return isinstance(value, types.FunctionType | property | staticmethod | classmethod)


def _ready_made_classes(reference: type) -> list[type]:
    module = reference.__module__
    return [
        c for c in reference.__mro__ if c.__module__ == module and c.__name__.endswith("Skeleton")
    ]


def skeleton_methods(reference: Any, ready_made: bool = False) -> tuple[str, ...]:
    """The methods a learner writes up to the checkpoint ``reference``, in the order the
    steps introduce them (qualified by policy name for a dict of classes); with
    ``ready_made``, the methods the skeleton provides instead (a learner may change those too)."""
    names: list[str] = []
    for prefix, cls in _classes(reference).items():
        written = skeleton_methods(reference) if ready_made else []
        owners = _ready_made_classes(cls) if ready_made else reversed(_step_classes(cls))
        for step_cls in owners:
            for name, value in vars(step_cls).items():
                if _join(prefix, name) in written:
                    continue
                if _definable(value) and _join(prefix, name) not in names:
                    if name.startswith("__") and name not in {"__len__", "__contains__"}:
                        continue
                    names.append(_join(prefix, name))
    return tuple(names)


def changed_methods(impl: Any, correct: Any) -> frozenset[str]:
    """The methods ``impl`` defines on top of ``correct`` (a catalogue mistake's changes)."""
    found: set[str] = set()
    theirs = _classes(correct)
    for prefix, cls in _classes(impl).items():
        base = theirs.get(prefix)
        for c in cls.__mro__:
            if base is not None and c in base.__mro__:
                break
            found.update(_join(prefix, n) for n, v in vars(c).items() if _definable(v))
    return frozenset(found)


def _rebound(value: Any, owner: type) -> Any:
    """``value`` (a function, property, static or class method) with ``__class__`` = owner."""
    if isinstance(value, property):
        fget, fset, fdel = (
            _rebound(f, owner) if f else None for f in (value.fget, value.fset, value.fdel)
        )
        return property(fget, fset, fdel, value.__doc__)
    if isinstance(value, staticmethod | classmethod):
        return type(value)(_rebound(value.__func__, owner))
    if not isinstance(value, types.FunctionType):
        return value
    code = value.__code__
    if "__class__" not in code.co_freevars or value.__closure__ is None:
        return value
    cells = tuple(
        types.CellType(owner) if name == "__class__" else cell
        for name, cell in zip(code.co_freevars, value.__closure__, strict=True)
    )
    copied = types.FunctionType(code, value.__globals__, value.__name__, value.__defaults__, cells)
    copied.__kwdefaults__ = value.__kwdefaults__
    copied.__qualname__ = value.__qualname__
    copied.__doc__ = value.__doc__
    return copied


def _layer(base: type, name: str, value: Any) -> type:
    """A subclass of ``base`` (same name, no new slots) that defines ``name`` as ``value``."""

    def body(ns: dict[str, Any]) -> None:
        ns["__slots__"] = ()
        ns["__module__"] = base.__module__
        ns["__qualname__"] = base.__qualname__

    layer = types.new_class(base.__name__, (base,), exec_body=body)
    setattr(layer, name, _rebound(value, layer))
    return layer


def _graft_class(cls: type, reference: type, names: Sequence[str]) -> type:
    for name in names:
        chain = [c for c in reversed(reference.__mro__) if name in vars(c) and c is not object]
        for owner in chain:
            cls = _layer(cls, name, vars(owner)[name])
    return cls


def graft(impl: Any, reference: Any, methods: Sequence[str]) -> Any:
    """``impl`` with ``methods`` (qualified names) taken from ``reference``'s whole chain of
    definitions; a dict of classes stays a dict."""
    theirs = _classes(reference)
    grafted = {}
    for prefix, cls in _classes(impl).items():
        names = [n for p, n in map(_split, methods) if p == prefix]
        grafted[prefix] = _graft_class(cls, theirs[prefix], names) if names else cls
    if isinstance(impl, type):
        return grafted[""]
    return {**impl, **grafted}
