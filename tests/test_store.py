"""The weight store: atomic safetensors writes, verified loads, contained keys, pinned replicas."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

from servelab.testing.core import thoroughness  # noqa: E402
from servelab.weights.cache import WeightCache  # noqa: E402
from servelab.weights.store import (  # noqa: E402
    CorruptEntry,
    EntryNotFound,
    InvalidKey,
    WeightStore,
    decode,
    encode,
)

HERE = Path(__file__).resolve().parent


def weights(seed: int, n: int = 64) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "embed": torch.randn(n, 16, generator=gen),
        "norm": torch.randn(16, generator=gen).to(torch.bfloat16),
        "ids": torch.randint(0, 100, (3, 5), generator=gen),
        "scalar": torch.tensor(float(seed)),
        "empty": torch.zeros(0, 4),
        "mask": torch.rand(7, generator=gen) > 0.5,
    }


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert torch.equal(a[k], b[k]), k


@pytest.fixture
def store(tmp_path: Path) -> WeightStore:
    root = tmp_path / "store"
    root.mkdir()
    return WeightStore(root)


def test_round_trip_keeps_every_dtype_and_shape(store: WeightStore) -> None:
    w = weights(1)
    store.save("tiny-llama", w)
    assert store.keys() == ["tiny-llama"]
    assert "tiny-llama" in store
    assert_same(store.load("tiny-llama"), w)


def test_files_are_plain_safetensors(store: WeightStore) -> None:
    w = weights(2)
    store.save("m", w)
    from safetensors import safe_open

    with safe_open(str(store.path("m")), framework="pt") as f:
        assert sorted(f.keys()) == sorted(w)
        assert "servelab.sha256" in (f.metadata() or {})
        assert torch.equal(f.get_tensor("embed"), w["embed"])


def test_save_replaces_old_content(store: WeightStore) -> None:
    store.save("m", weights(1))
    store.save("m", weights(2, n=10))
    assert_same(store.load("m"), weights(2, n=10))
    assert store.stale_temp_files() == []


def test_write_order_is_fsync_file_rename_fsync_dir(
    store: WeightStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append(
            "fsync-dir" if Path(f"/proc/self/fd/{fd}").resolve().is_dir() else "fsync-file"
        )
        real_fsync(fd)

    def replace(src: object, dst: object) -> None:
        calls.append("replace")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    store.save("m", weights(3))
    assert calls == ["fsync-file", "replace", "fsync-dir"]


def test_a_failed_write_leaves_the_old_entry_and_no_temp_file(store: WeightStore) -> None:
    store.save("m", weights(1))

    def boom(stage: str) -> None:
        if stage == "synced":
            raise OSError("disk went away")

    with pytest.raises(OSError, match="disk went away"):
        store.save("m", weights(2), on_stage=boom)
    assert_same(store.load("m"), weights(1))
    assert store.stale_temp_files() == []


@pytest.mark.parametrize("where", ["data", "header", "digest", "truncate", "no-digest"])
def test_corruption_is_detected_and_never_served(tmp_path: Path, where: str) -> None:
    root = tmp_path / "s"
    root.mkdir()
    cache: WeightCache[tuple[str, str, str]] = WeightCache(10**9)
    store = WeightStore(root, cache=cache)
    store.save("m", weights(4))
    path = store.path("m")
    raw = bytearray(path.read_bytes())
    header_len = int.from_bytes(raw[:8], "little")
    if where == "data":
        raw[8 + header_len + 100] ^= 0x01  # one bit of one weight
    elif where == "header":
        text = raw[8 : 8 + header_len].decode()
        raw[8 : 8 + header_len] = text.replace("[64,16]", "[16,64]").encode()  # a shape
    elif where == "digest":
        pos = raw.index(b"servelab.sha256") + len(b'servelab.sha256":"')
        raw[pos] = ord("0") if raw[pos] != ord("0") else ord("1")
    elif where == "truncate":
        raw = raw[:-9]
    else:
        raw = bytearray(safetensors_torch.save(weights(4)))
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptEntry):
        store.load("m")
    with pytest.raises(CorruptEntry), store.replica("m"):
        pass
    assert len(cache) == 0


def test_garbage_headers_raise_corrupt_entry() -> None:
    for blob in (
        b"",
        b"\x05\x00",
        (10**9).to_bytes(8, "little") + b"{}",
        b"\x02" + b"\x00" * 7 + b"[]",
    ):
        with pytest.raises(CorruptEntry):
            decode(blob)
    good = bytearray(encode(weights(5)))
    assert_same(decode(good), weights(5))


@pytest.mark.parametrize(
    "key",
    ["../escape", "/etc/passwd", "a/b", ".hidden", "", "a..b", "x" * 129, "sp ace", "nul\x00", 7],
)
def test_keys_cannot_escape_the_store(store: WeightStore, key: object) -> None:
    before = sorted(p.name for p in store.root.parent.iterdir())
    with pytest.raises(InvalidKey):
        store.save(key, weights(1))  # type: ignore[arg-type]
    with pytest.raises(InvalidKey):
        store.load(key)  # type: ignore[arg-type]
    assert sorted(p.name for p in store.root.parent.iterdir()) == before
    assert store.keys() == []
    assert key not in store


def test_missing_entries_raise_entry_not_found(store: WeightStore) -> None:
    with pytest.raises(EntryNotFound):
        store.load("nope")
    with pytest.raises(EntryNotFound):
        store.delete("nope")
    store.save("yes", weights(1))
    store.delete("yes")
    assert store.keys() == []


def test_replica_pins_for_its_lifetime_and_reuses_the_cached_copy(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    cache: WeightCache[tuple[str, str, str]] = WeightCache(10**9)
    store = WeightStore(root, cache=cache)
    store.save("m", weights(6))
    with store.replica("m", device="cpu") as w:
        assert_same(w, weights(6))
        assert all(t.device.type == "cpu" for t in w.values())
        (ck,) = cache.pinned_keys()
        assert cache.pin_count(ck) == 1
        with store.replica("m") as w2:  # a second replica: a hit, two pins
            assert w2 is w
            assert cache.pin_count(ck) == 2
        assert cache.pin_count(ck) == 1
    assert cache.pinned_keys() == []
    with pytest.raises(RuntimeError), store.replica("m"):
        assert cache.pin_count(ck) == 1
        raise RuntimeError("replica crashed")
    assert cache.pinned_keys() == []  # released even when the replica fails
    store.save("m", weights(7))  # new content: a new cache entry, never the stale one
    with store.replica("m") as w3:
        assert_same(w3, weights(7))
    assert len(cache) == 2


@pytest.fixture
def zygote() -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "store_crash_zygote.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def test_sigkill_at_the_rename_boundary_leaves_old_or_new_never_partial(
    store: WeightStore, zygote: subprocess.Popen[str], tmp_path: Path
) -> None:
    """Kill a writer at each stage of the write, many times: the entry always decodes to the
    content it should have at that stage, old or new."""
    versions = [weights(10 + i, n=2000 + 700 * i) for i in range(3)]
    payloads = []
    for i, w in enumerate(versions):
        p = tmp_path / f"payload{i}"
        p.write_bytes(encode(w))
        payloads.append(p)
    store.save("m", versions[0])
    current = 0
    rng = random.Random(0)
    stages = ["partial", "synced", "replaced", "none"]
    rounds = 60 * thoroughness()
    assert zygote.stdin is not None and zygote.stdout is not None
    seen = set()
    for _ in range(rounds):
        stage = rng.choice(stages)
        new = rng.choice([i for i in range(len(versions)) if i != current])
        zygote.stdin.write(f"{stage} {store.path('m')} {payloads[new]}\n")
        zygote.stdin.flush()
        pid_s, at = zygote.stdout.readline().split()
        if stage == "none":
            assert at == "done"
        else:
            assert at == stage  # the writer is parked exactly at this boundary
            os.kill(int(pid_s), signal.SIGKILL)
        assert zygote.stdout.readline().split() == [
            "reaped",
            pid_s,
            "9" if stage != "none" else "0",
        ]
        loaded = store.load("m")  # never raises CorruptEntry: no partial entry is visible
        expected = new if stage in ("replaced", "none") else current
        assert_same(loaded, versions[expected])
        current = expected
        seen.add(stage)
        leftovers = store.stale_temp_files()
        if stage in ("partial", "synced"):
            assert len(leftovers) == 1  # the killed writer's temp file, as large as the entry
        restarted = WeightStore(store.root)  # what a restarted node opens: it cleans up
        assert restarted.removed_temp_files == leftovers
        assert store.stale_temp_files() == []
    assert seen == set(stages)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_replica_loads_onto_cuda(tmp_path: Path) -> None:
    cache: WeightCache[tuple[str, str, str]] = WeightCache(10**9)
    store = WeightStore(tmp_path, cache=cache)
    store.save("m", weights(8))
    with store.replica("m", device="cuda") as w:
        assert all(t.device.type == "cuda" for t in w.values())
        assert_same({k: t.cpu() for k, t in w.items()}, weights(8))
    assert cache.pinned_keys() == []


# --- the store's edges: keys by verified digest, every dtype, symlinks, concurrency, leftovers


def test_replica_keys_the_cache_by_the_digest_it_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry is re-saved between reading its digest and loading it: the tensors that were
    loaded (v2) must be cached under v2's digest, so a rollback to v1 serves v1."""
    cache: WeightCache[tuple[str, str, str]] = WeightCache(10**9)
    store = WeightStore(tmp_path, cache=cache)
    v1, v2 = weights(21), weights(22)
    store.save("m", v1)
    d1 = store.digest("m")
    real_digest = store.digest
    raced = []

    def digest_then_resave(key: str) -> str:
        value = real_digest(key)
        if not raced:
            raced.append(True)
            store.save("m", v2)  # another writer, just after the digest was read
        return value

    monkeypatch.setattr(store, "digest", digest_then_resave)
    with store.replica("m") as w:
        assert_same(w, v2)
    d2 = real_digest("m")
    assert d1 != d2 and cache.keys() == [("m", "cpu", d2)]
    store.save("m", v1)  # roll back
    with store.replica("m") as w:
        assert_same(w, v1)


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8) if t.element_size() == 1 else t


