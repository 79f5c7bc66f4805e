"""Model weights on disk: safetensors files written atomically and verified before use.

The weight cache decides *what* stays on a node; this module is where the bytes live, and
its job is to make sure a replica never serves a half-written or corrupted file.

**Atomic writes.** :func:`atomic_write` writes to a temporary file in the *same* directory,
flushes and ``fsync``s it, renames it over the entry with ``os.replace`` (atomic on POSIX)
and finally ``fsync``s the directory so the rename itself is durable. Without the file
``fsync`` a filesystem may persist the rename before the data, and a power cut leaves a
complete-looking entry full of zeros. A crash at any point leaves the old entry or the new
one, never a mixture; at worst a stray ``.tmp`` file, which no reader ever opens.

**Verified loads.** Each file carries, in its safetensors metadata, a SHA-256 digest of its
tensor table and of every data byte (:mod:`servelab.weights.fileformat`). A load recomputes
it, and checks the table, before any tensor is built, and raises :class:`CorruptEntry` on a
mismatch, a truncated file, a broken header or a table the store would not have written.

**Keys are names, not paths.** A key is a short name of letters, digits, ``.``, ``_`` and
``-`` that does not start with a dot; anything else raises :class:`InvalidKey`, so
``../../etc/passwd`` or an absolute path can never address a file outside the store.

**Only regular files.** Entries are opened with ``O_NOFOLLOW`` and must be regular files:
a symlink (or a FIFO, or a directory) planted in the store is refused with
:class:`NotARegularFile`, never followed to a file outside the store.

**What cannot be read back is not written.** ``save`` refuses a tensor name that is not a
string or is ``__metadata__`` (:class:`InvalidTensorName`) and a dtype that safetensors does
not write or the store does not read back (:class:`UnsupportedDtype`) before writing.

**Replicas pin what they serve.** :meth:`WeightStore.replica` loads an entry onto a device
through a :class:`~servelab.weights.cache.WeightCache` and holds a pin on it for as long as
the replica lives, so the cache can never evict weights that are being served. The cache key
carries the digest the load verified, so a re-saved entry is a new key and never serves the
old bytes; concurrent replicas of one cold entry load it once, sharing a load only with
replicas that verified the same digest (one opened after a ``save`` never waits for, and serves,
a load of the bytes before it).

**Leftovers.** Temporary files carry their writer's process id; a store that opens removes
those whose writer is no longer running (a crashed ``save`` leaves one as large as a model);
what it cannot remove, such as a directory of that name, it leaves with a warning.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from servelab.weights.cache import EntryPinned, NotResident, WeightCache
from servelab.weights.fileformat import (
    DIGEST_KEY,
    METADATA,
    CorruptEntry,
    InvalidTensorName,
    NotATensor,
    UnsupportedDtype,
    WeightStoreError,
    decode,
    encode,
    split,
    supported_dtypes,
)

if TYPE_CHECKING:
    import torch

__all__ = [
    "CorruptEntry",
    "EntryNotFound",
    "InvalidKey",
    "InvalidTensorName",
    "NotARegularFile",
    "NotATensor",
    "UnsupportedDtype",
    "WeightStore",
    "WeightStoreError",
    "atomic_write",
    "decode",
    "encode",
    "supported_dtypes",
]

SUFFIX = ".safetensors"
_TMP_SUFFIX = ".tmp"
_TMP_NAME = re.compile(r"\.(?P<entry>.+)\.(?P<pid>\d+)\.[0-9a-f]+\.tmp")
_STALE_UNKNOWN_S = 24 * 3600  # a temp file without a writer pid: removed after a day
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class InvalidKey(WeightStoreError, ValueError):
    """A key that is not a plain name (it could address a file outside the store)."""


class EntryNotFound(WeightStoreError, KeyError):
    """No entry with this key has been saved."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class NotARegularFile(WeightStoreError, ValueError):
    """The entry's path is a symlink, directory, FIFO or device: it is never opened."""


