"""Helper for tests/test_store.py: forks weight-store writers that a test can SIGKILL.

Runs without torch, so forking is cheap and safe (no threads). Protocol, one line each:
stdin ``<stage> <entry path> <payload path>`` forks a writer that copies the payload to the
entry with ``atomic_write``; when the writer reaches ``stage`` it prints ``<pid> <stage>``
and waits to be killed (stage ``none``: it finishes and prints ``<pid> done``). The zygote
then prints ``reaped <pid> <signal or -exit code>`` once the writer is gone.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from servelab.weights.store import atomic_write


def writer(stage: str, entry: Path, payload: Path) -> None:
    data = payload.read_bytes()

    def on_stage(name: str) -> None:
        if name == stage:
            print(f"{os.getpid()} {name}", flush=True)
            while True:
                signal.pause()

    atomic_write(entry, data, on_stage=on_stage)
    print(f"{os.getpid()} done", flush=True)


def main() -> None:
    print("ready", flush=True)
    for line in sys.stdin:
        stage, entry, payload = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                writer(stage, Path(entry), Path(payload))
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        code = os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)
        print(f"reaped {pid} {code}", flush=True)


if __name__ == "__main__":
    main()
