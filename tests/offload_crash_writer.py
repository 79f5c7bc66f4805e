"""Helper for tests/test_offload_disk.py: stores one chunk into a disk tier and stops at a stage.

Usage: ``offload_crash_writer.py <root> <key hex> <payload length> <stage>``. When the write
reaches ``stage`` (``partial``, ``synced`` before the rename, ``replaced`` after it) it prints
``<pid> <stage>`` and waits to be killed; ``none`` finishes and prints ``<pid> done``.
"""

from __future__ import annotations

import os
import signal
import sys

from servelab.kv.offload import OffloadHierarchy, Tier, disk_tier


def main() -> None:
    root, key_hex, length, stage = sys.argv[1:]
    disk = disk_tier(root, 1 << 20)

    def on_stage(name: str) -> None:
        if name == stage:
            print(f"{os.getpid()} {name}", flush=True)
            while True:
                signal.pause()

    disk.storage.on_stage = on_stage  # type: ignore[attr-defined]
    h = OffloadHierarchy([Tier(1 << 20, name="cpu"), disk], write_through=True)
    h.store(int(key_hex, 16), b"n" * int(length))
    print(f"{os.getpid()} done", flush=True)


if __name__ == "__main__":
    main()
