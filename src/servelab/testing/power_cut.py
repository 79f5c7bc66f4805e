"""Which renames would a power cut undo? The observer a crash-safe write is graded with.

A write into the page cache survives a kill (the kernel still holds it) but not a power cut:
only ``fsync`` puts a file's bytes on the disk. A filesystem may persist a rename before the
data of the file renamed, so a chunk written to a temporary file and ``os.replace``-d over its
name without an ``fsync`` in between can read back empty or short after the power comes back,
under the chunk's final name: the torn chunk the rename was meant to prevent. Within
:func:`unsynced_renames`, each rename whose source file holds bytes that no ``fsync`` covered
is recorded; :func:`power_cut` then cuts the power at the end of its block. Files are told
apart by device and inode, so an ``fsync`` through any descriptor of the file counts, however
it was opened; bytes still in Python's buffer when ``fsync`` ran (a ``flush`` missing before
it) are not covered.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LateRename", "power_cut", "unsynced_renames"]


@dataclass(frozen=True)
class LateRename:
    """A rename over ``name`` of a file of ``size`` bytes, ``synced`` of them on the disk at
    its last ``fsync`` (None: never synced)."""

    name: str
    size: int
    synced: int | None

    def __repr__(self) -> str:
        return f"LateRename({self.name!r}, size={self.size}, synced={self.synced})"


def _fd(target: Any) -> int:
    return target if isinstance(target, int) else target.fileno()


@contextmanager
def unsynced_renames() -> Iterator[list[LateRename]]:
    """Within the block, every ``os.replace``/``os.rename`` (``Path.replace``, ``shutil.move``
    on one filesystem) of a file with bytes no ``fsync`` covered is appended to the yielded
    list, as the destination's name with the file's size and the bytes synced."""
    real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename
    synced: dict[tuple[int, int], int] = {}  # (device, inode) -> size at its last fsync
    late: list[LateRename] = []

    def fsync(target: Any) -> None:
        real_fsync(target)
        st = os.fstat(_fd(target))
        synced[(st.st_dev, st.st_ino)] = st.st_size

    def checked(real: Any) -> Any:
        def move(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            st = None
            if not args and not kwargs:  # relative to a directory descriptor: not followed
                try:
                    st = os.stat(src)
                except (OSError, TypeError, ValueError):
                    st = None
            real(src, dst, *args, **kwargs)
            if st is None or not os.path.isfile(dst):
                return
            covered = synced.get((st.st_dev, st.st_ino))
            if st.st_size > (covered or 0):
                late.append(LateRename(Path(os.fsdecode(dst)).name, st.st_size, covered))

        return move

    os.fsync = fsync  # type: ignore[assignment]
    os.replace, os.rename = checked(real_replace), checked(real_rename)
    try:
        yield late
    finally:
        os.fsync, os.replace, os.rename = real_fsync, real_replace, real_rename


@contextmanager
def power_cut() -> Iterator[list[LateRename]]:
    """The power goes at the end of the block: every file renamed in it keeps only the bytes
    an ``fsync`` put on the disk (the worst a filesystem may leave: the rename persisted, the
    data not). Yields the renames it cut, as :func:`unsynced_renames` records them."""
    with unsynced_renames() as late:
        moved: list[tuple[Path, LateRename]] = []
        real_replace, real_rename = os.replace, os.rename

        def remembered(real: Any) -> Any:
            def move(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
                before = len(late)
                real(src, dst, *args, **kwargs)
                if len(late) > before:
                    moved.append((Path(os.fsdecode(dst)), late[-1]))

            return move

        os.replace, os.rename = remembered(os.replace), remembered(os.rename)
        try:
            yield late
        finally:
            os.replace, os.rename = real_replace, real_rename
            for path, cut in moved:
                if path.is_file():
                    os.truncate(path, cut.synced or 0)
