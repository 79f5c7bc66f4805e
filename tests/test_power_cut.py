"""A disk tier's write must survive a power cut, not only a kill: the temporary file's bytes are
``fsync``-ed before its rename. The observer finds renames no ``fsync`` (or ``fdatasync``)
covered, however the file was opened and under whatever name the function was imported; the
grade's probe fails a put that skips the ``fsync`` or runs it before the ``flush``, and passes
one that syncs through another descriptor or by a name of its own module."""

from __future__ import annotations

import io
import os
import sys
from os import fsync
from pathlib import Path

import pytest

from servelab import checkpoint
from servelab.grading import GradeFailure, grade
from servelab.grading.kv_offload_crash import synced_before_renamed
from servelab.testing.kv_offload import power_cut, unsynced_renames

CORRECT = checkpoint("kv-offload", 3)
REAL = (os.fsync, os.fdatasync, os.replace, os.rename)


def _real() -> tuple[object, ...]:
    return (os.fsync, os.fdatasync, os.replace, os.rename)


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


def _data_synced(path: Path) -> None:
    with open(_temporary(path), "wb") as f:
        f.write(b"x" * 40)
        f.flush()
        os.fdatasync(f.fileno())
    os.replace(_temporary(path), path)


def _synced_by_a_name_of_its_own(path: Path) -> None:
    with open(_temporary(path), "wb") as f:
        f.write(b"x" * 40)
        f.flush()
        fsync(f.fileno())  # this module's name for os.fsync, bound before any block
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
    assert _real() == REAL


@pytest.mark.parametrize(
    "write",
    [_synced, _synced_through_another_descriptor, _data_synced, _synced_by_a_name_of_its_own],
)
def test_a_rename_after_an_fsync_of_every_byte_is_not(tmp_path: Path, write) -> None:
    with unsynced_renames(sys.modules[__name__]) as late:
        write(tmp_path / "b.chunk")
    assert late == []
    assert fsync is os.fsync  # the module's own name is given back


def test_a_name_of_a_watched_class_module_is_seen_and_given_back(tmp_path: Path) -> None:
    class Writer:
        pass

    with power_cut(Writer) as cut:
        assert fsync is os.fsync and fsync is not REAL[0]  # watched while the block runs
        _synced_by_a_name_of_its_own(tmp_path / "b.chunk")
    assert cut == []
    assert (tmp_path / "b.chunk").stat().st_size == 40
    assert fsync is REAL[0]
    assert _real() == REAL


def test_only_the_last_rename_over_a_name_is_cut(tmp_path: Path) -> None:
    with power_cut() as cut:
        _unsynced(tmp_path / "twice.chunk")
        _synced(tmp_path / "twice.chunk")
        _synced(tmp_path / "once.chunk")
        _unsynced(tmp_path / "once.chunk")
    assert [(r.name, r.synced) for r in cut] == [("once.chunk", None)]
    assert (tmp_path / "twice.chunk").stat().st_size == 40
    assert (tmp_path / "once.chunk").stat().st_size == 0


def test_a_renamed_file_gone_from_its_name_is_not_listed_as_cut(tmp_path: Path) -> None:
    """A file renamed on to another name, or removed, was not cut under the first name."""
    with power_cut() as cut:
        _unsynced(tmp_path / "moved.chunk")
        os.replace(tmp_path / "moved.chunk", tmp_path / "there.chunk")
        _unsynced(tmp_path / "removed.chunk")
        os.remove(tmp_path / "removed.chunk")
    assert [(r.name, r.size, r.synced) for r in cut] == [("there.chunk", 40, None)]
    assert (tmp_path / "there.chunk").stat().st_size == 0


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
    assert _real() == REAL
    assert (tmp_path / "b.chunk").stat().st_size == 0


def _disk(write) -> type:
    class Disk(CORRECT["DiskTier"]):
        def _write(self, key, payload):
            final = self.path(key)
            with open(_temporary(final), "wb") as f:
                f.write(payload)
                if write == "fsync before flush":
                    os.fsync(f.fileno())
                elif write != "no fsync":
                    f.flush()
                if write == "fdatasync":
                    os.fdatasync(f.fileno())
                elif write == "fsync by name":
                    fsync(f.fileno())
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
        ("no fsync", "no os.fsync (or fdatasync) of the file was seen before it was renamed"),
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


@pytest.mark.parametrize(
    "impl",
    [
        CORRECT,
        *(
            {**CORRECT, "DiskTier": _disk(w)}
            for w in ("another descriptor", "fdatasync", "fsync by name")
        ),
    ],
)
def test_a_put_synced_before_its_rename_meets_the_probe(impl) -> None:
    synced_before_renamed(impl)  # raises nothing
