"""Every module of the package is small enough to read in one sitting: at most 700 lines."""

from __future__ import annotations

from pathlib import Path

import servelab

MAX_LINES = 700
PACKAGE = Path(servelab.__file__).parent


def _lines() -> dict[str, int]:
    return {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_no_module_is_over_the_limit() -> None:
    over = {name: n for name, n in _lines().items() if n > MAX_LINES}
    assert not over, f"over {MAX_LINES} lines, split by concept: {over}"
