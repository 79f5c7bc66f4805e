"""The ``servelab`` command as a user types it: each demo option, run from the shell."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SERVELAB = Path(sys.executable).parent / "servelab"  # the console script of this environment

# One small demo per option (a single request unless the option is --requests), each with
# what the summary must then say. The command is the literal line a user types.
DEMO_OPTIONS = [
    ("--requests 2", "2 requests"),
    ("--requests 1 --num-blocks 20", "pool of 20 blocks x 16 tokens"),
    ("--requests 1 --block-size 8", "pool of 48 blocks x 8 tokens"),
    ("--requests 1 --device cpu", "on cpu,"),
    ("--requests 1 --preemption swap", "(swap)"),
    ("--requests 2 --no-prefix-cache", "prefix hits  0 of"),
    ("--requests 1 --seed 3", "1 requests"),
    ("--requests 1 --no-check", "KV waste"),
    ("--requests 1 --quiet", "1/1 greedy outputs equal dense generation"),
]


def _shell(line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        f"{SERVELAB} {line}", shell=True, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(("options", "says"), DEMO_OPTIONS, ids=[o for o, _ in DEMO_OPTIONS])
def test_each_demo_option_works_from_the_shell(options: str, says: str) -> None:
    done = _shell(f"demo {options}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert says in done.stdout
    assert ("check " in done.stdout) != ("--no-check" in options)
    assert ("tok/s" in done.stderr or "tok]" in done.stderr) != ("--quiet" in options)


def test_demo_still_accepts_the_separator_and_shows_its_own_help() -> None:
    done = _shell("demo -- --requests 1 --quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    helped = _shell("demo --help")
    assert helped.returncode == 0 and "--num-blocks" in helped.stdout
    wrong = _shell("demo --requests two")
    assert wrong.returncode == 2 and "--requests" in wrong.stderr
