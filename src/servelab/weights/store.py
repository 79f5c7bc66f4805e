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
tensor table and of every data byte. :func:`decode` recomputes it before any tensor is
built and raises :class:`CorruptEntry` on a mismatch, a truncated file or a broken header.
The digest is a hash of 8 MiB chunk hashes, computed on a thread pool (``hashlib``
releases the GIL), so verification scales with cores instead of capping a load at one
core's hashing speed. Tensors are then built zero-copy over the bytes that were read.

**Keys are names, not paths.** A key is a short name of letters, digits, ``.``, ``_`` and
``-`` that does not start with a dot; anything else raises :class:`InvalidKey`, so
``../../etc/passwd`` or an absolute path can never address a file outside the store.

**Replicas pin what they serve.** :meth:`WeightStore.replica` loads an entry onto a device
through a :class:`~servelab.weights.cache.WeightCache` and holds a pin on it for as long as
the replica lives, so the cache can never evict weights that are being served.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab.weights.cache import WeightCache

if TYPE_CHECKING:
    import torch

__all__ = [
    "CorruptEntry",
    "EntryNotFound",
    "InvalidKey",
    "WeightStore",
    "WeightStoreError",
    "atomic_write",
    "decode",
    "encode",
]

SUFFIX = ".safetensors"
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_DIGEST_KEY = "servelab.sha256"
_CHUNK = 8 << 20
_HASH_THREADS = max(1, min(8, os.cpu_count() or 1))


class WeightStoreError(Exception):
    """Base of every error the weight store raises."""


class InvalidKey(WeightStoreError, ValueError):
    """A key that is not a plain name (it could address a file outside the store)."""


