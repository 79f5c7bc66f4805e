"""The bytes of one weight-store entry: a safetensors file with a digest in its metadata.

:func:`encode` writes what the installed safetensors writes, plus a SHA-256 digest of the
tensor table and of every data byte; :func:`decode` checks the digest and the table before
any tensor is built, and raises :class:`CorruptEntry` on anything it would not have written.

**The digest.** A hash of 8 MiB chunk hashes, computed on a thread pool (``hashlib`` releases
the GIL), so verification scales with cores instead of capping a load at one core's hashing
speed. It catches a flipped bit, a truncated file or a broken header. It is not a signature:
anyone can recompute plain SHA-256, so a matching digest does not make the table trustworthy,
and the table is checked as untrusted input (types, sizes, ranges tiling the data).

**Tensor names are strings**, and ``__metadata__`` is reserved by safetensors for the file's
metadata: ``encode`` refuses both with :class:`InvalidTensorName` instead of dropping a tensor.

**Every dtype both sides know.** ``encode`` accepts exactly the dtypes that the installed
safetensors writes and that :func:`decode` reads back (FP8 of all kinds, unsigned ints,
complex64, packed FP4 …) and refuses any other with :class:`UnsupportedDtype`. Tensors are
built zero-copy over the bytes that were read.

torch and safetensors are imported only when a function needs them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = [
    "CorruptEntry",
    "InvalidTensorName",
    "UnsupportedDtype",
    "WeightStoreError",
    "decode",
    "encode",
    "split",
    "supported_dtypes",
]

DIGEST_KEY = "servelab.sha256"
METADATA = "__metadata__"
_CHUNK = 8 << 20
_HASH_THREADS = max(1, min(8, os.cpu_count() or 1))


class WeightStoreError(Exception):
    """Base of every error the weight store raises."""


class InvalidTensorName(WeightStoreError, ValueError):
    """A tensor name that safetensors cannot store as given: not a string, or reserved."""


class NotATensor(WeightStoreError, TypeError):
    """A value to save is not a torch tensor (or the tensors are not a name -> tensor mapping)."""


class UnsupportedDtype(WeightStoreError, TypeError):
    """A tensor's dtype has no safetensors encoding that this store reads back."""


class CorruptEntry(WeightStoreError, ValueError):
    """The file's bytes do not match its digest (or it is truncated, or its header broken).

    The entry is never served; re-save it from a good copy.
    """


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


def split(data: bytes | bytearray | memoryview) -> tuple[dict[str, Any], memoryview]:
    """Parse a safetensors buffer into (header dict, data section)."""
    view = memoryview(data)
    if len(view) < 8:
        raise CorruptEntry(f"{len(view)} bytes is too short for a safetensors header")
    n = int.from_bytes(view[:8], "little")
    if n > len(view) - 8:
        raise CorruptEntry(f"header claims {n} bytes but the file has {len(view) - 8} after it")
    try:
        header = json.loads(bytes(view[8 : 8 + n]), object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as err:  # bad UTF-8 or JSON, an integer too long
        raise CorruptEntry(f"the safetensors header is not valid JSON: {err}") from None
    if not isinstance(header, dict):
        raise CorruptEntry("the safetensors header is not a JSON object")
    return header, view[8 + n :]


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object without repeated names: with one, the digest would cover only the last."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a name appears twice in one object")
    return out


def encode(tensors: Mapping[str, torch.Tensor]) -> bytes:
    """Serialize tensors to safetensors bytes carrying their digest."""
    import safetensors.torch

    _check_tensors(tensors)
    if not tensors:
        raise WeightStoreError("refusing to save an empty set of tensors")
    _check_names(tensors)
    _check_dtypes(tensors)
    raw = safetensors.torch.save({k: v.detach().cpu().contiguous() for k, v in tensors.items()})
    header, data = split(raw)
    header.pop(METADATA, None)
    header_out = {METADATA: {DIGEST_KEY: _digest(header, data)}, **header}
    blob = json.dumps(header_out, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # keep the data section 8-byte aligned
    return len(blob).to_bytes(8, "little") + blob + bytes(data)


# safetensors dtype string -> torch dtype name: what the installed safetensors writes, each
# checked to read back bit for bit (tests/test_store.py). F4 packs two values per byte.
_DTYPES: dict[str, str] = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "C64": "complex64",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2": "float8_e5m2",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
    "F4": "float4_e2m1fn_x2",
}


