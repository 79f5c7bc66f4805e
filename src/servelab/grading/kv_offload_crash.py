"""kv-offload probes of what a crash leaves on the disk tier: a kill in mid-write must leave a
chunk absent or whole (no torn file), and a power cut must too, which takes an ``fsync`` of
the temporary file's bytes before its rename (see :mod:`servelab.testing.power_cut`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from servelab.grading.kv_offload_script import OffloadScript, put_chunk
from servelab.testing.kv_offload import crashing_writes, payload_for

__all__ = ["no_torn_write", "synced_before_renamed"]


def no_torn_write(impl: Any) -> None:
    """A crash in a put's first write leaves the chunk absent or whole, and so does one in
    a write to the chunk's final name (a chunk written there after a whole temporary)."""
    for suffix in ("", ".chunk"):
        _no_torn_write_to(impl, suffix)


def _no_torn_write_to(impl: Any, suffix: str) -> None:
    """One put under crashing_writes(suffix): no torn chunk after it."""
    s = OffloadScript(impl, "disk = DiskTier(100)")
    put_chunk(s, "a", 20)
    crashed: list[str] = []

    @contextmanager
    def counted_crash(suffix: str = "") -> Iterator[list[str]]:  # the files it cut kept
        with crashing_writes(suffix) as cut:
            yield cut
        crashed.extend(cut)

    s.ns["crashing_writes"] = counted_crash
    args = repr(suffix) if suffix else ""
    s(f"with crashing_writes({args}): disk.put('b', payload('b', 40))")
    if not crashed:
        return  # no such write goes through open(): nothing this probe can interrupt
    path = s.obj.path("b")
    if path.exists() and path.stat().st_size != 40:
        nth = f" (the crash cut a write to a {suffix} file)" if suffix else ""
        raise s.fail(
            f"after the crash {path.name} holds {path.stat().st_size} of 40 bytes{nth}: a "
            "torn chunk, which a restart would serve as KV",
            "torn",
        )
    s.expect(s.keys(), ["a"], "resident keys after the failed write")
    s.expect(s.call("get", "a"), payload_for("a", 20), "disk.get('a')")


def synced_before_renamed(impl: Any) -> None:
    """A put that renames a file over the chunk's name has ``fsync``-ed all of its bytes first:
    a power cut at the end of the put leaves the chunk whole. A put with no rename at all is
    left to the torn-write probe."""
    s = OffloadScript(impl, "disk = DiskTier(100)")
    s("with power_cut() as cut: disk.put('b', payload('b', 40))")
    late = [r for r in s.ns.get("cut") or () if r.name == s.obj.path("b").name]
    if not late:
        return
    size = s("disk.path('b').stat().st_size")
    if late[0].synced is None:
        why = "no os.fsync (or fdatasync) of the file was seen before it was renamed"
    else:
        why = (
            f"the last fsync (or fdatasync) before its rename found {late[0].synced} of them in "
            "the file (bytes still in Python's buffer at that call, or written after it, are "
            "not on the disk: flush, then fsync, then rename)"
        )
    raise s.fail(
        f"after the power cut {late[0].name} holds {size} of 40 bytes: its rename reached the "
        f"disk and its bytes did not, as {why}; a restart would serve the torn chunk as KV",
        "unsynced",
    )
