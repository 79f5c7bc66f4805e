"""Step 3 probe of ``weight-cache``: the victim rule where there is no victim.

Step 3 asks ``_next_victim`` for None when every resident entry is pinned, and step 4's
``_check_can_admit`` keeps every later ``put`` from asking then: a rule no ``put`` of a graded
program reaches, so the probe calls ``_next_victim`` itself. It takes the topic's script class
(``CacheScript``) as its first argument, as :mod:`weight_cache_counts` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servelab.grading._script import Script
from servelab.grading.about import About, Hint

NO_VICTIM = Hint(
    "with every resident entry pinned there is no victim: `_next_victim` returns None (not a "
    "pinned key, and no exception); step 4 makes `put` check for that before its loop",
    About(("_next_victim",)),
)


def every_entry_pinned(script: Callable[[Any, int], Any], impl: Any) -> None:
    s = script(impl, 100)
    s.put("a", 40)
    s.put("b", 40)
    s.pin("a")
    s.pin("b")
    if not callable(getattr(s.cache, "_next_victim", None)):
        return  # a cache of another design (the package's) is judged by its puts alone
    code = "cache._next_victim()"
    why = "with every resident entry pinned ('a' and 'b'), expected None: there is no victim"
    try:
        got = s(code)
    except Exception as exc:
        raise s.fail_raising(f"{code} raised {type(exc).__name__} {why}", code) from None
    if got is not None:
        s.lines[-1] += f"  # {got!r}"  # the last line: pasted, it shows the value
        raise Script.fail(s, f"{code} returned {got!r} {why}")