@pytest.mark.parametrize(
    "dtype",
    [
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
        "float4_e2m1fn_x2",
        "uint16",
        "uint32",
        "uint64",
        "complex64",
    ],
)
def test_every_dtype_safetensors_writes_round_trips(store: WeightStore, dtype: str) -> None:
    dt = getattr(torch, dtype)
    raw = torch.arange(24, dtype=torch.int64).reshape(4, 6)
    if dt.is_complex:
        tensor = torch.complex(raw.float(), -raw.float())
    elif dt.itemsize == 1:
        tensor = raw.to(torch.uint8).view(dt)  # every bit pattern, as FP8/FP4 checkpoints have
    else:
        tensor = (raw * 2**20 if dt.itemsize > 2 else raw).to(dt)
    store.save("m", {"w": tensor, "scale": torch.ones(3)})
    loaded = store.load("m")["w"]
    assert loaded.dtype == dt and loaded.shape == tensor.shape
    assert torch.equal(_as_bytes(loaded), _as_bytes(tensor))


def test_save_accepts_exactly_what_safetensors_writes(store: WeightStore) -> None:
    from servelab.weights.store import UnsupportedDtype, supported_dtypes

    supported = set(supported_dtypes().values())
    for name in dir(torch):
        dt = getattr(torch, name)
        if not isinstance(dt, torch.dtype):
            continue
        try:
            with warnings.catch_warnings():  # experimental and deprecated dtypes say so
                warnings.simplefilter("ignore")
                t = (
                    torch.zeros(2, dtype=torch.uint8).view(dt)
                    if dt.itemsize == 1
                    else torch.zeros(2, dtype=dt)
                )
        except (RuntimeError, NotImplementedError):  # quantized and bit dtypes: no plain tensor
            continue
        try:
            safetensors_torch.save({"x": t})
            writes = True
        except Exception:
            writes = False
        assert (dt in supported) == writes, dt
        if not writes:
            before = sorted(p.name for p in store.root.iterdir())
            with pytest.raises(UnsupportedDtype, match=str(dt).removeprefix("torch.")):
                store.save("m", {"ok": torch.ones(2), "x": t})
            assert sorted(p.name for p in store.root.iterdir()) == before  # nothing written


