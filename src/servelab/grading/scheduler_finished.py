"""Scheduler probes of the step's finished list: every finished one, in the order of running."""

from __future__ import annotations

from typing import Any

__all__ = ["finished_in_running_order", "frees_finished_anywhere", "others_keep_their_order"]


def finished_in_running_order(script: Any, impl: Any) -> None:
    """Two sequences finish in one step, the newer with the lower id: out.finished lists them
    as running holds them, oldest first (a retire that walks them by id lists them reversed)."""
    s = script(impl, num_blocks=8, block_size=4, watermark=0)
    s.add(1, 4, 2)
    s.add(0, 4, 2)
    s.step()  # prefill: 1 generated each
    s.step()  # decode: both reach their 2 tokens
    out = s.step()
    s.expect(
        [x.seq_id for x in out.finished],
        [1, 0],
        "finished",
        "both finish at this step; retire lists them in the order of running (1 arrived first)",
    )
    s.expect(s.running(), [], "running after both finished")


def frees_finished_anywhere(script: Any, impl: Any) -> None:
    """The newer sequence finishes first: a retire that stops at the first sequence still
    running, or walks only the oldest, leaves it running."""
    s = script(impl, num_blocks=8, block_size=4, watermark=0)
    s.add(0, 4, 6)
    s.add(1, 4, 2)
    s.step()  # prefill: 1 generated each
    s.step()  # decode: sequence 1 reaches its 2 tokens, sequence 0 runs on
    out = s.step()
    finished = [getattr(x, "seq", x).seq_id for x in out.finished]
    s.expect(finished, [1], "finished (sequence 1, behind sequence 0, still running)")
    s.expect(s.running(), [0], "running after sequence 1 finished")


def others_keep_their_order(script: Any, impl: Any) -> None:
    """The oldest of four finishes first: the three left running keep their order, and the
    next decode walks them oldest first (a retire that moves the last running sequence into
    the finished one's place leaves running as 3, 1, 2)."""
    s = script(impl, num_blocks=16, block_size=4, watermark=0)
    s.add(0, 4, 2)
    for sid in (1, 2, 3):
        s.add(sid, 4, 6)
    s.step()  # prefill: 1 generated each
    s.step()  # decode: sequence 0 reaches its 2 tokens
    out = s.step()
    decoded = [getattr(getattr(x, "seq", x), "seq_id", x) for x in out.decodes]
    s.expect(
        decoded,
        [1, 2, 3],
        "decoded",
        "sequence 0 retired; the three left running decode oldest first, in their order",
    )
    s.expect(s.running(), [1, 2, 3], "running after sequence 0 retired")