# -- the atomic write ----------------------------------------------------------------------
def atomic_write(
    path: Path,
    data: bytes | bytearray | memoryview,
    *,
    on_stage: Callable[[str], None] | None = None,
) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old content or the new.

    ``on_stage`` (for crash tests) is called with ``"partial"`` once half the data is
    written, ``"synced"`` after the temp file's fsync and just before the rename, and
    ``"replaced"`` after the rename and before the directory fsync.
    """
    stage = on_stage or (lambda _: None)
    directory = path.parent
    tmp = directory / f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}{_TMP_SUFFIX}"
    # O_EXCL: a new file of ours; mode 0o666 as open() uses, so the umask decides, as for
    # any file the user writes (mkstemp would force 0600)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            view = memoryview(data)
            half = len(view) // 2
            f.write(view[:half])
            f.flush()
            stage("partial")
            f.write(view[half:])
            f.flush()
            os.fsync(f.fileno())
        stage("synced")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    stage("replaced")
    _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    dfd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# -- the file format: safetensors + a digest in its metadata ----------------------------------


# -- the store -----------------------------------------------------------------------------
ReplicaKey = tuple[str, str, str]  # (entry key, device, digest)


class WeightStore:
    """A directory of verified safetensors entries, optionally fronted by a WeightCache."""

    def __init__(self, root: Path | str, *, cache: WeightCache[ReplicaKey] | None = None) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise WeightStoreError(f"{self.root} is not a directory; create it first")
        self.cache = cache
        self._flights: dict[ReplicaKey, Future[tuple[str, dict[str, torch.Tensor]]]] = {}
        self._flights_lock = threading.Lock()
        self.removed_temp_files: list[Path] = self._remove_stale_temp_files()

    def path(self, key: str) -> Path:
        """The file of ``key``; raises InvalidKey for anything but a plain name."""
        if not isinstance(key, str) or not _KEY.fullmatch(key) or ".." in key:
            raise InvalidKey(
                f"{key!r} is not a valid key: use 1-128 letters, digits, '.', '_' or '-', "
                "not starting with '.' and without '..'"
            )
        path = self.root / f"{key}{SUFFIX}"
        if path.parent != self.root:  # defence in depth; the pattern already forbids '/'
            raise InvalidKey(f"{key!r} would leave the store directory")
        return path

    def __contains__(self, key: object) -> bool:
        try:
            return stat.S_ISREG(self.path(key).lstat().st_mode)  # type: ignore[arg-type]
        except (InvalidKey, FileNotFoundError):
            return False

    def keys(self) -> list[str]:
        """Saved keys, sorted. Temp files of interrupted writes and non-regular files are not
        entries."""
        names = []
        for p in self.root.glob(f"*{SUFFIX}"):
            try:
                regular = stat.S_ISREG(p.lstat().st_mode)
            except FileNotFoundError:  # deleted between the listing and now: not an entry
                continue
            if regular:
                names.append(p.name[: -len(SUFFIX)])
        return sorted(n for n in names if _KEY.fullmatch(n) and ".." not in n)

    def save(
        self,
        key: str,
        tensors: Mapping[str, torch.Tensor],
        *,
        on_stage: Callable[[str], None] | None = None,
    ) -> int:
        """Write ``tensors`` under ``key`` atomically; returns the bytes written.

        Raises, before anything is written, :class:`NotATensor` for a value that is not a
        tensor and :class:`UnsupportedDtype` for a dtype the store cannot read back.
        """
        path = self.path(key)
        data = encode(tensors)
        atomic_write(path, data, on_stage=on_stage)
        return len(data)

    @contextmanager
    def _open(self, key: str) -> Iterator[tuple[int, os.stat_result]]:
        """Open the entry's file for reading: never through a symlink, only a regular file."""
        path = self.path(key)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK  # NONBLOCK: a FIFO cannot hang us
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            raise EntryNotFound(f"no entry {key!r} in {self.root}") from None
        except OSError:  # ELOOP: the last component is a symlink
            if path.is_symlink():
                raise NotARegularFile(
                    f"{path} is a symlink; the store only reads regular files inside "
                    f"{self.root}, so it refuses to follow it"
                ) from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise NotARegularFile(
                    f"{path} is not a regular file (mode {stat.filemode(info.st_mode)}); "
                    f"the store refuses to read it"
                )
            yield fd, info
        finally:
            os.close(fd)

    def read_raw(self, key: str) -> bytearray:
        """The file's bytes, unverified (the baseline a load is compared against)."""
        with self._open(key) as (fd, info):
            size = info.st_size
            buf = bytearray(size)
            view = memoryview(buf)
            got = 0
            while got < size:
                n = os.readv(fd, [view[got:]])
                if not n:
                    break
                got += n
        if got != size:
            raise CorruptEntry(f"{self.path(key)}: read {got} of {size} bytes")
        return buf

    def load(self, key: str, *, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
        """Read, verify and return the tensors of ``key`` on ``device``."""
        return self._load_verified(key, device)[1]

    def _load_verified(
        self, key: str, device: torch.device | str
    ) -> tuple[str, dict[str, torch.Tensor]]:
        """The digest the bytes were verified against, and the tensors: one read of one file."""
        raw = self.read_raw(key)
        tensors = decode(raw, source=str(self.path(key)))
        digest = split(raw)[0][METADATA][DIGEST_KEY]
        return digest, {k: v.to(device) for k, v in tensors.items()}

    def digest(self, key: str) -> str:
        """The digest recorded in the entry's header (cheap: reads only the header)."""
        path = self.path(key)
        with self._open(key) as (fd, _):
            n = int.from_bytes(os.pread(fd, 8, 0), "little")
            head = os.pread(fd, min(n, 1 << 24), 8)
        try:
            meta = json.loads(head).get(METADATA, {})
        except (ValueError, RecursionError, AttributeError):  # ValueError: JSON and Unicode
            raise CorruptEntry(f"{path}: the safetensors header is broken") from None
        value = meta.get(DIGEST_KEY) if isinstance(meta, dict) else None
        if not isinstance(value, str):
            raise CorruptEntry(f"{path}: no digest in its metadata")
        return value

    def delete(self, key: str) -> None:
        path = self.path(key)
        try:
            path.unlink()
        except FileNotFoundError:
            raise EntryNotFound(f"no entry {key!r} in {self.root}") from None
        _fsync_dir(self.root)

    def stale_temp_files(self) -> list[Path]:
        """Temporary files of writes in progress or interrupted (``save`` renames its own)."""
        return sorted(self.root.glob(f".*{SUFFIX}.*{_TMP_SUFFIX}"))

    def _remove_stale_temp_files(self) -> list[Path]:
        """Remove the temp files whose writer is gone: a crashed writer's, as large as a model.

        A writer's pid is in the name; a file of a running process (this one included) stays.
        A temp file without a pid that a process can have is removed once it is a day old.
        What cannot be removed (a directory of that name, a file the user may not delete) is
        left in place with a :class:`RuntimeWarning`: opening the store must not fail on it.
        """
        removed = []
        for tmp in self.stale_temp_files():
            pid = _writer_pid(tmp.name)
            try:
                if pid is not None:
                    if _alive(pid):
                        continue
                elif time.time() - tmp.lstat().st_mtime < _STALE_UNKNOWN_S:
                    continue
                tmp.unlink()
            except FileNotFoundError:  # another store cleaned it first
                continue
            except OSError as err:
                warnings.warn(
                    f"{tmp} looks like an interrupted write but cannot be removed "
                    f"({err.strerror or err}); the store leaves it in place",
                    RuntimeWarning,
                    stacklevel=3,
                )
                continue
            removed.append(tmp)
        if removed:
            _fsync_dir(self.root)
        return removed

    @contextmanager
    def replica(
        self, key: str, *, device: torch.device | str = "cpu"
    ) -> Iterator[dict[str, torch.Tensor]]:
        """Serve ``key`` on ``device`` for the duration of the ``with`` block.

        The loaded tensors go into the store's cache, keyed by entry, device and the digest
        the load verified (a re-saved entry is a new cache entry), and stay pinned until the
        block exits. Concurrent replicas of one entry that is not cached, and that read the same
        digest, load it once. Without a cache the tensors are simply loaded.
        """
        import torch

        dev = str(torch.device(device))
        if self.cache is None:
            yield self.load(key, device=device)
            return
        ck, weights = self._pin_replica(key, dev, device)
        try:
            yield weights
        finally:
            self.cache.unpin(ck)

    def _pin_replica(
        self, key: str, dev: str, device: torch.device | str
    ) -> tuple[ReplicaKey, dict[str, torch.Tensor]]:
        """Pin the cached copy of ``key`` on ``dev``, loading and admitting it if needed."""
        cache = self.cache
        assert cache is not None
        loaded: tuple[str, dict[str, torch.Tensor]] | None = None
        for _ in range(_PIN_ATTEMPTS):
            ck: ReplicaKey = (key, dev, self.digest(key))
            try:
                return ck, cache._pin(ck, None)[0]  # cached: a pin, no load
            except NotResident:
                pass
            if loaded is None or loaded[0] != ck[2]:
                loaded = self._load_once(ck, device)
            digest, tensors = loaded
            ck = (key, dev, digest)  # the digest these bytes were verified against
            size = max(1, sum(t.numel() * t.element_size() for t in tensors.values()))
            try:
                cache.put(ck, tensors, size)
            except EntryPinned:  # another replica admitted it first and holds it: pin that
                pass
            try:
                return ck, cache._pin(ck, None)[0]
            except NotResident:  # evicted before the pin by another thread's put: again
                continue
        raise WeightStoreError(
            f"could not pin {key!r} on {dev} after {_PIN_ATTEMPTS} attempts: the entry keeps "
            f"changing or being evicted; is the cache large enough for its replicas?"
        )

    def _load_once(
        self, seen: ReplicaKey, device: torch.device | str
    ) -> tuple[str, dict[str, torch.Tensor]]:
        """Load ``seen``'s entry onto its device; callers that arrive while a load runs share it.

        A load is shared only with callers that saw the same digest: a caller that read the
        digest of a newer save must not wait for, and serve, bytes read before that save.
        What the load returns is at least as new as the digest its leader saw.
        """
        with self._flights_lock:
            flight = self._flights.get(seen)
            leader = flight is None
            if flight is None:
                flight = self._flights[seen] = Future()
        if not leader:
            return flight.result()
        try:
            result = self._load_verified(seen[0], device)
        except BaseException as err:
            flight.set_exception(err)
            raise
        else:
            flight.set_result(result)
            return result
        finally:
            with self._flights_lock:
                del self._flights[seen]


_PIN_ATTEMPTS = 8
_MAX_PID = 2**31 - 1  # pid_t; a larger number is no process (os.kill would overflow)


def _writer_pid(name: str) -> int | None:
    """The writer's pid in a temp file's name, or None when it names no pid a process has."""
    match = _TMP_NAME.fullmatch(name)
    if match is None:
        return None
    pid = int(match["pid"])
    return pid if 0 < pid <= _MAX_PID else None


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (on this host; the store is a local directory)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True