def test_symlinks_and_special_files_are_refused(store: WeightStore, tmp_path: Path) -> None:
    from servelab.weights.store import NotARegularFile

    outside = tmp_path / "outside.safetensors"
    outside.write_bytes(encode(weights(30)))
    (store.root / f"evil{'.safetensors'}").symlink_to(outside)
    os.mkfifo(store.root / "pipe.safetensors")
    for key in ("evil", "pipe"):
        with pytest.raises(NotARegularFile):
            store.load(key)
        with pytest.raises(NotARegularFile):
            store.digest(key)
        assert key not in store
    assert store.keys() == []


def test_concurrent_replicas_of_a_cold_entry_load_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    cache: WeightCache[tuple[str, str, str]] = WeightCache(10**9)
    store = WeightStore(tmp_path, cache=cache)
    store.save("m", weights(40))
    loads = []
    real = store._load_verified

    def slow_load(key: str, device: object) -> object:
        loads.append(key)
        time.sleep(0.2)  # long enough for every thread to arrive while it runs
        return real(key, device)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_load_verified", slow_load)
    barrier = threading.Barrier(4)
    got: list[object] = []
    errors: list[BaseException] = []

    def replica() -> None:
        barrier.wait()
        try:
            with store.replica("m") as w:
                assert_same(w, weights(40))
                got.append(w)
                barrier.wait()  # all four hold their replica at once
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=replica) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and len(got) == 4
    assert loads == ["m"]
    assert all(w is got[0] for w in got)  # one copy, shared
    assert cache.pinned_keys() == [] and len(cache) == 1