def supported_dtypes() -> dict[str, torch.dtype]:
    """The dtypes ``save`` accepts with this torch, by their safetensors name."""
    import torch

    found = {code: getattr(torch, name, None) for code, name in _DTYPES.items()}
    return {code: dtype for code, dtype in found.items() if isinstance(dtype, torch.dtype)}


def _check_tensors(tensors: object) -> None:
    """A state dict is a mapping of names to tensors; anything else would fail deep inside
    safetensors with an error that names neither the entry nor the value."""
    import torch

    if not isinstance(tensors, Mapping):
        raise NotATensor(
            f"save takes a mapping of tensor names to tensors (a state dict), "
            f"got {type(tensors).__name__}"
        )
    wrong = sorted(
        f"{name!r} ({type(value).__name__})"
        for name, value in tensors.items()
        if not isinstance(value, torch.Tensor)
    )
    if wrong:
        raise NotATensor(f"cannot save {', '.join(wrong)}: every value must be a torch tensor")


def _check_names(tensors: Mapping[str, torch.Tensor]) -> None:
    """The header is a JSON object keyed by tensor name, and ``__metadata__`` is its own key:
    a tensor of that name would be dropped on the way to disk, so it is refused."""
    for name in tensors:
        if not isinstance(name, str):
            raise InvalidTensorName(
                f"tensor names must be strings, got {name!r} ({type(name).__name__})"
            )
        if name == METADATA:
            raise InvalidTensorName(
                f"{METADATA!r} is reserved for the file's metadata in safetensors; "
                f"rename that tensor before saving"
            )


def _check_dtypes(tensors: Mapping[str, torch.Tensor]) -> None:
    import torch

    known = set(supported_dtypes().values())
    bad = {name: t.dtype for name, t in tensors.items() if t.dtype not in known}
    fp4 = getattr(torch, "float4_e2m1fn_x2", None)
    scalars = sorted(name for name, t in tensors.items() if t.dtype == fp4 and not t.dim())
    if scalars:  # safetensors counts 4-bit values along the last dimension: it needs one
        raise UnsupportedDtype(
            f"cannot save {', '.join(map(repr, scalars))}: a packed FP4 tensor needs at least "
            f"one dimension in safetensors. Reshape it to (1,) before saving."
        )
    if bad:
        listed = ", ".join(f"{n!r} ({d})" for n, d in sorted(bad.items()))
        raise UnsupportedDtype(
            f"cannot save {listed}: safetensors has no encoding this store reads back for "
            f"that dtype. Convert it (for example to float32 or bfloat16) before saving."
        )


