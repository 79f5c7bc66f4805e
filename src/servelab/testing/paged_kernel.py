"""Cases, oracles and launchers for grading a paged-attention decode kernel written in Triton.

The learner's kernel is three ``@triton.jit`` functions named by notebook 08's skeleton, each
calling the one before it through its module's globals:

``load_block(cache, table, j, seq_len, head, stride_block, stride_slot, stride_head,
BLOCK_SIZE, HEAD_DIM)``
    the ``[BLOCK_SIZE, HEAD_DIM]`` tile of logical block ``j`` of one sequence and head, in
    fp32, zero at the positions at or past ``seq_len``;
``attend(q, k_cache, v_cache, table, seq_len, kv_head, stride_block, stride_slot,
stride_head, scale, BLOCK_SIZE, HEAD_DIM)``
    one query vector's attention output over the sequence (online softmax across blocks);
``paged_decode_kernel(q, k_cache, v_cache, tables, lens, out, stride_qb, stride_qh, stride_tb,
stride_block, stride_slot, stride_head, scale, GROUP, BLOCK_SIZE, HEAD_DIM)``
    the whole decode step: one program per (sequence, query head).

A :class:`Case` is a small decode batch (block tables, lengths, shapes, dtype, a seed); every
tensor is derived from it deterministically. Slots that belong to no sequence (the tail of a
partial last block, free blocks, the block that pads the tables) hold :data:`POISON`, so a
kernel that reads them shows it in its output. Each step is compared with the gather + SDPA
oracle of :mod:`servelab.kv.attention`, computed in fp32 from the same (possibly bf16) inputs,
within :data:`TOLERANCE`.

Without CUDA, Triton's interpreter runs the kernels on the CPU (``TRITON_INTERPRET=1``, set here
before any kernel is decorated when no GPU is present): slow by design, exact enough to grade.
"""

from __future__ import annotations

import os
import types
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton
import triton.language as tl
from hypothesis import strategies as st

if not torch.cuda.is_available() and type(tl.zeros).__name__ == "JITFunction":
    raise ImportError(
        "Triton was imported before TRITON_INTERPRET=1 was set, so its kernels cannot run on "
        "this machine without a GPU: set it before triton is first imported (in a notebook, "
        "restart the kernel and run the setup cell first)"
    )

from servelab.kv.attention import DecodeBatch, gather_attention, gather_kv

__all__ = [
    "CHAIN",
    "POISON",
    "TOLERANCE",
    "Case",
    "Difference",
    "cases",
    "first_difference",
    "helper",
    "rebuilt",
    "run_step",
]

#: The skeleton's names, in step order: step n grades ``CHAIN[n - 1]``.
CHAIN = ("load_block", "attend", "paged_decode_kernel")
#: What the slots no sequence owns hold: finite, and far from any real key or value.
POISON = 1000.0
#: (absolute, relative) tolerance of a step's output against the oracle, by input dtype. The
#: loads of step 1 are exact; fp32 attention differs from SDPA by summation order (~3e-7);
#: bf16 inputs are compared with an fp32 oracle on the same values, and the kernel's output is
#: rounded to bf16 (a relative step of 2**-8).
TOLERANCE = {"float32": (1e-4, 1e-4), "bfloat16": (2e-2, 2e-2)}
#: Scores this large overflow ``exp`` (past 88 in fp32 and bf16) unless the max is subtracted.
LARGE_Q = 100.0


@dataclass(frozen=True)
class Case:
    """One decode batch: ``tables[i]`` holds the blocks of sequence ``i``, ``lens[i]`` tokens.

    ``q_scale`` multiplies the queries (a large one pushes scores past ``exp``'s range).
    Block ``num_blocks - 1`` belongs to no one: it pads the tables.
    """

    block_size: int
    tables: tuple[tuple[int, ...], ...]
    lens: tuple[int, ...]
    num_blocks: int
    kv_heads: int = 1
    group: int = 1
    head_dim: int = 8
    dtype: str = "float32"
    q_scale: float = 1.0
    seed: int = 0

    @property
    def q_heads(self) -> int:
        return self.kv_heads * self.group

    def describe(self) -> str:
        shared = _shared_blocks(self.tables)
        q, kv = self.q_heads, self.kv_heads
        heads = f"{q} query head{'s' * (q != 1)} over {kv} kv head{'s' * (kv != 1)}"
        extra = f", blocks {sorted(shared)} shared after a fork" if shared else ""
        scale = f", queries x{self.q_scale:g}" if self.q_scale != 1.0 else ""
        return (
            f"block_size {self.block_size}, {heads}, head_dim {self.head_dim}, "
            f"{self.dtype}{scale}{extra}"
        )

    def code(self) -> str:
        """The case as a paste-able expression."""
        return (
            f"Case(block_size={self.block_size}, tables={self.tables!r}, lens={self.lens!r}, "
            f"num_blocks={self.num_blocks}, kv_heads={self.kv_heads}, group={self.group}, "
            f"head_dim={self.head_dim}, dtype={self.dtype!r}, q_scale={self.q_scale:g}, "
            f"seed={self.seed})"
        )


