"""The disk tier: crash safety under SIGKILL at each write stage, and verified reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from servelab.kv.offload import (
    CorruptChunk,
    OffloadHierarchy,
    Tier,
    chunk_keys,
    disk_tier,
)
from servelab.kv.offload.disk import SUFFIX

HERE = Path(__file__).parent
OLD, NEW = chunk_keys(list(range(8)), chunk_tokens=4)


def kill_at(root: Path, stage: str) -> None:
    """Run a writer of NEW and SIGKILL it once it prints that it reached ``stage``."""
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "offload_crash_writer.py"),
            str(root),
            f"{NEW:064x}",
            "5000",
            stage,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    pid, at = proc.stdout.readline().split()  # the marker: the writer is parked at the stage
    assert at == stage and int(pid) == proc.pid
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL


@pytest.mark.parametrize(
    ("stage", "survives"), [("partial", False), ("synced", False), ("replaced", True)]
)
def test_sigkill_at_each_stage_leaves_the_old_state_or_the_new_never_torn(
    tmp_path: Path, stage: str, survives: bool
) -> None:
    first = disk_tier(tmp_path, 1 << 20)
    first.put(OLD, b"o" * 3000)
    kill_at(tmp_path, stage)
    if not survives:
        assert any(p.name.endswith(".tmp") for p in tmp_path.iterdir())  # the torn temp file
    reopened = disk_tier(tmp_path, 1 << 20)
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())  # a dead writer's
    assert reopened.get(OLD) == b"o" * 3000
    if survives:
        assert sorted(reopened.keys()) == sorted([OLD, NEW])
        assert reopened.get(NEW) == b"n" * 5000
    else:
        assert reopened.keys() == [OLD]


def test_a_finished_write_is_there_after_reopening(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(HERE / "offload_crash_writer.py"),
            str(tmp_path),
            f"{NEW:064x}",
            "10",
            "none",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split()[1] == "done"
    assert disk_tier(tmp_path, 1 << 20).get(NEW) == b"n" * 10


@pytest.mark.parametrize("damage", ["truncate", "flip", "other-key", "gone"])
def test_a_damaged_chunk_is_never_served_and_nothing_changes(tmp_path: Path, damage: str) -> None:
    """Mistake: serving a torn disk write as KV."""
    disk = disk_tier(tmp_path, 1 << 20)
    h = OffloadHierarchy([Tier(100, name="cpu"), disk])
    disk.put(OLD, b"a" * 50)
    disk.put(NEW, b"b" * 50)
    path = tmp_path / f"{NEW:064x}{SUFFIX}"
    raw = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip":
        path.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    elif damage == "other-key":
        os.replace(tmp_path / f"{OLD:064x}{SUFFIX}", path)
        (tmp_path / f"{OLD:064x}{SUFFIX}").write_bytes(raw)
    else:
        path.unlink()
    lk = h.lookup([OLD, NEW])
    assert lk.hits == 2
    before = [(t.keys(), t.used, t.held_bytes, t.eviction_order()) for t in h.tiers]
    with pytest.raises(CorruptChunk):
        h.retrieve(lk)
    assert [(t.keys(), t.used, t.held_bytes, t.eviction_order()) for t in h.tiers] == before
    assert lk.open  # still pinned: the caller releases it and drops the chunk
    h.release(lk)
    disk.remove(NEW)
    assert disk.keys() == [OLD] or damage == "other-key"


def test_reopening_adopts_oldest_first_within_the_budget(tmp_path: Path) -> None:
    disk = disk_tier(tmp_path, 1 << 20)
    ks = chunk_keys(list(range(40)), chunk_tokens=4)
    for k in ks:
        disk.put(k, b"x" * 19)  # 100 bytes a file with its frame
    size = disk.size_of(ks[0])
    small = disk_tier(tmp_path, 3 * size)
    assert small.used == 3 * size and len(small) == 3
    assert len(list(tmp_path.glob(f"*{SUFFIX}"))) == 3


def test_tensors_go_to_disk_and_come_back_bit_for_bit(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from servelab.kv.offload.cpu import cpu_tier

    kv = torch.randn(2, 2, 4, 2, 8)
    h = OffloadHierarchy([cpu_tier(kv.nbytes, pin_memory=None), disk_tier(tmp_path, 1 << 20)])
    a, b = chunk_keys(list(range(8)), chunk_tokens=4)
    h.store(a, kv)
    h.store(b, kv + 1)  # evicts a from the CPU into the disk tier
    assert h.where(a) == ["disk"] and h.where(b) == ["cpu"]
    (got,) = h.retrieve(h.lookup([a]))
    assert torch.equal(got, kv)
    assert h.where(a) == ["cpu", "disk"] and h.where(b) == ["disk"]  # a promoted, b written back
    got_a, got_b = h.retrieve(h.lookup([a, b]))
    assert torch.equal(got_a, kv) and torch.equal(got_b, kv + 1)
    assert h.where(b) == ["disk"]  # a is pinned by the lookup: no room to promote b


def test_pin_memory_without_cuda_raises_at_construction() -> None:
    torch = pytest.importorskip("torch")
    from servelab.kv.offload import InvalidPayload, PinnedMemoryUnavailable
    from servelab.kv.offload.cpu import cpu_tier

    if torch.cuda.is_available():
        assert cpu_tier(1024, pin_memory=True).storage.pin_memory  # type: ignore[attr-defined]
        return
    with pytest.raises(PinnedMemoryUnavailable):
        cpu_tier(1024, pin_memory=True)
    tier = cpu_tier(1024)
    with pytest.raises(InvalidPayload):
        tier.put(1, b"bytes are not a tensor")


@pytest.mark.gpu
def test_gpu_kv_goes_to_pinned_host_memory_and_back(tmp_path: Path) -> None:
    import torch

    from servelab.kv.offload.cpu import cpu_tier

    kv = torch.randn(2, 2, 16, 2, 64, device="cuda", dtype=torch.bfloat16)
    cpu = cpu_tier(kv.nbytes)
    h = OffloadHierarchy([cpu, disk_tier(tmp_path, 1 << 20)])
    a, b = chunk_keys(list(range(32)), chunk_tokens=16)
    h.store(a, kv)
    assert cpu.storage.pin_memory and cpu.storage.read(a, cpu._handles[a]).device.type == "cpu"  # type: ignore[attr-defined]
    h.store(b, kv * 2)  # a goes to disk
    (got,) = h.retrieve(h.lookup([a]))
    assert torch.equal(got.to("cuda"), kv)
