"""Which renames would a power cut undo? The observer a crash-safe write is graded with.

A write into the page cache survives a kill (the kernel still holds it) but not a power cut:
``fsync`` (or ``fdatasync``) puts a file's bytes on the disk. A filesystem may persist a rename
before the data of the file renamed, so a chunk written to a temporary file and
``os.replace``-d over its name without an ``fsync`` in between can read back empty or short
after the power comes back, under the chunk's final name: the torn chunk the rename was meant
to prevent. Within :func:`unsynced_renames`, each rename whose source file holds bytes that no
``fsync`` or ``fdatasync`` seen covered is recorded; :func:`power_cut` then cuts the power at
the end of its block. Files are told apart by device and inode, so a sync through any
descriptor of the file counts, however it was opened; bytes still in Python's buffer when it
ran (a ``flush`` missing before it) are not covered. Both see ``os.fsync`` and
``os.fdatasync``, and the same functions bound to another name (``from os import fsync``) in
the notebook's namespace and in the modules of the classes they are given.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["LateRename", "power_cut", "unsynced_renames"]


@dataclass(frozen=True)
class LateRename:
    """A rename over ``name`` of a file of ``size`` bytes, ``synced`` of them on the disk at
    its last ``fsync`` or ``fdatasync`` (None: never synced)."""

    name: str
    size: int
    synced: int | None

    def __repr__(self) -> str:
        return f"LateRename({self.name!r}, size={self.size}, synced={self.synced})"


def _fd(target: Any) -> int:
    return target if isinstance(target, int) else target.fileno()


def _namespaces(watched: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The globals of ``__main__`` (a notebook's namespace) and of the module of each class
    in ``watched`` (or of an object's class, or a module itself), with their base classes'."""
    modules: list[ModuleType | None] = [sys.modules.get("__main__")]
    for w in watched:
        if isinstance(w, ModuleType):
            modules.append(w)
            continue
        for cls in (w if isinstance(w, type) else type(w)).__mro__:
            modules.append(sys.modules.get(cls.__module__))
    found: dict[int, dict[str, Any]] = {}
    for m in modules:
        if m is not None and m is not os:
            found.setdefault(id(m), vars(m))
    return list(found.values())


@contextmanager
def _replaced(
    swaps: dict[str, tuple[Any, Any]], namespaces: list[dict[str, Any]]
) -> Iterator[None]:
    """Each ``os`` function named in ``swaps`` (name -> (real, stand-in)) replaced by its
    stand-in, in ``os`` and wherever a namespace binds the real one under any name; all put
    back at the end."""
    undo: list[tuple[dict[str, Any], str, Any]] = []
    try:
        for name, (real, stand_in) in swaps.items():
            undo.append((vars(os), name, real))
            setattr(os, name, stand_in)
            for ns in namespaces:
                for key, value in list(ns.items()):
                    if value is real:
                        undo.append((ns, key, real))
                        ns[key] = stand_in
        yield
    finally:
        for ns, key, real in reversed(undo):
            ns[key] = real


@contextmanager
def unsynced_renames(*watched: Any) -> Iterator[list[LateRename]]:
    """Within the block, every ``os.replace``/``os.rename`` (``Path.replace``, ``shutil.move``
    on one filesystem) of a file with bytes no ``fsync`` or ``fdatasync`` covered is appended
    to the yielded list, as the destination's name with the file's size and the bytes synced.
    ``watched``: classes (or objects, modules) whose modules' own names for those functions
    are watched too."""
    synced: dict[tuple[int, int], int] = {}  # (device, inode) -> size at its last sync
    late: list[LateRename] = []

    def sync(real: Callable[[Any], None]) -> Callable[[Any], None]:
        def run(target: Any) -> None:
            real(target)
            st = os.fstat(_fd(target))
            synced[(st.st_dev, st.st_ino)] = st.st_size

        return run

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

    swaps = {
        name: (real, sync(real))
        for name in ("fsync", "fdatasync")
        if (real := getattr(os, name, None))
    }
    swaps |= {
        name: (real, checked(real))
        for name, real in (("replace", os.replace), ("rename", os.rename))
    }
    with _replaced(swaps, _namespaces(watched)):
        yield late


@contextmanager
def power_cut(*watched: Any) -> Iterator[list[LateRename]]:
    """The power goes at the end of the block: every file renamed in it keeps only the bytes
    an ``fsync`` or ``fdatasync`` put on the disk (the worst a filesystem may leave: the
    rename persisted, the data not). Yields the renames it cut, as :func:`unsynced_renames`
    records them; at the end of the block, only the last rename over each name stays there
    (a later rename over the same name replaced an earlier file), and only while the file it
    renamed is still under that name. ``watched``: as for :func:`unsynced_renames`."""
    with unsynced_renames(*watched) as late:
        # each destination's last rename: the one cut (None: all its bytes were synced) and
        # the file renamed, by device and inode
        last: dict[Path, tuple[LateRename | None, tuple[int, int]]] = {}

        def remembered(real: Any) -> Any:
            def move(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
                before = len(late)
                real(src, dst, *args, **kwargs)
                path = Path(os.path.abspath(os.fsdecode(dst)))
                try:
                    st = os.stat(path)
                except (OSError, ValueError):
                    return
                last.pop(path, None)  # in the order of the last renames
                last[path] = (late[-1] if len(late) > before else None, (st.st_dev, st.st_ino))

            return move

        moves = {
            name: (real, remembered(real))
            for name, real in (("replace", os.replace), ("rename", os.rename))
        }
        try:
            with _replaced(moves, _namespaces(watched)):
                yield late
        finally:
            # a file gone from its name since (renamed on, removed) was not cut there
            cuts = [
                (path, cut)
                for path, (cut, file) in last.items()
                if cut is not None and _same_file(path, file)
            ]
            late[:] = [cut for _, cut in cuts]
            for path, cut in cuts:
                os.truncate(path, cut.synced or 0)


def _same_file(path: Path, file: tuple[int, int]) -> bool:
    """Whether ``path`` is still the regular file with that device and inode."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == file
