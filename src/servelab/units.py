"""Human units for messages and reports (decimal, as model sizes are quoted: 140 GB = 140e9 B)."""

from __future__ import annotations

__all__ = ["GB", "KB", "MB", "TB", "format_bytes"]

KB = 1_000
MB = 1_000_000
GB = 1_000_000_000
TB = 1_000_000_000_000


def format_bytes(n: int | float) -> str:
    """``format_bytes(140e9) == '140 GB'``; keeps three significant digits."""
    value = float(n)
    for unit, scale in (("TB", TB), ("GB", GB), ("MB", MB), ("kB", KB)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{int(value)} B"
