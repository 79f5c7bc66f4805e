"""The disk tier: one file per chunk, written atomically and verified on every read.

**Atomic.** A chunk is written with :func:`servelab.weights.store.atomic_write`: a temporary
file in the same directory, written, flushed and ``fsync``-ed, renamed over the chunk's name
with ``os.replace``, then the directory ``fsync``-ed. A crash (a kill, a power cut) leaves the
chunk absent or whole, never torn; at worst a temporary file, which is never read and which the
next :func:`disk_tier` over the directory removes once its writer is gone.

**Verified.** Each file is a small frame: a magic, the payload kind, the chunk's 32-byte key,
the payload length and its SHA-256, then the payload. A read checks all of it and raises
:class:`~servelab.kv.offload.errors.CorruptChunk` on any mismatch (a flipped bit, a truncated
file, a file renamed to another chunk's name), so a torn or foreign file is never served as KV.
Tensors inside the frame use :mod:`servelab.weights.fileformat` (which verifies them again).

**Keys** are chunk names, ints below 2**256 (:func:`~servelab.kv.offload.hierarchy.chunk_keys`);
the file is ``<64 hex digits>.kvchunk``, so a key can never address a path outside the tier.

**Reopening.** :func:`disk_tier` over a directory that holds chunks adopts them, oldest first,
as far as the budget allows, and deletes the rest (a cache may forget; it may not overflow).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servelab.kv.offload.errors import (
    CorruptChunk,
    InvalidChunkKey,
    InvalidPayload,
    InvalidTierConfig,
    TierIOError,
)
from servelab.kv.offload.tier import Tier
from servelab.weights.policies import EvictionPolicy
from servelab.weights.store import _alive, _fsync_dir, _writer_pid, atomic_write

__all__ = ["SUFFIX", "DiskStorage", "disk_tier"]

SUFFIX = ".kvchunk"
MAGIC = b"SLKVCHK1"
_BYTES, _TENSOR = 0, 1
_HEADER = len(MAGIC) + 1 + 32 + 8 + 32  # magic, kind, key, length, sha256


def _frame(key: int, kind: int, data: bytes) -> bytes:
    return (
        MAGIC
        + bytes([kind])
        + key.to_bytes(32, "big")
        + len(data).to_bytes(8, "little")
        + hashlib.sha256(data).digest()
        + data
    )


class DiskStorage:
    """Chunk files in one directory (see the module docstring)."""

    kind = "disk"

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise InvalidTierConfig(f"{self.root} is not a directory; create it first")
        self.on_stage: Callable[[str], None] | None = None  # crash tests stop a write here

    def path(self, key: int) -> Path:
        return self.root / f"{key:064x}{SUFFIX}"

    def check_key(self, key: Any) -> None:
        if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key < 1 << 256:
            raise InvalidChunkKey(
                f"a disk tier names chunks by their 256-bit prefix name (an int from "
                f"chunk_keys), got {key!r}"
            )

    def prepare(self, payload: Any) -> tuple[bytes, int]:
        """(kind byte + data, the file's size): the frame is built at write time."""
        if isinstance(payload, (bytes, bytearray, memoryview)):
            data, kind = bytes(payload), _BYTES
        elif type(payload).__module__.startswith("torch") and hasattr(payload, "dtype"):
            from servelab.weights.fileformat import WeightStoreError, encode

            try:
                data, kind = encode({"kv": payload}), _TENSOR
            except WeightStoreError as err:
                raise InvalidPayload(f"a disk tier cannot store this tensor: {err}") from None
        else:
            raise InvalidPayload(
                f"a disk tier stores bytes or a tensor, got {type(payload).__name__}"
            )
        if not data:
            raise InvalidPayload("an empty chunk holds no KV; refusing to store 0 bytes")
        return bytes([kind]) + data, _HEADER + len(data)

    def write(self, key: int, prepared: bytes) -> Path:
        path = self.path(key)
        try:
            atomic_write(path, _frame(key, prepared[0], prepared[1:]), on_stage=self.on_stage)
        except OSError as err:
            raise TierIOError(
                err.errno, f"writing chunk {key:064x}: {err.strerror or err}"
            ) from err
        return path

    def read(self, key: int, handle: Path) -> Any:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(handle, flags)
        except FileNotFoundError:
            raise CorruptChunk(f"{handle}: the chunk's file is gone") from None
        except OSError as err:
            raise CorruptChunk(f"{handle}: cannot open it as a regular file ({err})") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise CorruptChunk(f"{handle} is not a regular file; refusing to read it")
            raw = bytearray(info.st_size)
            view = memoryview(raw)
            got = 0
            while got < len(raw):
                n = os.readv(fd, [view[got:]])
                if not n:
                    break
                got += n
        finally:
            os.close(fd)
        return self._verify(key, raw[:got], str(handle))

    @staticmethod
    def _verify(key: int, raw: bytearray, source: str) -> Any:
        if len(raw) < _HEADER or raw[: len(MAGIC)] != MAGIC:
            raise CorruptChunk(f"{source}: not a chunk file (torn or foreign); not served")
        at = len(MAGIC)
        kind = raw[at]
        if int.from_bytes(raw[at + 1 : at + 33], "big") != key:
            raise CorruptChunk(f"{source}: holds another chunk's key; not served")
        n = int.from_bytes(raw[at + 33 : at + 41], "little")
        data = memoryview(raw)[_HEADER:]
        if n != len(data):
            raise CorruptChunk(f"{source}: {len(data)} bytes of payload, header says {n}")
        if hashlib.sha256(data).digest() != bytes(raw[at + 41 : at + 73]):
            raise CorruptChunk(f"{source}: payload does not match its SHA-256; not served")
        if kind == _BYTES:
            return bytes(data)
        if kind == _TENSOR:
            from servelab.weights.fileformat import WeightStoreError, decode

            try:
                return decode(bytearray(data), source=source)["kv"]
            except (WeightStoreError, KeyError) as err:
                raise CorruptChunk(f"{source}: {err}") from None
        raise CorruptChunk(f"{source}: unknown payload kind {kind}")

    def drop(self, key: int, handle: Path) -> None:
        try:
            handle.unlink()
            _fsync_dir(self.root)
        except OSError:  # already gone, or unremovable: the tier no longer counts it
            pass

    def scan(self) -> list[tuple[int, Path, int]]:
        """(key, path, size) of the chunk files here, oldest first; stale temp files removed."""
        for tmp in self.root.glob(f".*{SUFFIX}.*.tmp"):
            pid = _writer_pid(tmp.name)
            if pid is not None and not _alive(pid):
                tmp.unlink(missing_ok=True)
        found = []
        for p in self.root.glob(f"*{SUFFIX}"):
            stem = p.name[: -len(SUFFIX)]
            try:
                info = p.lstat()
                key = int(stem, 16)
            except (OSError, ValueError):
                continue
            if len(stem) == 64 and stat.S_ISREG(info.st_mode):
                found.append((info.st_mtime_ns, key, p, info.st_size))
        found.sort()
        return [(k, p, s) for _, k, p, s in found]


def disk_tier(
    root: Path | str,
    capacity_bytes: int,
    policy: EvictionPolicy[int] | None = None,
    *,
    name: str = "disk",
) -> Tier[int]:
    """A tier over the chunk files in ``root``, adopting what is there (oldest first) within
    the budget and deleting what does not fit."""
    storage = DiskStorage(root)
    tier: Tier[int] = Tier(capacity_bytes, policy, storage=storage, name=name)
    for key, path, size in storage.scan():
        if tier._used + size <= tier.capacity and size > 0:
            tier.policy.update_on_put(key, size)
            tier._sizes[key] = size
            tier._handles[key] = path
            tier._used += size
        else:
            storage.drop(key, path)
    return tier
