"""Where a call answers a key the object no longer holds: the learner's own list (or deque) that
still holds it, as it was before the call. A list kept across calls that nothing updates when a
key leaves goes stale; showing the list with the departed key in it is the cause, not a guess."""

from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ["stale_holder"]

_SHOWN = 6  # entries of the list shown, at most


def stale_holder(subject: Any, shown: str | None, held: Any) -> str | None:
    """``yours returned 'b', which is not resident: your `_name` ([...]) still holds it ...``:
    the one ordered container among ``subject``'s
    attributes that holds a key shown as ``shown`` (its repr) while ``held`` (the keys the
    object holds) does not; None when none or several do, or when that key is held."""
    try:
        if shown in (None, "None") or any(repr(k) == shown for k in held):
            return None
        found = [
            (name, list(value))
            for name, value in sorted(vars(subject).items())
            if isinstance(value, list | deque) and any(repr(v) == shown for v in value)
        ]
    except Exception:
        return None
    if len(found) != 1:
        return None
    name, values = found[0]
    listed = ", ".join(repr(v) for v in values[:_SHOWN]) + (", ..." if len(values) > _SHOWN else "")
    return (
        f"yours returned {shown}, which is not resident: your `{name}` ([{listed}]) still holds "
        "it, as it was before this call; a list kept across calls goes stale when a key leaves "
        "and nothing takes it out"
    )
