"""Undoing a prefix-caching manager's calls: its state put back from an undo point.

``PrefixCachingBlockManager._snapshot`` copies lists only, since it runs on every step that
admits; what it leaves out (the interned identities, their counts, the cache map) follows from
the blocks and is rebuilt here, which only a failed step pays for. Apart from
:mod:`servelab.kv.prefix` so that module keeps the cache itself.
"""

from __future__ import annotations

from typing import Any, cast

__all__ = ["restore"]

# What the manager's _snapshot copies, grouped: blocks, prefixes, sequences, counters
_Snapshot = tuple[
    tuple[list[int], list[int], list[int], list[Any]],
    tuple[list[Any], list[Any]],
    tuple[
        tuple[dict[int, list[int]], list[int], list[int]],
        dict[int, tuple[list[int], list[int], bytes]],
        list[int],
        list[bytes],
    ],
    tuple[int, int, int],
]


def restore(bm: Any, snapshot: object) -> None:
    """Put back in ``bm`` (a ``PrefixCachingBlockManager``) the state its ``_snapshot`` saw."""
    blocks, prefixes, sequences, counters = cast(_Snapshot, snapshot)
    ref, free, evictable, names = blocks
    bm._ref[:] = ref
    bm._free.clear()
    bm._free.extend(free)
    bm._evictable.clear()
    bm._evictable.update(dict.fromkeys(evictable))
    bm._hash[:] = names
    identity_of, cached_names = prefixes
    bm._prefix[:] = identity_of
    # The identities then were those the blocks carried and their ancestors (an identity
    # lives while a block or a child refers to it), and their counts follow from them.
    # Their keys, numbers, names and parents never change.
    idents: dict[Any, Any] = {}
    for carried in identity_of:
        prefix = carried
        while prefix is not None and prefix.key not in idents:
            idents[prefix.key] = prefix
            prefix = prefix.parent
    for prefix in idents.values():
        prefix.refs, prefix.block = 0, -1
    for prefix in idents.values():
        if prefix.parent is not None:
            prefix.parent.refs += 1
    for block, carried in enumerate(identity_of):
        if carried is not None:
            carried.refs += 1
            if names[block] is not None:  # the block that holds its name in the cache
                carried.block = block
    bm._idents.clear()
    bm._idents.update(idents)
    holder = {name: block for block, name in enumerate(names) if name is not None}
    bm._cached.clear()
    bm._cached.update((name, holder[name]) for name in cached_names)
    tables, seqs, lengths, roots = sequences
    bm._restore_tables(tables)
    bm._seqs.clear()
    for state, n in zip(seqs.values(), lengths, strict=True):
        del state[0][n:]
    bm._seqs.update(seqs)
    for key in list(bm._roots)[len(roots) :]:  # it only grows
        del bm._roots[key]
    bm._next_ident, bm.hit_blocks, bm.queried_blocks = counters
