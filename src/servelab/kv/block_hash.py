"""Block names: the hash chained over a block's token ids and its parent's name.

A prefix cache names every full block it holds by a hash of its token ids chained with its
parent's name (the first block chains on a root derived from the sequence's ``extra_key``):
what a cache shares with the outside world. Hits never depend on names (see
:mod:`servelab.kv.prefix`), so a name only has to be a function of the whole prefix.

The hash. ``hash_algo="sha256"`` (the default, as in vLLM since v0.10.2; vLLM's advisory
GHSA-rm76-4mrf-v9r8 was fixed by PR #12621, a random seed for the built-in hash, and SHA-256
became an option in v0.8.3): SHA-256 over the parent's 32-byte hash and the block's ids as 8-byte
ints (kept as the 32-byte digest inside; the public calls return its int); names are stable
across processes and machines, and nobody can construct a collision to take over a name.
``"builtin"``: Python's ``hash`` of ``(parent, tokens)``, faster, stable across processes
for int tokens, but colliding by design (``hash(2**61 - 1) == hash(0)``): harmless here,
since names never decide a hit. A callable ``(parent_hash, block_tokens) -> int`` may be
passed instead (tests use one that collides on purpose). Because hits do not hash, the
choice costs only one hash per new prefix: ``make bench-peers`` measures SHA-256 against
the peers' own hashes (nano-vllm's xxhash64, vLLM's SHA-256 and xxhash) side by side.

A callable's result is checked (:class:`InvalidBlockHash` unless it is an int), and the
manager calls it before it changes anything, so a callable that raises or returns a bad name
leaves the manager as it was.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Sequence
from functools import partial
from typing import Literal

from servelab.kv.blocks import KVCacheError

__all__ = [
    "BlockIds",
    "HashAlgo",
    "HashFn",
    "InvalidBlockHash",
    "builtin_block",
    "builtin_chain",
    "checked",
    "on_ints",
    "root_hash",
    "sha256_block",
    "sha256_chain",
    "sha256_name",
    "unpacked",
]

HashFn = Callable[[int, list[int]], int]
BlockHash = Callable[[int, Sequence[int]], int]  # (parent's name, a block's ids) -> its name
# A block's ids as a dict key: packed as native 8-byte unsigned ints (bytes cache their hash and
# compare with one memcmp), or, if one is 2**64 or above, a tuple. The form depends only on the
# ids, so equal ids always give equal keys.
BlockIds = bytes | tuple[int, ...]
HashAlgo = Literal["sha256", "builtin"]


class InvalidBlockHash(KVCacheError, TypeError):
    """A ``hash_algo`` callable returned something that is not an int (a forgotten
    ``return`` gives None). Raised before the call that asked for the name changes anything."""


def root_hash(extra_key: bytes) -> int:
    """The parent hash of a sequence's first block: SHA-256 of the extra key, so sequences
    with different keys (cache salts, adapters) never share a block."""
    digest = hashlib.sha256(b"servelab-prefix-root\0" + extra_key).digest()
    return int.from_bytes(digest, "big")


def _sha256_digest(parent: bytes, tokens: Sequence[int], pack: Callable[..., bytes]) -> bytes:
    """SHA-256 over the parent's 32-byte digest, a tag, and the ids as 8-byte unsigned ints
    (``pack``), or, for a block with an id of 2**64 or above, their decimal text."""
    try:
        raw = b"Q" + pack(*tokens)
    except struct.error:
        raw = b"L" + ",".join(map(str, tokens)).encode()
    return hashlib.sha256(parent + raw).digest()


def sha256_block(parent: int, tokens: Sequence[int]) -> int:
    """The name of one full block: SHA-256 over the parent's 32 bytes, a tag, and the block's
    ids as 8-byte unsigned ints (a block with an id of 2**64 or above, which no vocabulary
    has, takes a longer tagged encoding, so the input stays unambiguous)."""
    pack = struct.Struct(f"={len(tokens)}Q").pack
    return int.from_bytes(_sha256_digest(parent.to_bytes(32, "big"), tokens, pack), "big")


def builtin_block(parent: int, tokens: Sequence[int]) -> int:
    """The name of one full block by Python's ``hash`` of ``(parent, tokens)``: fast, collides."""
    return hash((parent, tuple(tokens)))


def _chain(block_hash: BlockHash, parent: int, tokens: Sequence[int], size: int) -> list[int]:
    out = []
    for i in range(0, len(tokens) // size * size, size):
        parent = block_hash(parent, tuple(tokens[i : i + size]))
        out.append(parent)
    return out


def sha256_chain(parent: int, tokens: Sequence[int], block_size: int) -> list[int]:
    """The names (:func:`sha256_block`) of the full blocks of ``tokens``, from ``parent``."""
    return _chain(sha256_block, parent, tokens, block_size)


def builtin_chain(parent: int, tokens: Sequence[int], block_size: int) -> list[int]:
    """The names (:func:`builtin_block`) of the full blocks of ``tokens``, from ``parent``."""
    return _chain(builtin_block, parent, tokens, block_size)


def unpacked(block_ids: BlockIds) -> tuple[int, ...]:
    """A block's ids as ints, from either key form."""
    if isinstance(block_ids, tuple):
        return block_ids
    return tuple(memoryview(block_ids).cast("Q"))


def sha256_name(parent: bytes, block_ids: BlockIds) -> bytes:
    """``_sha256_digest`` of a block key: its bytes are already the packed ids."""
    if isinstance(block_ids, bytes):
        return hashlib.sha256(parent + b"Q" + block_ids).digest()
    return _sha256_digest(parent, block_ids, struct.Struct(f"={len(block_ids)}Q").pack)


def on_ints(fn: Callable[[int, tuple[int, ...]], int]) -> Callable[[int, BlockIds], int]:
    """``fn`` given a block's ids as ints (a ``partial``, so a manager using it pickles)."""
    return partial(_on_ints, fn)


def _on_ints(fn: Callable[[int, tuple[int, ...]], int], parent: int, block_ids: BlockIds) -> int:
    return fn(parent, unpacked(block_ids))


def checked(fn: HashFn) -> Callable[[int, BlockIds], int]:
    """A ``hash_algo`` callable, given a list of ints, whose result must be an int: a name
    that is None (a forgotten ``return``) would enter the map yet read as uncached. (A
    ``partial``: a manager using it pickles when ``fn`` does.)"""
    return partial(_checked, fn)


def _checked(fn: HashFn, parent: int, block_ids: BlockIds) -> int:
    name = fn(parent, list(unpacked(block_ids)))
    if type(name) is not int:
        if not isinstance(name, int) or isinstance(name, bool):
            raise InvalidBlockHash(
                f"hash_algo must return an int, got {type(name).__name__} (a forgotten "
                "return gives None); nothing was changed"
            )
        name = int(name)
    return name