def _shared_blocks(tables: tuple[tuple[int, ...], ...]) -> set[int]:
    seen: set[int] = set()
    shared: set[int] = set()
    for table in tables:
        shared |= seen & set(table)
        seen |= set(table)
    return shared


@dataclass(frozen=True)
class Tensors:
    """A case's tensors: ``q [B, Hq, D]``, caches ``[blocks, block_size, Hkv, D]``, the
    padded ``tables [B, width]`` and ``lens [B]`` (int32, contiguous), and the batch."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    tables: torch.Tensor
    lens: torch.Tensor
    batch: DecodeBatch


def tensors(case: Case) -> Tensors:
    dtype = getattr(torch, case.dtype)
    gen = torch.Generator().manual_seed(case.seed)
    shape = (case.num_blocks, case.block_size, case.kv_heads, case.head_dim)
    k = torch.randn(shape, generator=gen)
    v = torch.randn(shape, generator=gen)
    q = torch.randn((len(case.lens), case.q_heads, case.head_dim), generator=gen) * case.q_scale
    owned = torch.zeros(case.num_blocks, case.block_size, dtype=torch.bool)
    for table, n in zip(case.tables, case.lens, strict=True):
        for j, block in enumerate(table):
            owned[block, : min(case.block_size, n - j * case.block_size)] = True
    k[~owned] = POISON
    v[~owned] = POISON
    width = max(len(t) for t in case.tables)
    pad = case.num_blocks - 1
    rows = [list(t) + [pad] * (width - len(t)) for t in case.tables]
    batch = DecodeBatch.build(
        [list(t) for t in case.tables],
        list(case.lens),
        block_size=case.block_size,
        num_blocks=case.num_blocks,
    )
    return Tensors(
        q=q.to(dtype),
        k=k.to(dtype),
        v=v.to(dtype),
        tables=torch.tensor(rows, dtype=torch.int32),
        lens=torch.tensor(case.lens, dtype=torch.int32),
        batch=batch,
    )


# --- strategies ------------------------------------------------------------------------------


@st.composite
def cases(draw: st.DrawFn, *, step: int, max_seqs: int = 3, max_blocks: int = 3) -> Case:
    """Small decode batches: shuffled tables, blocks shared after a fork, partial last blocks,
    lengths from 1 to ``max_blocks`` blocks, block sizes 2-8, fp32 and bf16; from step 3 on,
    grouped-query heads. Hypothesis starts from the smallest (one token, one block)."""
    bs = draw(st.sampled_from([2, 4, 8]))
    n = 1 if step == 1 else draw(st.integers(1, max_seqs))
    lens = [draw(st.integers(1, max_blocks * bs)) for _ in range(n)]
    counts = [-(-length // bs) for length in lens]
    # a forked sequence shares its parent's first full blocks
    shared = [0]
    for i in range(1, n):
        full = min(lens[i - 1] // bs, counts[i] - (1 if lens[i] % bs else 0))
        shared.append(draw(st.integers(0, max(full, 0))) if full > 0 else 0)
    distinct = sum(c - s for c, s in zip(counts, shared, strict=True))
    spare = draw(st.integers(0, 2))
    physical = draw(st.permutations(list(range(distinct + spare))))
    it = iter(physical)
    tables: list[tuple[int, ...]] = []
    for i, (c, s) in enumerate(zip(counts, shared, strict=True)):
        own = [next(it) for _ in range(c - s)]
        tables.append(tuple(tables[i - 1][:s]) + tuple(own) if s else tuple(own))
    kv_heads = draw(st.sampled_from([1, 2]))
    group = draw(st.sampled_from([1, 2, 4])) if step >= 3 else 1
    return Case(
        block_size=bs,
        tables=tuple(tables),
        lens=tuple(lens),
        num_blocks=distinct + spare + 1,
        kv_heads=kv_heads,
        group=group,
        head_dim=draw(st.sampled_from([8, 16])),
        dtype=draw(st.sampled_from(["float32", "bfloat16"])),
        q_scale=LARGE_Q if step >= 2 and draw(st.booleans()) else 1.0,
        seed=draw(st.integers(0, 255)),
    )


# --- the learner's functions -----------------------------------------------------------------


def _raw(fn: Any) -> types.FunctionType:
    raw = getattr(fn, "fn", fn)
    if not isinstance(raw, types.FunctionType):
        raise TypeError(f"expected a @triton.jit function, got {type(fn).__name__}")
    return raw


def helper(impl: Any, name: str) -> Any:
    """The skeleton function ``name`` that ``impl`` is or calls (found through the globals of
    the chain's functions), or None when the learner's kernel does not use it."""
    current: Any = impl
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        raw = getattr(current, "fn", None)
        if not isinstance(raw, types.FunctionType):
            return None
        if raw.__name__ == name:
            return current
        later = [n for n in CHAIN if n != raw.__name__ and n in raw.__code__.co_names]
        current = raw.__globals__.get(later[-1]) if later else None
    return None


def rebuilt(kernel: Any, **replace: Any) -> Any:
    """``kernel`` with some functions of its chain replaced (``load_block=...``), each caller
    above them rebuilt on a copy of its globals: the original functions are left untouched."""
    built: dict[str, Any] = {}
    for name in CHAIN:
        original = helper(kernel, name)
        source = replace.get(name, original)
        if source is None:
            continue
        raw = _raw(source)
        scope = dict(raw.__globals__)
        scope.update(built)
        fn = types.FunctionType(
            raw.__code__, scope, raw.__name__, raw.__defaults__, raw.__closure__
        )
        # the annotations say which arguments are tl.constexpr: compiled Triton needs them
        # (the interpreter does not), so a copy without them fails to compile on a GPU
        fn.__annotations__ = dict(raw.__annotations__)
        fn.__kwdefaults__ = raw.__kwdefaults__
        fn.__module__, fn.__qualname__, fn.__doc__ = raw.__module__, raw.__qualname__, raw.__doc__
        built[name] = triton.jit(fn)
    return built[_raw(kernel).__name__]


def unwritten(fn: Any) -> None:
    """Raise the learner's own NotImplementedError when ``fn`` is still the skeleton's stub
    (compiled Triton cannot run a ``raise``; the plain function reaches it at once)."""
    raw = _raw(fn)
    if "NotImplementedError" not in raw.__code__.co_names:
        return
    try:
        raw(*([None] * raw.__code__.co_argcount))
    except NotImplementedError:
        raise
    except Exception:
        return


# --- grader kernels: each step's function in a fixed frame -----------------------------------


@triton.jit
def _gather_frame(
    cache,
    table,
    out,
    seq_len,
    stride_block,
    stride_slot,
    stride_head,
    stride_oh,
    LOAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    j = tl.program_id(0)
    head = tl.program_id(1)
    tile = LOAD(
        cache, table, j, seq_len, head, stride_block, stride_slot, stride_head, BLOCK_SIZE, HEAD_DIM
    )
    rows = j * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    dims = tl.arange(0, HEAD_DIM)
    tl.store(out + head * stride_oh + rows[:, None] * HEAD_DIM + dims[None, :], tile)


@triton.jit
def _attend_frame(
    q_ptr,
    k_cache,
    v_cache,
    tables,
    lens,
    out,
    stride_qb,
    stride_qh,
    stride_tb,
    stride_block,
    stride_slot,
    stride_head,
    scale,
    ATTEND: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + seq * stride_qb + head * stride_qh + dims).to(tl.float32)
    seq_len = tl.load(lens + seq)
    o = ATTEND(
        q,
        k_cache,
        v_cache,
        tables + seq * stride_tb,
        seq_len,
        head // GROUP,
        stride_block,
        stride_slot,
        stride_head,
        scale,
        BLOCK_SIZE,
        HEAD_DIM,
    )
    tl.store(out + seq * stride_qb + head * stride_qh + dims, o)


def _device() -> str:
    """Where the kernels run: the GPU when Triton compiles, the CPU when it interprets."""
    interpreting = type(tl.zeros).__name__ != "JITFunction"
    return "cpu" if interpreting or not torch.cuda.is_available() else "cuda"


def _launch(step: int, fn: Any, case: Case, t: Tensors) -> torch.Tensor:
    """Run the step's function on the case, every address checked; its output, in fp32 on
    the CPU."""
    bs, d = case.block_size, case.head_dim
    dev = _device()
    q, k, v, tables, lens = (x.to(dev) for x in (t.q, t.k, t.v, t.tables, t.lens))
    strides = (k.stride(0), k.stride(1), k.stride(2))
    given = {"q": q, "k_cache": k, "v_cache": v, "tables": tables, "lens": lens}
    if step == 1:
        width = tables.shape[1]
        out = torch.full((case.kv_heads, width * bs, d), float("nan"), device=dev)
        with _bounded({**given, "out": out}):
            _gather_frame[(width, case.kv_heads)](
                k, tables[0], out, case.lens[0], *strides, out.stride(0),
                LOAD=fn, BLOCK_SIZE=bs, HEAD_DIM=d,
            )  # fmt: skip
        return out.cpu()
    rows = (q.stride(0), q.stride(1), tables.stride(0))
    scale = 1.0 / d**0.5
    if step == 2:
        out = torch.full(q.shape, float("nan"), device=dev)
        with _bounded({**given, "out": out}):
            _attend_frame[(len(case.lens), case.q_heads)](
                q, k, v, tables, lens, out, *rows, *strides, scale,
                ATTEND=fn, GROUP=case.group, BLOCK_SIZE=bs, HEAD_DIM=d,
            )  # fmt: skip
        return out.cpu()
    out = torch.full(q.shape, float("nan"), dtype=q.dtype, device=dev)
    with _bounded({**given, "out": out}):
        fn[(len(case.lens), case.q_heads)](
            q, k, v, tables, lens, out, *rows, *strides, scale,
            GROUP=case.group, BLOCK_SIZE=bs, HEAD_DIM=d,
        )  # fmt: skip
    return out.float().cpu()


def expected(step: int, case: Case, t: Tensors) -> torch.Tensor:
    """The oracle's answer for the step: gathered keys (zero past the length), or gather +
    SDPA in fp32 over the same inputs."""
    if step == 1:
        width = t.tables.shape[1]
        n = case.lens[0]
        keys = gather_kv(t.k.float(), t.batch.tables[:1], n)[0]  # [H, n, D]
        out = torch.zeros(case.kv_heads, width * case.block_size, case.head_dim)
        out[:, :n] = keys
        return out
    return gather_attention(t.q.float(), t.k.float(), t.v.float(), t.batch)


class OutOfBounds(Exception):
    """A kernel loaded or stored at an address outside every tensor it was given.

    On a GPU that is an illegal memory access or silent garbage; in the interpreter, a crash of
    the whole Python process. The grader checks every address first and raises this instead.
    """


@contextmanager
def _bounded(named: dict[str, torch.Tensor]) -> Iterator[None]:
    """Within the block, the interpreter refuses loads and stores outside ``named`` tensors
    (compiled on a GPU, a kernel's stray access is the driver's to report)."""
    try:
        from triton.runtime.interpreter import InterpreterBuilder
    except ImportError:  # pragma: no cover - a Triton without the interpreter
        yield
        return
    if _device() != "cpu":
        yield
        return
    spans = [
        (name, t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        for name, t in named.items()
    ]
    load, store = InterpreterBuilder.create_masked_load, InterpreterBuilder.create_masked_store

    def check(ptrs: Any, mask: Any, verb: str) -> None:
        addresses = ptrs.data[mask.data.astype(bool)] if mask is not None else ptrs.data
        if addresses.size == 0:
            return
        size = ptrs.get_element_ty().primitive_bitwidth // 8
        inside = np.zeros(addresses.shape, dtype=bool)
        for _, lo, nbytes in spans:
            inside |= (addresses >= lo) & (addresses + size <= lo + nbytes)
        if bool(inside.all()):
            return
        # no address or distance in the message: they change from run to run
        names = ", ".join(name for name, *_ in spans)
        raise OutOfBounds(f"tl.{verb} outside every tensor given to the kernel ({names})")

    def bounded_load(self: Any, ptrs: Any, mask: Any, *args: Any) -> Any:
        check(ptrs, mask, "load")
        return load(self, ptrs, mask, *args)

    def bounded_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any) -> Any:
        check(ptrs, mask, "store")
        return store(self, ptrs, value, mask, *args)

    InterpreterBuilder.create_masked_load = bounded_load
    InterpreterBuilder.create_masked_store = bounded_store
    try:
        yield
    finally:
        InterpreterBuilder.create_masked_load = load
        InterpreterBuilder.create_masked_store = store


def _innermost(exc: BaseException) -> BaseException:
    """What the kernel itself raised: the interpreter wraps it in InterpreterError."""
    while type(exc).__name__ == "InterpreterError" and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def run_step(step: int, fn: Any, case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    """(the learner's output, the oracle's) for one step's function on one case.

    Every address the kernel touches is checked first (:class:`OutOfBounds`), and an error the
    kernel raised is raised as itself, not wrapped in the interpreter's InterpreterError.
    """
    t = tensors(case)
    with warnings.catch_warnings():
        # the interpreter's NumPy warns on overflow: the comparison reports it, once
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            got = _launch(step, fn, case, t)
        except Exception as exc:
            inner = _innermost(exc)
            if inner is exc:
                raise
            raise inner from None
        return got, expected(step, case, t)


# --- where the outputs differ ----------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """The first output element outside the tolerance, and where it comes from."""

    index: tuple[int, ...]
    got: float
    want: float
    text: str


def _bad(got: torch.Tensor, want: torch.Tensor, dtype: str) -> torch.Tensor:
    atol, rtol = TOLERANCE[dtype]
    close = torch.isclose(got, want, atol=atol, rtol=rtol)
    return ~close


def first_difference(
    step: int, case: Case, got: torch.Tensor, want: torch.Tensor
) -> Difference | None:
    """The first wrong element in row-major order, described in the kernel's own terms."""
    bad = _bad(got, want, case.dtype if step > 1 else "float32")
    if step == 1:
        bad = bad | (got != want)  # a load is exact
    if not bool(bad.any()):
        return None
    index = tuple(int(i) for i in bad.nonzero()[0])
    g, w = float(got[index]), float(want[index])
    bs = case.block_size
    if step == 1:
        head, pos, dim = index
        j, off = divmod(pos, bs)
        table = case.tables[0]
        said = f"the block table says block {table[j]}" if j < len(table) else "past the table"
        where = (
            f"sequence 0, kv head {head}, position {pos} (logical block {j}, offset {off}; "
            f"{said}; the sequence has {case.lens[0]} token{'s' * (case.lens[0] != 1)}), dim {dim}"
        )
        if pos >= case.lens[0]:
            where += " — past the sequence's length, where the tile must hold 0"
        return Difference(index, g, w, where)
    seq, head, dim = index
    blocks = list(case.tables[seq])
    where = (
        f"sequence {seq}, query head {head} (kv head {head // case.group}), dim {dim}; "
        f"the sequence has {case.lens[seq]} token{'s' * (case.lens[seq] != 1)} in blocks "
        f"{blocks} (block table)"
    )
    return Difference(index, g, w, where)


def first_position(step: int, fn: Any, case: Case, seq: int) -> tuple[int, int] | None:
    """For an attention output that differs: the shortest prefix of sequence ``seq`` whose
    output already differs, as (length, the length before it agrees), by bisection over the
    sequence's length alone (one sequence, same blocks). None when even the full one agrees."""

    def differs(length: int) -> bool:
        bs = case.block_size
        table = case.tables[seq][: -(-length // bs)]
        one = Case(
            case.block_size, (table,), (length,), case.num_blocks, case.kv_heads, case.group,
            case.head_dim, case.dtype, case.q_scale, case.seed,
        )  # fmt: skip
        got, want = run_step(step, fn, one)
        return first_difference(step, one, got, want) is not None

    lo, hi = 0, case.lens[seq]
    if not differs(hi):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if differs(mid):
            hi = mid
        else:
            lo = mid
    return hi, lo