class EntryNotFound(WeightStoreError, KeyError):
    """No entry with this key has been saved."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class CorruptEntry(WeightStoreError, ValueError):
    """The file's bytes do not match its digest (or it is truncated, or its header broken).

    The entry is never served; re-save it from a good copy.
    """


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
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
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
def _digest(table: Mapping[str, Any], data: memoryview) -> str:
    """SHA-256 over the tensor table and over the SHA-256 of each 8 MiB chunk of data."""
    chunks = [data[i : i + _CHUNK] for i in range(0, len(data), _CHUNK)]
    if len(chunks) > 1 and _HASH_THREADS > 1:
        with ThreadPoolExecutor(_HASH_THREADS) as pool:
            parts = list(pool.map(lambda c: hashlib.sha256(c).digest(), chunks))
    else:
        parts = [hashlib.sha256(c).digest() for c in chunks]
    top = hashlib.sha256(json.dumps(table, sort_keys=True, separators=(",", ":")).encode())
    top.update(len(data).to_bytes(8, "little"))
    for p in parts:
        top.update(p)
    return top.hexdigest()


def _split(data: bytes | bytearray | memoryview) -> tuple[dict[str, Any], memoryview]:
    """Parse a safetensors buffer into (header dict, data section)."""
    view = memoryview(data)
    if len(view) < 8:
        raise CorruptEntry(f"{len(view)} bytes is too short for a safetensors header")
    n = int.from_bytes(view[:8], "little")
    if n > len(view) - 8:
        raise CorruptEntry(f"header claims {n} bytes but the file has {len(view) - 8} after it")
    try:
        header = json.loads(bytes(view[8 : 8 + n]))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptEntry(f"the safetensors header is not valid JSON: {err}") from None
    if not isinstance(header, dict):
        raise CorruptEntry("the safetensors header is not a JSON object")
    return header, view[8 + n :]


def encode(tensors: Mapping[str, torch.Tensor]) -> bytes:
    """Serialize tensors to safetensors bytes carrying their digest."""
    import safetensors.torch

    if not tensors:
        raise WeightStoreError("refusing to save an empty set of tensors")
    raw = safetensors.torch.save({k: v.detach().cpu().contiguous() for k, v in tensors.items()})
    header, data = _split(raw)
    header.pop("__metadata__", None)
    header_out = {"__metadata__": {_DIGEST_KEY: _digest(header, data)}, **header}
    blob = json.dumps(header_out, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # keep the data section 8-byte aligned
    return len(blob).to_bytes(8, "little") + blob + bytes(data)


_DTYPES: dict[str, str] = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
}


def decode(
    data: bytes | bytearray | memoryview, *, source: str = "buffer"
) -> dict[str, torch.Tensor]:
    """Verify a buffer made by :func:`encode` and return its tensors (views of ``data``)."""
    import torch

    if memoryview(data).readonly:  # tensors are built over the buffer; they must own it
        data = bytearray(data)
    header, body = _split(data)
    meta = header.pop("__metadata__", None)
    want = meta.get(_DIGEST_KEY) if isinstance(meta, dict) else None
    if not isinstance(want, str):
        raise CorruptEntry(f"{source}: no {_DIGEST_KEY} digest in its metadata")
    if _digest(header, body) != want:
        raise CorruptEntry(f"{source}: content does not match its digest; refusing to serve it")
    out: dict[str, torch.Tensor] = {}
    for name, info in header.items():
        try:
            dtype = getattr(torch, _DTYPES[info["dtype"]])
            start, end = (int(x) for x in info["data_offsets"])
            shape = [int(s) for s in info["shape"]]
        except (KeyError, TypeError, ValueError) as err:
            raise CorruptEntry(f"{source}: bad table entry for {name!r}: {err!r}") from None
        itemsize = torch.empty((), dtype=dtype).element_size()
        count = end - start
        numel = 1
        for s in shape:
            numel *= s
        if not 0 <= start <= end <= len(body) or count != numel * itemsize:
            raise CorruptEntry(f"{source}: {name!r} does not fit its byte range")
        flat = (
            torch.frombuffer(body, dtype=dtype, count=numel, offset=start)
            if numel
            else torch.empty(0, dtype=dtype)
        )
        out[name] = flat.view(shape)
    return out


# -- the store -----------------------------------------------------------------------------
ReplicaKey = tuple[str, str, str]  # (entry key, device, digest)


class WeightStore:
    """A directory of verified safetensors entries, optionally fronted by a WeightCache."""

    def __init__(self, root: Path | str, *, cache: WeightCache[ReplicaKey] | None = None) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise WeightStoreError(f"{self.root} is not a directory; create it first")
        self.cache = cache

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
            return self.path(key).exists()  # type: ignore[arg-type]
        except InvalidKey:
            return False

    def keys(self) -> list[str]:
        """Saved keys, sorted. Temp files of interrupted writes are not entries."""
        names = (p.name[: -len(SUFFIX)] for p in self.root.glob(f"*{SUFFIX}"))
        return sorted(n for n in names if _KEY.fullmatch(n) and ".." not in n)

    def save(
        self,
        key: str,
        tensors: Mapping[str, torch.Tensor],
        *,
        on_stage: Callable[[str], None] | None = None,
    ) -> int:
        """Write ``tensors`` under ``key`` atomically; returns the bytes written."""
        path = self.path(key)
        data = encode(tensors)
        atomic_write(path, data, on_stage=on_stage)
        return len(data)

    def read_raw(self, key: str) -> bytearray:
        """The file's bytes, unverified (the baseline a load is compared against)."""
        path = self.path(key)
        try:
            with open(path, "rb", buffering=0) as f:
                size = os.fstat(f.fileno()).st_size
                buf = bytearray(size)
                view = memoryview(buf)
                got = 0
                while got < size:
                    n = f.readinto(view[got:])
                    if not n:
                        break
                    got += n
        except FileNotFoundError:
            raise EntryNotFound(f"no entry {key!r} in {self.root}") from None
        if got != size:
            raise CorruptEntry(f"{path}: read {got} of {size} bytes")
        return buf

    def load(self, key: str, *, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
        """Read, verify and return the tensors of ``key`` on ``device``."""
        tensors = decode(self.read_raw(key), source=str(self.path(key)))
        return {k: v.to(device) for k, v in tensors.items()}

    def digest(self, key: str) -> str:
        """The digest recorded in the entry's header (cheap: reads only the header)."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                head = f.read(min(n, 1 << 24))
        except FileNotFoundError:
            raise EntryNotFound(f"no entry {key!r} in {self.root}") from None
        try:
            meta = json.loads(head).get("__metadata__", {})
        except (UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            raise CorruptEntry(f"{path}: the safetensors header is broken") from None
        value = meta.get(_DIGEST_KEY) if isinstance(meta, dict) else None
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
        """Leftovers of writes that were interrupted (safe to delete when no writer runs)."""
        return sorted(self.root.glob(f".*{SUFFIX}.*.tmp"))

    @contextmanager
    def replica(
        self, key: str, *, device: torch.device | str = "cpu"
    ) -> Iterator[dict[str, torch.Tensor]]:
        """Serve ``key`` on ``device`` for the duration of the ``with`` block.

        The loaded tensors go into the store's cache (keyed by entry, device and digest,
        so a re-saved entry is a new cache entry) and stay pinned until the block exits.
        Without a cache the tensors are simply loaded.
        """
        import torch

        dev = str(torch.device(device))
        if self.cache is None:
            yield self.load(key, device=device)
            return
        ck: ReplicaKey = (key, dev, self.digest(key))
        if self.cache.get(ck) is None:
            tensors = self.load(key, device=device)
            size = max(1, sum(t.numel() * t.element_size() for t in tensors.values()))
            self.cache.put(ck, tensors, size)
        with self.cache.pinned(ck) as weights:
            yield weights