def decode(
    data: bytes | bytearray | memoryview, *, source: str = "buffer"
) -> dict[str, torch.Tensor]:
    """Verify a buffer made by :func:`encode` and return its tensors (views of ``data``).

    A matching digest is not enough: the table is then checked as untrusted input
    (:func:`_table`), since anyone can sign a table with plain SHA-256.
    """
    import torch

    if memoryview(data).readonly:  # tensors are built over the buffer; they must own it
        data = bytearray(data)
    header, body = split(data)
    meta = header.pop(METADATA, None)
    want = meta.get(DIGEST_KEY) if isinstance(meta, dict) else None
    if not isinstance(want, str):
        raise CorruptEntry(f"{source}: no {DIGEST_KEY} digest in its metadata")
    try:
        signed = _digest(header, body)
    except (ValueError, RecursionError) as err:  # a table JSON reads but cannot write back
        raise CorruptEntry(f"{source}: its header cannot be digested: {err}") from None
    if signed != want:
        raise CorruptEntry(f"{source}: content does not match its digest; refusing to serve it")
    entries = _table(header, len(body), source)
    out: dict[str, torch.Tensor] = {}
    dtypes = supported_dtypes()
    for name, (code, start, end, shape) in entries.items():
        dtype = dtypes[code]
        numel = (end - start) // dtype.itemsize
        if not numel:
            flat = torch.empty(0, dtype=dtype)
        elif dtype.itemsize == 1 and dtype != torch.uint8:  # read as bytes, then reinterpret
            flat = torch.frombuffer(body, dtype=torch.uint8, count=numel, offset=start)
            flat = flat.view(dtype)
        else:
            flat = torch.frombuffer(body, dtype=dtype, count=numel, offset=start)
        out[name] = flat.view(shape)
    return out


_TABLE_FIELDS = {"dtype", "shape", "data_offsets"}
_MAX_INDEX = 2**63 - 1  # torch sizes and strides are signed 64-bit


def _is_count(x: object) -> bool:
    """A JSON integer that can count bytes or elements (``true`` is not 1 here)."""
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= _MAX_INDEX


def _table(
    header: Mapping[str, Any], body_len: int, source: str
) -> dict[str, tuple[str, int, int, list[int]]]:
    """Check the tensor table; returns name -> (dtype code, start, end, torch shape).

    The digest proves only that the table was not changed since it was signed, and anyone can
    sign (it is plain SHA-256), so the table is checked as untrusted input: each entry exactly
    ``dtype``, ``shape`` and ``data_offsets`` of the right JSON types, every range the size its
    shape and dtype say, and, as the safetensors format requires, the ranges tiling the data
    section with no gap or overlap. Anything else is :class:`CorruptEntry`.
    """
    dtypes = supported_dtypes()
    if not header:
        raise CorruptEntry(f"{source}: its tensor table is empty")
    entries: dict[str, tuple[str, int, int, list[int]]] = {}
    for name, info in header.items():

        def bad(why: str, name: str = name) -> CorruptEntry:
            return CorruptEntry(f"{source}: bad table entry for {name!r}: {why}")

        if not isinstance(info, dict) or set(info) != _TABLE_FIELDS:
            raise bad(f"expected an object with exactly {sorted(_TABLE_FIELDS)}")
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(code, str) or code not in dtypes:
            raise bad(f"unknown dtype {code!r}")
        if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
            raise bad(f"shape {shape!r} is not a list of non-negative integers")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))):
            raise bad(f"data_offsets {offsets!r} is not a pair of non-negative integers")
        start, end = offsets
        shape = list(shape)
        if code == "F4":  # the table counts 4-bit values; torch's dtype holds two per element
            if not shape or shape[-1] % 2:
                raise bad("an odd number of packed FP4 values")
            shape[-1] //= 2
        numel = span = 1  # span: the largest stride torch would compute, even for no elements
        for d in shape:
            numel *= d
            span *= max(d, 1)
        if span > _MAX_INDEX:
            raise bad(f"shape {info['shape']!r} is too large to index")
        if not start <= end <= body_len or end - start != numel * dtypes[code].itemsize:
            raise bad(f"bytes {start}..{end} do not hold its shape in {body_len} bytes of data")
        entries[name] = (code, start, end, shape)
    covered = 0
    for name, (_, start, end, _) in sorted(entries.items(), key=lambda e: e[1][1:3]):
        if start != covered:
            why = "overlaps the tensor before it" if start < covered else "leaves a gap before it"
            raise CorruptEntry(f"{source}: {name!r} {why} in the data section")
        covered = end
    if covered != body_len:
        raise CorruptEntry(f"{source}: {body_len - covered} bytes of data belong to no tensor")
    return entries
