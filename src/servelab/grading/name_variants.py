"""Variants of a program with its key names exchanged among themselves.

Number variants (:func:`servelab.grading.diagnose.variants`) leave the names a program gives
its keys as they are, and programs put keys in the order of their names ('a', then 'b'): a
rule on names (the first key by name) then picks the same key as a rule on arrival (the
oldest), and a slip agrees with a known mistake by a coincidence of values. Replayed with the
names exchanged, arrival and name order part, and so do the two.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

__all__ = ["NAME_VARIANTS", "name_variants"]

#: Variants of each program with its names exchanged (the first reverses their order).
NAME_VARIANTS = 2
_NAME = re.compile(r"(['\"])([a-z_][a-z0-9_]*)\1")


def _exchanger(swap: dict[str, str]) -> Callable[[re.Match[str]], str]:
    def exchange(match: re.Match[str]) -> str:
        return f"{match.group(1)}{swap[match.group(2)]}{match.group(1)}"

    return exchange


def name_variants(program: str, count: int = NAME_VARIANTS) -> list[str]:
    """Up to ``count`` copies of ``program`` with its lower-case quoted names exchanged: the
    first with their order reversed, the others by a generator seeded with their index (the
    same variants on every run). None where the program quotes fewer than two names."""
    names = sorted({m.group(2) for m in _NAME.finditer(program)})
    if len(names) < 2:
        return []
    orders = [names[::-1]]
    for i in range(1, count):
        order = list(names)
        random.Random(i).shuffle(order)
        orders.append(order)
    texts = []
    for order in orders[:count]:
        text = _NAME.sub(_exchanger(dict(zip(names, order, strict=True))), program)
        if text != program and text not in texts:
            texts.append(text)
    return texts
