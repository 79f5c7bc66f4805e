"""The CPU tier: KV chunks as tensors in host memory, page-locked (pinned) on CUDA.

Pinned host memory lets a copy to the GPU run asynchronously at full PCIe speed; it exists only
with a CUDA build and a GPU. ``pin_memory=None`` (the default) pins exactly when CUDA is
available; ``pin_memory=True`` without CUDA raises
:class:`~servelab.kv.offload.errors.PinnedMemoryUnavailable` when the tier is built, not at the
first store. A device module: it imports torch.
"""

from __future__ import annotations

from typing import Any

import torch

from servelab.kv.offload.errors import InvalidPayload, PinnedMemoryUnavailable
from servelab.kv.offload.tier import HostStorage, Tier
from servelab.weights.policies import EvictionPolicy

__all__ = ["CPUStorage", "cpu_tier"]


class CPUStorage:
    """Each chunk a host tensor of its own (a copy: the GPU block it came from gets reused)."""

    kind = "cpu"

    def __init__(self, *, pin_memory: bool | None = None) -> None:
        cuda = torch.cuda.is_available()
        if pin_memory and not cuda:
            raise PinnedMemoryUnavailable(
                "pin_memory=True needs CUDA (a CUDA build of torch and a GPU); this torch "
                f"{torch.__version__} has none. Pass pin_memory=None to pin only when possible."
            )
        self.pin_memory = cuda if pin_memory is None else bool(pin_memory)

    def check_key(self, key: Any) -> None:
        HostStorage().check_key(key)

    def prepare(self, payload: Any) -> tuple[torch.Tensor, int]:
        if not isinstance(payload, torch.Tensor):
            raise InvalidPayload(f"a CPU tier stores a tensor, got {type(payload).__name__}")
        if payload.numel() == 0:
            raise InvalidPayload("an empty chunk holds no KV; refusing to store 0 bytes")
        return payload, payload.numel() * payload.element_size()

    def write(self, key: Any, prepared: torch.Tensor) -> torch.Tensor:
        host = torch.empty(
            prepared.shape, dtype=prepared.dtype, device="cpu", pin_memory=self.pin_memory
        )
        host.copy_(prepared.detach())
        return host

    def read(self, key: Any, handle: torch.Tensor) -> torch.Tensor:
        return handle.clone()  # the caller's own: the tier's copy may be evicted after

    def drop(self, key: Any, handle: torch.Tensor) -> None:
        return None


def cpu_tier(
    capacity_bytes: int,
    policy: EvictionPolicy[Any] | None = None,
    *,
    pin_memory: bool | None = None,
    name: str = "cpu",
) -> Tier[Any]:
    """A tier of host tensors under ``capacity_bytes``; see the module docstring for pinning."""
    return Tier(capacity_bytes, policy, storage=CPUStorage(pin_memory=pin_memory), name=name)
