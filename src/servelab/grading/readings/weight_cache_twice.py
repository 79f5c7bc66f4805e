"""A reading of a put that raised KeyError where the reference evicts: on a copy, yours asked
``_next_victim`` once and passed that one answer to ``_evict`` twice, the second time after
the key was gone."""

from __future__ import annotations

import copy
from typing import Any

from servelab.grading.readings.difference import Difference
from servelab.grading.replay import LINES_PER_CALL, OutOfLines, line_budget

__all__ = ["evicted_twice"]


def _calls_on_copy(d: Difference) -> tuple[list[Any], list[Any]] | None:
    """Your put again on a copy, recording the answers of ``_next_victim`` and the keys given
    to ``_evict``; None unless it raises KeyError again."""
    asked: list[Any] = []
    evicted: list[Any] = []
    try:
        obj = copy.deepcopy(d.subject)
        choose, evict = obj._next_victim, obj._evict

        def next_victim(*args: Any, **kwargs: Any) -> Any:
            asked.append(choose(*args, **kwargs))
            return asked[-1]

        def evict_one(key: Any, *args: Any, **kwargs: Any) -> Any:
            evicted.append(key)
            return evict(key, *args, **kwargs)

        obj._next_victim, obj._evict = next_victim, evict_one
        with line_budget(LINES_PER_CALL):
            obj.put(*d.args)
    except KeyError:
        return asked, evicted
    except (Exception, OutOfLines):
        return None
    return None


def evicted_twice(d: Difference) -> str | None:
    """A put that raised KeyError, whose ``_next_victim`` answered once and whose ``_evict``
    got that key twice."""
    if d.method != "put" or not d.error("mine").startswith("KeyError") or d.they_raised:
        return None
    calls = _calls_on_copy(d)
    if calls is None:
        return None
    asked, evicted = calls
    if len(asked) != 1 or len(evicted) < 2 or evicted[:2] != [asked[0], asked[0]]:
        return None
    key = asked[0]
    return (
        f"yours evicted {key!r} twice in this put: on a copy, your put asked _next_victim "
        f"once (it answered {key!r}) and passed that one answer to _evict twice, the second "
        f"time after {key!r} was gone. Every eviction needs a victim of its own: ask "
        "_next_victim inside the loop, once per eviction, while the new entry does not fit"
    )
