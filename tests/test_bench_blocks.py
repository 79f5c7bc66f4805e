"""The block-manager benchmark's workloads are what its docstring says they are."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_blocks


@pytest.mark.parametrize("name", list(bench_blocks.WORKLOADS))
def test_every_request_is_admitted_decoded_and_freed_once(name: str) -> None:
    trace, steps = bench_blocks.workload(name, 1_024, 400, seed=0)
    first = len(trace.anchors)
    admitted = Counter(i for step in steps for i in step.admit)
    freed = Counter(i for step in steps for i in step.finish)
    everyone = Counter(range(first, first + len(trace.requests)))
    assert admitted == everyone and freed == everyone
    decoded: dict[int, list[int]] = {}
    seen: set[int] = set()
    for step in steps:
        assert len(step.decode) == len(step.tokens) == len(set(step.decode))
        assert all(i in seen for i in step.decode)  # decodes start the step after admission
        assert len(step.decode) <= bench_blocks.MAX_RUNNING
        for i, token in zip(step.decode, step.tokens, strict=True):
            decoded.setdefault(i, []).append(token)
        seen.update(step.admit)
    assert all(decoded[i] == trace.requests[i - first].decode for i in everyone)
    timed = [step.timed for step in steps]
    assert timed == sorted(timed) and any(timed) and not all(timed)  # one warm-up, then timed


@pytest.mark.parametrize("name", list(bench_blocks.WORKLOADS))
def test_the_replay_is_exact_and_both_hashes_hit_alike(name: str) -> None:
    trace, steps = bench_blocks.workload(name, 1_024, 400, seed=0)
    results = []
    for algo, batched in (("sha256", True), ("builtin", True), ("sha256", False)):
        driver = bench_blocks.Ours(1_024, algo, batched=batched)
        handles = driver.prepare(trace, steps)
        ops, seconds, hits = bench_blocks.replay(driver, trace, steps, handles)
        assert ops > 0 and seconds >= 0
        assert driver.bm.sequences() == list(range(len(trace.anchors)))  # only anchors left
        results.append(hits)
    assert results[0] == results[1] == results[2]
    assert sum(results[0]) > 0


def test_chat_turns_hit_their_whole_history() -> None:
    """A follow-up turn's prompt starts with the previous turn's prompt and reply, and the
    cache serves every full block of that history."""
    trace, steps = bench_blocks.make_chat(1_024, 300, seed=0)
    driver = bench_blocks.Ours(1_024, "sha256")
    _, _, hits = bench_blocks.replay(driver, trace, steps, driver.prepare(trace, steps))
    by_prompt = {tuple(r.prompt + r.decode): r for r in trace.requests}
    follow_ups = 0
    for k, request in enumerate(trace.requests):
        for n in range(len(request.prompt) - 16, 0, -1):
            if tuple(request.prompt[:n]) in by_prompt:
                assert hits[k] == n // bench_blocks.BLOCK * bench_blocks.BLOCK
                follow_ups += 1
                break
    assert follow_ups > len(trace.requests) // 3
