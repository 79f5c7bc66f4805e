"""A disk tier's write must survive a power cut, not only a kill: the temporary file's bytes are
``fsync``-ed before its rename. The observer finds renames no ``fsync`` covered, however the
file was opened; the grade's probe fails a put that skips the ``fsync`` or runs it before the
``flush``, and passes one that syncs through another descriptor."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.kv_offload_crash import synced_before_renamed
from servelab.testing.kv_offload import power_cut, unsynced_renames

CORRECT = checkpoint("kv-offload", 3)
REAL = (os.fsync, os.replace, os.rename)


def _temporary(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")


def _unsynced(path: Path) -> None:
    _temporary(path).write_bytes(b"x" * 40)
    _temporary(path).replace(path)


def _fsync_before_flush(path: Path) -> None:
    with open(_temporary(path), "wb") as f:
        f.write(b"x" * 40)
        os.fsync(f.fileno())
    os.replace(_temporary(path), path)


def _synced(path: Path) -> None:
    with open(_temporary(path), "wb") as f:
        f.write(b"x" * 40)
        f.flush()
        os.fsync(f.fileno())
    os.replace(_temporary(path), path)


def _synced_through_another_descriptor(path: Path) -> None:
    _temporary(path).write_bytes(b"x" * 40)
    fd = os.open(_temporary(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(_temporary(path), path)


@pytest.mark.parametrize(
    ("write", "synced"),
    [(_unsynced, None), (_fsync_before_flush, 0)],
)
def test_a_rename_no_fsync_covered_is_recorded(tmp_path: Path, write, synced) -> None:
    with unsynced_renames() as late:
        write(tmp_path / "b.chunk")
    assert [(r.name, r.size, r.synced) for r in late] == [("b.chunk", 40, synced)]
    assert (tmp_path / "b.chunk").stat().st_size == 40  # observing changes nothing
    assert (os.fsync, os.replace, os.rename) == REAL


@pytest.mark.parametrize("write", [_synced, _synced_through_another_descriptor])
def test_a_rename_after_an_fsync_of_every_byte_is_not(tmp_path: Path, write) -> None:
    with unsynced_renames() as late:
        write(tmp_path / "b.chunk")
    assert late == []


def test_the_power_cut_keeps_only_the_synced_bytes_of_each_renamed_file(tmp_path: Path) -> None:
    with power_cut() as cut:
        _synced(tmp_path / "a.chunk")
        _unsynced(tmp_path / "b.chunk")
    assert [r.name for r in cut] == ["b.chunk"]
    assert (tmp_path / "a.chunk").stat().st_size == 40
    assert (tmp_path / "b.chunk").stat().st_size == 0


def test_the_os_functions_come_back_after_an_error_in_the_block(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), power_cut():
        _unsynced(tmp_path / "b.chunk")
        raise RuntimeError("the program failed")
    assert (os.fsync, os.replace, os.rename) == REAL
    assert (tmp_path / "b.chunk").stat().st_size == 0


def _disk(write) -> type:
    class Disk(CORRECT["DiskTier"]):
        def _write(self, key, payload):
            final = self.path(key)
            with open(_temporary(final), "wb") as f:
                f.write(payload)
                if write == "fsync before flush":
                    os.fsync(f.fileno())
            if write == "another descriptor":
                fd = os.open(_temporary(final), os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
            os.replace(_temporary(final), final)
            return final

    return Disk


@pytest.mark.parametrize(
    ("write", "said"),
    [
        ("no fsync", "no fsync ran on the file before os.replace"),
        ("fsync before flush", "found 0 of them in the file (bytes still in Python's buffer"),
    ],
)
def test_a_put_renamed_before_its_bytes_were_synced_fails_its_grade(write: str, said: str) -> None:
    impl = {**CORRECT, "DiskTier": _disk(write)}
    texts = []
    for _ in range(2):
        with pytest.raises(GradeFailure) as failure:
            grade("kv-offload", impl, step=3, out=io.StringIO())
        texts.append(failure.value.report.text)
    assert texts[0] == texts[1]
    text = texts[0]
    assert "✗ step 3 · a chunk is synced before its rename" in text
    assert "after the power cut b.chunk holds 0 of 40 bytes" in text
    assert said in text
    assert "with power_cut() as cut: disk.put('b', payload('b', 40))" in text
    assert "your `DiskTier._write`" in text


@pytest.mark.parametrize("impl", [CORRECT, {**CORRECT, "DiskTier": _disk("another descriptor")}])
def test_a_put_synced_before_its_rename_meets_the_probe(impl) -> None:
    synced_before_renamed(impl)  # raises nothing
