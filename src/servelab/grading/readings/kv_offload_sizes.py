"""A reading of a ``_payload_size`` that differs from the payload's length, proved by calling
yours again on payloads of other lengths: a number of bytes added to every chunk, whatever its
length, or every length scaled by one factor."""

from __future__ import annotations

from servelab.grading.readings.difference import Difference

__all__ = ["payload_size"]

_LENGTHS = (1, 7, 100, 4096)


def payload_size(d: Difference) -> str | None:
    """Yours sizes each payload tried at its length plus one same number of bytes (or at one
    same multiple of it), where a chunk's bytes in a tier are its payload's length."""
    payload = d.args[0] if d.args else None
    if not isinstance(payload, bytes | bytearray) or not payload or d.i_raised or d.they_raised:
        return None
    sizes = []
    for n in (len(payload), *_LENGTHS):
        got = d.probe("_payload_size", b"x" * n)
        value = got[1]
        if got[0] != "returned" or isinstance(value, bool) or not isinstance(value, int):
            return None
        sizes.append((n, value))
    extra = {value - n for n, value in sizes}
    tried = ", ".join(str(n) for n, _ in sizes[1:])
    if len(extra) == 1 and (added := extra.pop()) != 0:
        more = f"{added} more" if added > 0 else f"{-added} fewer"
        return (
            f"yours counts {more} bytes than the payload's length for every chunk, at every "
            f"length tried ({tried} bytes): a chunk's bytes in a tier are its payload's "
            "length, len(payload), whatever the tier stores beside the payload"
        )
    ratios = {value / n for n, value in sizes}
    if len(ratios) == 1 and (ratio := ratios.pop()) != 1:
        return (
            f"yours counts {ratio:g} times the payload's length, at every length tried "
            f"({tried} bytes): a chunk's bytes in a tier are its payload's length, len(payload)"
        )
    return None
