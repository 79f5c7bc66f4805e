"""Count, on any device, the operations that make the host wait for a CUDA device.

On CUDA the CPU queues kernels and runs ahead, until a call needs a device value on the
host: ``.item()``/``int()``/``bool()`` (``aten._local_scalar_dense``), ``nonzero``,
``unique``, ``masked_select`` and a few more whose output size depends on the data, and
copies back to the host (``tolist``, ``cpu``, ``numpy``). Each of those stalls the
launch queue. A :class:`SyncCounter` sees every aten op through a ``TorchDispatchMode``,
so it counts them on a CPU too, where nothing actually waits. ``Tensor.tolist``,
``.cpu`` and ``.numpy`` do not dispatch an aten op on a CPU tensor, so they are wrapped.

Two more counts: ``uploads`` (``aten.lift_fresh``, what ``torch.tensor(python data)``
dispatches: on CUDA each is a host-to-device copy, synchronous unless made from pinned
memory), and ``opaque`` calls of FlexAttention. Eager FlexAttention compiles internally
and refuses to run under a dispatch mode, so it runs uncounted; on CUDA it is one
compiled kernel launch.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from types import TracebackType
from typing import Any

import torch
import torch.nn.attention.flex_attention as flex_module
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

SYNC_OPS = frozenset(
    {
        "_local_scalar_dense",
        "nonzero",
        "nonzero_static",
        "unique",
        "_unique",
        "_unique2",
        "unique_dim",
        "unique_consecutive",
        "masked_select",
        "is_nonzero",
        "equal",
        "allclose",
        "repeat_interleave",
    }
)
HOST_READS = ("tolist", "cpu", "numpy")


class SyncCounter(TorchDispatchMode):
    """``with SyncCounter() as c: ...``; then ``c.syncs`` (a Counter), ``c.total``."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs: collections.Counter[str] = collections.Counter()
        self.uploads = 0
        self.opaque = 0
        self._saved: list[tuple[Any, str, Any]] = []

    @property
    def total(self) -> int:
        return sum(self.syncs.values())

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        name = func.overloadpacket.__name__
        if name in SYNC_OPS:
            self.syncs[name] += 1
        elif name == "lift_fresh":
            self.uploads += 1
        return func(*args, **(kwargs or {}))

    def __enter__(self) -> SyncCounter:
        for attr in HOST_READS:
            self._patch(torch.Tensor, attr, self._host_read(attr, getattr(torch.Tensor, attr)))
        self._patch(flex_module, "flex_attention", self._uncounted(flex_module.flex_attention))
        super().__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        super().__exit__(exc_type, exc, tb)
        while self._saved:
            owner, attr, value = self._saved.pop()
            setattr(owner, attr, value)

    def _patch(self, owner: Any, attr: str, value: Any) -> None:
        self._saved.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, value)

    def _host_read(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            self.syncs[name] += 1
            return original(tensor, *args, **kwargs)

        return wrapper

    def _uncounted(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.opaque += 1
            with _disable_current_modes():
                return original(*args, **kwargs)

        return wrapper