def test_a_store_removes_temp_files_of_dead_writers(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(dead.stdout)
    crashed = tmp_path / f".m.safetensors.{dead_pid}.abcdef.tmp"
    running = tmp_path / f".m.safetensors.{os.getpid()}.123456.tmp"
    old_format = tmp_path / ".m.safetensors.x8k2_q.tmp"
    for p in (crashed, running, old_format):
        p.write_bytes(b"half a model")
    os.utime(old_format, (0, 0))  # written long ago by a writer we cannot name
    store = WeightStore(tmp_path)
    assert sorted(store.removed_temp_files) == sorted([crashed, old_format])
    assert store.stale_temp_files() == [running]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_entries_are_created_as_the_umask_says(store: WeightStore, umask: int) -> None:
    old = os.umask(umask)
    try:
        store.save("m", weights(1))
    finally:
        os.umask(old)
    assert store.path("m").stat().st_mode & 0o777 == 0o666 & ~umask


# --- defects found by an audit: each test failed before its fix ------------------------------


def test_a_replica_opened_after_a_save_never_joins_an_older_in_flight_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica of v1 is mid-load when v2 is saved; a replica opened after ``save`` returned
    verified v2's digest, so it must not share the v1 load and serve v1."""
    import threading
    from concurrent.futures import Future

    import servelab.weights.store as store_module

    cache: WeightCache[tuple[str, str, str]] = WeightCache(10**9)
    store = WeightStore(tmp_path, cache=cache)
    v1, v2 = weights(51), weights(52)
    store.save("m", v1)
    first_read = threading.Event()
    release_first = threading.Event()
    real = store._load_verified
    first = []

    def load(key: str, device: object) -> object:
        result = real(key, device)  # type: ignore[arg-type]
        if not first:
            first.append(True)
            first_read.set()
            release_first.wait()  # the v1 load stays in flight until the new replica decided
        return result

    class Flight(Future):  # type: ignore[type-arg]
        def result(self, timeout: float | None = None) -> object:
            release_first.set()  # joining the v1 load: let it finish instead of deadlocking
            return super().result(timeout)

    monkeypatch.setattr(store, "_load_verified", load)
    monkeypatch.setattr(store_module, "Future", Flight)
    served_first: list[dict[str, torch.Tensor]] = []

    def old_replica() -> None:
        with store.replica("m") as w:
            served_first.append(w)

    thread = threading.Thread(target=old_replica)
    thread.start()
    first_read.wait()
    store.save("m", v2)
    with store.replica("m") as w:  # opened after save(v2) returned
        assert_same(w, v2)
    release_first.set()
    thread.join()
    assert_same(served_first[0], v1)  # it verified v1 before the save: v1 is right for it
    assert cache.pinned_keys() == []


@pytest.mark.parametrize("names", [["__metadata__"], ["w", "__metadata__"]])
def test_save_refuses_a_reserved_tensor_name_and_writes_nothing(
    store: WeightStore, names: list[str]
) -> None:
    from servelab.weights.store import InvalidTensorName

    store.save("m", weights(1))
    before = store.read_raw("m")
    with pytest.raises(InvalidTensorName, match="__metadata__"):
        store.save("m", {n: torch.ones(2) for n in names})
    with pytest.raises(InvalidTensorName, match="__metadata__"):
        store.save("other", {n: torch.ones(2) for n in names})
    assert store.read_raw("m") == before and store.keys() == ["m"]
    assert store.stale_temp_files() == []


def test_save_refuses_a_tensor_name_that_is_not_a_string(store: WeightStore) -> None:
    from servelab.weights.store import InvalidTensorName

    with pytest.raises(InvalidTensorName, match="7"):
        store.save("m", {7: torch.ones(2)})  # type: ignore[dict-item]
    assert store.keys() == []


def test_a_store_opens_beside_temp_like_names_it_cannot_judge_or_remove(tmp_path: Path) -> None:
    """A pid no process can have is judged by age like a name without a pid; a directory is
    left in place with a warning."""
    huge_new = tmp_path / f".m.safetensors.{2**80}.abcdef.tmp"
    huge_old = tmp_path / f".n.safetensors.{2**80}.abcdef.tmp"
    zero_pid = tmp_path / ".z.safetensors.0.abcdef.tmp"
    directory = tmp_path / ".d.safetensors.x8k2_q.tmp"  # no pid, a day old
    for p in (huge_new, huge_old, zero_pid):
        p.write_bytes(b"half a model")
    directory.mkdir()
    (directory / "inside").write_bytes(b"someone's data")
    os.utime(huge_old, (0, 0))
    os.utime(zero_pid, (0, 0))
    os.utime(directory, (0, 0))
    with pytest.warns(RuntimeWarning, match=r"\.d\.safetensors\.x8k2_q\.tmp"):
        store = WeightStore(tmp_path)
    assert sorted(store.removed_temp_files) == sorted([huge_old, zero_pid])
    assert huge_new.exists() and (directory / "inside").read_bytes() == b"someone's data"


def test_keys_skips_an_entry_deleted_after_the_listing(
    store: WeightStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.save("stays", weights(1))
    store.save("goes", weights(2))
    real_lstat = Path.lstat

    def lstat(self: Path) -> os.stat_result:
        if self.name == "goes.safetensors":
            self.unlink(missing_ok=True)  # another process deletes it right after the listing
        return real_lstat(self)

    monkeypatch.setattr(Path, "lstat", lstat)
    assert store.keys() == ["stays"]


def test_a_packed_fp4_scalar_is_an_unsupported_dtype_and_writes_nothing(
    store: WeightStore,
) -> None:
    from servelab.weights.store import UnsupportedDtype

    fp4 = getattr(torch, "float4_e2m1fn_x2", None)
    if fp4 is None:
        pytest.skip("this torch has no packed FP4 dtype")
    scalar = torch.zeros((), dtype=torch.uint8).view(fp4)
    with pytest.raises(UnsupportedDtype, match="'s'"):
        store.save("m", {"ok": torch.ones(2), "s": scalar})
    assert store.keys() == [] and store.stale_temp_files() == []
    store.save("m", {"s": scalar.reshape(1)})  # what the message says to do
    assert store.load("m")["s"].shape == (1,)


@pytest.mark.parametrize(
    "header",
    [b"[" * 100_000 + b"]" * 100_000, b'{"x":' + b"7" * 5000 + b"}"],
    ids=["nested-deeper-than-the-parser-recurses", "integer-longer-than-python-converts"],
)
def test_a_header_json_cannot_read_is_a_corrupt_entry(tmp_path: Path, header: bytes) -> None:
    cache: WeightCache[tuple[str, str, str]] = WeightCache(10**9)
    store = WeightStore(tmp_path, cache=cache)
    store.path("m").write_bytes(len(header).to_bytes(8, "little") + header)
    with pytest.raises(CorruptEntry):
        store.load("m")
    with pytest.raises(CorruptEntry):
        store.digest("m")
    with pytest.raises(CorruptEntry), store.replica("m"):
        pass
    assert len(cache) == 0


@pytest.mark.parametrize(
    "tensors",
    [{"w": [1.0, 2.0]}, {"w": torch.ones(2), "b": None}, [("w", torch.ones(2))]],
    ids=["a-list-value", "a-none-value", "not-a-mapping"],
)
def test_a_value_that_is_not_a_tensor_is_refused_and_writes_nothing(
    store: WeightStore, tensors: object
) -> None:
    from servelab.weights.store import NotATensor

    store.save("m", {"w": torch.zeros(2)})
    before = store.load("m")["w"].clone()
    with pytest.raises(NotATensor) as raised:
        store.save("m", tensors)  # type: ignore[arg-type]
    assert isinstance(raised.value, TypeError)
    assert "tensor" in str(raised.value)
    assert store.keys() == ["m"] and store.stale_temp_files() == []
    assert torch.equal(store.load("m")["w"], before)
