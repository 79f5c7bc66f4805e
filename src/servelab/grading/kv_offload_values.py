"""Values the kv-offload probes write into their programs, and what they read back out."""

from __future__ import annotations

from typing import Any


class Payload:
    """An argument written ``payload('a', 30)``: the program builds its bytes by that call."""

    def __init__(self, key: str, size: int) -> None:
        self.key, self.size = key, size

    def __repr__(self) -> str:
        return f"payload({self.key!r}, {self.size})"


class Shown(str):
    """Words shown in place of a value, without the quotes of a string's repr."""

    def __repr__(self) -> str:
        return str(self)


def victims(result: Any) -> Any:
    """The keys of a put's (key, payload) pairs, or None for a miss. Anything else is what it
    returned, in words that equal no list of keys: unpacked as pairs, a list of two-letter keys
    would pass for its letters."""
    if result is None:
        return None
    if isinstance(result, list) and all(type(e) is tuple and len(e) == 2 for e in result):
        return [k for k, _ in result]
    return Shown(f"{result!r}, not a list of (key, payload) pairs")
