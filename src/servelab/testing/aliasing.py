"""A returned or stored object that is another's own: a list a method returns that the
structure itself holds, or a mutable argument the structure keeps instead of a copy.

Either way two parties share one object, and a change by one shows in the other: the caller
changes the list it got and the structure changes; the structure goes on and a list the caller
got earlier changes under it. Identity is a fact, not a guess, so a report may state it.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

__all__ = ["MUTABLE", "held_at", "own_line", "returned_own"]

#: The kinds of object whose sharing a caller can see: it can change them in place.
MUTABLE = (list, dict, set, deque, bytearray)


def _inside(container: Any) -> list[tuple[str, Any]]:
    """The (path suffix, value) pairs one level inside a list or a dict."""
    if isinstance(container, dict):
        return [(f"[{key!r}]", value) for key, value in list(container.items())]
    if isinstance(container, list | deque):
        return [(f"[{i}]", value) for i, value in enumerate(container)]
    return []


def held_at(owner: Any, value: Any) -> str | None:
    """Where ``owner`` holds ``value`` itself (the same object, not an equal one): its
    attribute (``queue``), or an entry of an attribute (``_data['a']``); None where it does
    not, or where ``value`` is nothing a caller could change in place."""
    if not isinstance(value, MUTABLE):
        return None
    try:
        fields: list[tuple[str, Any]] = list(vars(owner).items())
    except TypeError:
        return None
    for name, field in fields:
        if field is value:
            return name
        for suffix, inner in _inside(field):
            if inner is value:
                return f"{name}{suffix}"
    return None


#: The line a check writes under reproduce: when a call returned the structure's own object.
_OWN_LINE = re.compile(r"^(\w+)\.(\w+)\((.*)\) is \1\.([\w\[\]'\"-]+)  # True$")


def own_line(var: str, call: str, held: str) -> str:
    """The reproduce: line that shows ``var.call`` returned what ``var`` holds at ``held``."""
    return f"{var}.{call} is {var}.{held}  # True"


def returned_own(program: str, method: str) -> str | None:
    """Where the last line of ``program`` (a check's :func:`own_line`) shows that ``method``
    returned the structure's own object: that fact and the rule, in a sentence; else None."""
    lines = [line.strip() for line in program.splitlines() if line.strip()]
    found = _OWN_LINE.match(lines[-1]) if lines else None
    if found is None or found.group(2) != method.rpartition(".")[2]:
        return None
    name, held = found.group(2), found.group(4)
    return (
        f"yours returns the object itself that the structure keeps at `{held}`, not a copy "
        f"(the last line under reproduce: shows they are the same object): a caller that "
        f"changes what {name}() returned changes the structure, and what an earlier call "
        f"returned changes as the structure goes on. Return a new one (`list(...)`, "
        f"`dict(...)`)"
    )
