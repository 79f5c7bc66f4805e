"""The held-bytes line of the hierarchy machine, told from the learner's own tiers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["held_bytes_message"]


def held_bytes_message(got: Mapping[str, Any], sizes: Mapping[str, int], held: int) -> str | None:
    """What is wrong with ``h.held_bytes()`` in ``got`` (the hierarchy's fields), or None.

    None where it is the reference's ``held``, and where it is the distinct bytes of the
    learner's own tiers: then the tiers differ from the reference's, and the comparison of the
    tiers tells that. Otherwise the line holds the distinct bytes of the learner's own tiers
    (a chunk's KV never changes size, so ``sizes`` gives each key's bytes)."""
    mine = got.get("held_bytes")
    if mine == held:
        return None
    keys: list[Any] = []
    for name in ("cpu", "disk"):
        tier = got.get(f"{name}.keys")
        try:
            if not isinstance(tier, list) or any(k not in sizes for k in tier):
                return None
        except TypeError:  # an entry that is no key (a list): the tiers' comparison tells it
            return None
        keys += tier
    own = sum(sizes[k] for k in set(keys))
    if mine == own:
        return None
    return (
        f"h.held_bytes() is {mine!r}; the distinct chunks in your tiers take {own} bytes "
        f"(cpu.keys {got.get('cpu.keys')!r}, disk.keys {got.get('disk.keys')!r})"
    )
