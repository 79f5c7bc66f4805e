"""The hang guard's count of time spent waiting for a CPU reads the thread's own schedstat,
from a descriptor opened once, and again after that descriptor was closed under it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from servelab.testing import core

SCHEDSTAT = Path(core._SCHEDSTAT)

pytestmark = pytest.mark.skipif(not SCHEDSTAT.exists(), reason="the kernel keeps no schedstat")


def fresh() -> float:
    return int(SCHEDSTAT.read_bytes().split()[1]) / 1e9


def test_it_reads_the_threads_own_schedstat() -> None:
    before = fresh()
    read = core.waiting_s()
    assert before <= read <= fresh()


def test_the_file_is_opened_once(monkeypatch: pytest.MonkeyPatch) -> None:
    core.waiting_s()
    opened: list[str] = []
    real = os.open

    def counted(path: str, *args: int) -> int:
        opened.append(path)
        return real(path, *args)

    monkeypatch.setattr(os, "open", counted)
    for _ in range(100):
        core.waiting_s()
    assert opened == []


def test_a_descriptor_closed_and_reused_is_opened_again() -> None:
    core.waiting_s()
    (fd,) = core._main_schedstat.values()
    os.close(fd)
    other = os.open(__file__, os.O_RDONLY)  # most likely takes the number just freed
    try:
        before = fresh()
        read = core.waiting_s()
        assert before <= read <= fresh()
        assert core._main_schedstat[os.getpid()] != other
    finally:
        os.close(other)
