"""A decode that leaves running reversed is told so, and not "by id", where its two sequences'
id order is the reversed order too."""

from __future__ import annotations

from typing import Any

from buggy_impls import failing_report
from servelab import checkpoint


class _DecodeReversesRunning(checkpoint("scheduler", 2)):  # type: ignore[misc]
    """Rebuilds running from the front, each sequence put before the last: reversed."""

    def decode(self, out: Any) -> None:
        super().decode(out)
        self.running.reverse()


def test_a_reversed_running_is_told_reversed_not_by_id() -> None:
    said = str(failing_report("scheduler", _DecodeReversesRunning, 2)[0].hint)
    assert "yours left running reversed" in said
    assert "by id" not in said
