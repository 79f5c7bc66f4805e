"""Swap space's bookkeeping: which host (CPU) block receives which GPU block."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from servelab.kv.blocks import OutOfBlocks
from servelab.kv.scheduler_contract import InvalidSchedulerConfig

__all__ = ["HostBlockPool"]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class HostBlockPool:
    """Bookkeeping for swap space: a free list of host (CPU) block ids, nothing more.

    The bytes live wherever the engine keeps them; the scheduler only decides which host
    block receives which GPU block.
    """

    def __init__(self, num_blocks: int) -> None:
        if not _is_int(num_blocks) or num_blocks < 0:
            raise InvalidSchedulerConfig(
                f"num_host_blocks must be a non-negative int, got {num_blocks!r}"
            )
        self.num_blocks = num_blocks
        self._free: deque[int] = deque(range(num_blocks))

    @property
    def num_free(self) -> int:
        return len(self._free)

    def take(self, n: int) -> list[int]:
        """``n`` host blocks, all or nothing (OutOfBlocks leaves the pool unchanged)."""
        if n > len(self._free):
            raise OutOfBlocks(f"swap needs {n} host blocks, only {len(self._free)} are free")
        return [self._free.popleft() for _ in range(n)]

    def release(self, blocks: Iterable[int]) -> None:
        self._free.extend(blocks)

    def __reduce__(self) -> tuple[Callable[..., HostBlockPool], tuple[object, ...]]:
        # How copy and pickle rebuild it (through __init__, then its free list in its order):
        # compiled, a native class has no __dict__ for them to copy.
        return (_rebuilt_host_pool, (type(self), self.num_blocks, list(self._free)))

    def __repr__(self) -> str:
        return f"HostBlockPool(num_blocks={self.num_blocks}, free={self.num_free})"


def _rebuilt_host_pool(cls: type[HostBlockPool], num_blocks: int, free: list[int]) -> HostBlockPool:
    """A host pool like the one ``HostBlockPool.__reduce__`` saw."""
    pool = cls(num_blocks)
    pool._free = deque(free)
    return pool
