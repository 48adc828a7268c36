"""The target's limits and the compiler's own budget, checked before anything is planned.

- CUDA: a kernel with T.gemm, T.reduce or T.cumsum runs them on whole warps: its block is a
  multiple of 32 threads (the tensor-core instructions and the warp shuffles of a reduction are
  warp-wide; a block of 33 or 100 threads would leave a partial warp and unroll each tile over it).
- CUDA: each shared tile on its own fits in the architecture's shared memory per block (the exact
  figure, with pipeline buffers and the reuse of space between tiles whose lifetimes do not overlap,
  is checked by plan_shared_memory: so the sum of all tiles is no lower bound); checked here so a
  huge tile never reaches layout or TMA planning.
- CUDA: the registers the fragments take per thread stay within a budget: a fragment is spread
  over the block's threads, except one accessed outside every T.Parallel loop, which every thread
  holds whole (transform/infer_layouts.py); past the budget the unrolled code would take the device
  compiler minutes and spill anyway.
- CPU: the on-chip tiles of a block are heap arrays; their total stays within CPU_TILE_BYTES, so
  `T.alloc_shared((1 << 40,), ...)` is refused here instead of failing to allocate at run time (in
  the thread-level mode, counting each thread's own local arrays and fragment share).  An allocation
  that still fails at run time (a memory limit) is a TilecraftError naming the tile (codegen/cpp.py).
"""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import Alloc, Kernel, collect
from ...ir.tileop import Cumsum, Gemm, Reduce

CPU_TILE_BYTES = 1 << 30           # on-chip tiles of one block on the CPU target
REGISTER_BUDGET_WORDS = 2048       # 32-bit words of fragment and local storage per CUDA thread
WARP = 32


def _allocs(k: Kernel) -> list:
    return [a.buffer for a in collect(k.body, lambda n: isinstance(n, Alloc))]


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n < 1 << 30 else f"{n / (1 << 30):.0f} GiB"


def _check_cuda(k: Kernel, target) -> None:
    bufs = _allocs(k)
    threads = k.num_threads
    tile_ops = collect(k.body, lambda n: isinstance(n, (Gemm, Reduce, Cumsum)))
    if threads % WARP and tile_ops:
        what = f"T.{type(tile_ops[0]).__name__.lower()} (line {tile_ops[0].span.line if tile_ops[0].span else '?'})"
        raise TilecraftError(
            f"T.Kernel(threads={threads}): {what} runs on whole warps, so a block of this kernel needs a multiple "
            f"of {WARP} threads on CUDA", k.span, hint="threads=128 (4 warps) is the usual choice")
    shared = [b for b in bufs if b.scope == "shared" and b.is_static]
    largest = max(shared, key=lambda b: b.nbytes, default=None)
    if largest is not None and largest.nbytes > target.max_shared_memory:
        raise TilecraftError(
            f"the shared tile {largest.name} {tuple(largest.shape)} {largest.dtype} takes {largest.nbytes} bytes but "
            f"{target.arch} allows at most {target.max_shared_memory} bytes of shared memory per block",
            largest.span or k.span,
            hint="use smaller tiles (block_M/block_N/block_K)")
    from ..infer_layouts import outside_parallel_fragments
    whole = dict(outside_parallel_fragments(k.body))
    words, parts = 0, []
    for b in bufs:
        if b.scope not in ("fragment", "local") or not b.is_static:
            continue
        held = b.numel if (b.scope == "local" or b in whole) else -(-b.numel // threads)
        w = -(-held * b.dtype.bits // 32)
        words += w
        parts.append((w, b))
    if words > REGISTER_BUDGET_WORDS:
        w, b = max(parts, key=lambda p: p[0])
        if b in whole:
            span = whole[b]
            why = (f"{b.name} {tuple(b.shape)} is accessed outside every T.Parallel loop (line "
                   f"{span.line if span else '?'}), so every thread holds all {b.numel} of its elements")
            hint = (f"read or write {b.name} inside a T.Parallel loop, or copy the elements needed outside it "
                    f"into a small fragment or a T.alloc_var")
        else:
            span = b.span
            why = (f"the largest, {b.name} {tuple(b.shape)} {b.dtype}, takes {w} per thread over {threads} "
                   f"threads")
            hint = "use smaller tiles or more threads per block"
        raise TilecraftError(
            f"the kernel's fragments need {words} 32-bit registers per thread, over the compiler's budget of "
            f"{REGISTER_BUDGET_WORDS} (a thread has 255 registers; the unrolled code for more would take the "
            f"device compiler minutes and spill): {why}", span or k.span, hint=hint)


def _check_cpu(k: Kernel, threads_mode: bool) -> None:
    """The tile path holds each tile once per block; the thread-level mode (transform/cpu_threads.py)
    gives every thread its own local arrays and its share of each fragment (the whole fragment where
    it is accessed outside every T.Parallel loop), as CUDA does."""
    bufs = [b for b in _allocs(k) if b.scope != "global" and b.is_static]
    threads = k.num_threads
    whole = {}
    if threads_mode:
        from ..infer_layouts import outside_parallel_fragments
        whole = dict(outside_parallel_fragments(k.body))

    def per_block(b) -> int:
        if not threads_mode or b.scope == "shared":
            return b.nbytes
        held = b.numel if (b.scope == "local" or b in whole) else -(-b.numel // threads)
        return -(-held * b.dtype.bits // 8) * threads

    total = sum(per_block(b) for b in bufs)
    if total > CPU_TILE_BYTES:
        b = max(bufs, key=per_block)
        copies = (f" ({_kib(per_block(b) // threads)} in each of the block's {threads} threads: the thread-level "
                  f"mode gives every thread its own)" if per_block(b) != b.nbytes else "")
        raise TilecraftError(
            f"the kernel's on-chip tiles take {_kib(total)} per block on the CPU target (at most "
            f"{_kib(CPU_TILE_BYTES)}): {b.name} {tuple(b.shape)} {b.dtype} alone is {_kib(per_block(b))}{copies}",
            b.span or k.span, hint="tiles are blocks of a tensor; index the tensor itself for the rest")


def check_limits(func, target) -> None:
    for k in collect(func.body, lambda n: isinstance(n, Kernel)):
        if target.kind == "cuda":
            _check_cuda(k, target)
        else:
            _check_cpu(k, bool(func.lowering.cpu_threads))
