"""The engine with KV offload tiers: blocks the GPU reclaims come back from CPU and disk, and
every generated token equals dense generation."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from servelab.kv.blocks import InvalidConfig  # noqa: E402
from servelab.kv.engine import Engine, EngineConfig, Request  # noqa: E402
from servelab.kv.model import ModelConfig, TinyLlama  # noqa: E402

torch.set_num_threads(1)
MODEL = TinyLlama(ModelConfig(max_seq_len=256))
BLOCK = MODEL.new_pool(1, 4).bytes_per_block  # bytes of one 4-token block


def dense(requests: list[Request]) -> list[list[int]]:
    return [MODEL.generate_dense([list(r.prompt)], r.max_new_tokens)[0] for r in requests]


def shared_then_evicted(seed: int = 0) -> list[Request]:
    """A long shared prefix, then unrelated prompts that push it out of a small GPU pool, then
    the shared prefix again (with new suffixes): its blocks must come back from the tiers."""
    rng = random.Random(seed)
    prefix = [rng.randrange(256) for _ in range(24)]
    first = [Request.of(prefix + [rng.randrange(256) for _ in range(3)], 4)]
    others = [Request.of([rng.randrange(256) for _ in range(30)], 3) for _ in range(3)]
    again = [Request.of(prefix + [rng.randrange(256) for _ in range(k)], 5) for k in (1, 6)]
    return first + others + again


def serve_one_by_one(
    config: EngineConfig, requests: list[Request]
) -> tuple[Engine, list[list[int]]]:
    """Each request runs alone, so the GPU pool holds only what the previous ones left cached."""
    engine = Engine(MODEL, config)
    out = [engine.run([r])[0].samples[0] for r in requests]
    return engine, out


def test_blocks_come_back_from_the_cpu_tier_and_tokens_equal_dense() -> None:
    requests = shared_then_evicted()
    config = EngineConfig(num_blocks=10, block_size=4, offload_cpu_bytes=64 * BLOCK)
    engine, got = serve_one_by_one(config, requests)
    assert got == dense(requests)
    assert engine.offload is not None
    assert engine.offload.stats.loaded.get("cpu", 0) >= 5  # the 24-token prefix: 6 blocks
    assert engine.stats.offloaded_tokens == 4 * engine.offload.stats.loaded_blocks


def test_blocks_come_back_from_the_disk_tier_and_tokens_equal_dense(tmp_path: Path) -> None:
    requests = shared_then_evicted(1)
    config = EngineConfig(
        num_blocks=10,
        block_size=4,
        offload_cpu_bytes=3 * BLOCK,  # too small to keep the prefix: it cascades to disk
        offload_disk_bytes=200 * BLOCK,
        offload_disk_dir=str(tmp_path),
    )
    engine, got = serve_one_by_one(config, requests)
    assert got == dense(requests)
    assert engine.offload is not None
    assert engine.offload.stats.loaded.get("disk", 0) >= 3
    assert list(tmp_path.glob("*.kvchunk"))


def test_write_through_stores_computed_prompts_and_equals_dense(tmp_path: Path) -> None:
    requests = shared_then_evicted(2)
    config = EngineConfig(
        num_blocks=10,
        block_size=4,
        offload_cpu_bytes=64 * BLOCK,
        offload_disk_bytes=200 * BLOCK,
        offload_disk_dir=str(tmp_path),
        offload_write_through=True,
    )
    engine, got = serve_one_by_one(config, requests)
    assert got == dense(requests)
    assert engine.offload is not None
    assert engine.offload.stats.loaded_blocks >= 5
    # write-through: every chunk the CPU tier took is on disk too
    cpu, disk = engine.offload.hierarchy.tiers
    assert set(cpu.keys()) <= set(disk.keys())


def test_loaded_blocks_hold_exactly_the_kv_recompute_would_write() -> None:
    # Tokens can survive a slightly wrong KV; the pool cannot: compare it with a run that
    # recomputes the same prefix.
    requests = shared_then_evicted(3)
    offload, _ = serve_one_by_one(
        EngineConfig(num_blocks=10, block_size=4, offload_cpu_bytes=64 * BLOCK), requests[:-1]
    )
    recompute, _ = serve_one_by_one(EngineConfig(num_blocks=10, block_size=4), requests[:-1])
    kv = []
    for engine in (offload, recompute):
        rid = engine.add(requests[-1])
        engine.step()  # admits and prefills the last request
        table = engine.bm.block_table(engine._groups[rid].seqs[0].seq_id)
        kv.append(engine.pool.kv[:, :, table[:6]].clone())
    assert offload.stats.offloaded_tokens > 0
    assert recompute.stats.offloaded_tokens == 0
    torch.testing.assert_close(kv[0], kv[1], rtol=0, atol=1e-5)


def test_a_tiny_pool_under_random_workloads_equals_dense() -> None:
    for seed in range(3):
        rng = random.Random(seed)
        prefix = [rng.randrange(256) for _ in range(16)]
        requests = [
            Request.of([*prefix[: rng.randrange(4, 17)], rng.randrange(256)], rng.randrange(1, 6))
            for _ in range(8)
        ]
        config = EngineConfig(num_blocks=8, block_size=4, offload_cpu_bytes=4 * BLOCK)
        engine = Engine(MODEL, config)
        got = [c.samples[0] for c in engine.run(requests)]
        assert got == dense(requests), seed


@pytest.mark.parametrize(
    "kw",
    [
        {"offload_cpu_bytes": -1},
        {"offload_cpu_bytes": 1000, "prefix_caching": False},
        {"offload_cpu_bytes": 1000, "scheduler": "token-budget"},
        {"offload_disk_bytes": 1000, "offload_disk_dir": "x"},
        {"offload_cpu_bytes": 1000, "offload_disk_bytes": 1000},
    ],
)
def test_offload_configs_that_cannot_work_raise(kw: dict[str, object]) -> None:
    with pytest.raises(InvalidConfig):
        Engine(MODEL, EngineConfig(**kw))  # type: ignore[arg-type]


def test_a_failing_disk_drops_stores_and_a_corrupt_chunk_is_recomputed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servelab.kv.offload.disk import DiskStorage

    requests = shared_then_evicted(4)
    config = EngineConfig(
        num_blocks=10,
        block_size=4,
        offload_cpu_bytes=3 * BLOCK,
        offload_disk_bytes=200 * BLOCK,
        offload_disk_dir=str(tmp_path),
    )
    # a disk that fails every write: the stores are dropped, the engine serves on
    real_write = DiskStorage.write

    def failing(self: DiskStorage, key: int, prepared: bytes) -> object:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(DiskStorage, "write", failing)
    engine, got = serve_one_by_one(config, requests)
    assert got == dense(requests)
    assert engine.offload is not None and engine.offload.stats.store_errors > 0
    assert not list(tmp_path.glob("*.kvchunk"))
    # a chunk file flipped on disk: it does not verify, so the prefix is recomputed
    monkeypatch.setattr(DiskStorage, "write", real_write)
    engine = Engine(MODEL, config)
    got = [engine.run([r])[0].samples[0] for r in requests[:-2]]
    for path in tmp_path.glob("*.kvchunk"):
        data = bytearray(path.read_bytes())
        data[-1] ^= 0xFF
        path.write_bytes(bytes(data))
    flipped = {p.name for p in tmp_path.glob("*.kvchunk")}
    got += [engine.run([r])[0].samples[0] for r in requests[-2:]]
    assert got == dense(requests)
    assert engine.offload is not None and engine.offload.stats.load_errors > 0
    assert flipped - {p.name for p in tmp_path.glob("*.kvchunk")}  # an unreadable one removed
