"""Where does a small memory-bound kernel's time go?  Copy and softmax under three L2 states.

The bench flushes L2 by zeroing 256 MB, which leaves up to an L2's worth of *dirty* lines that
the next kernel must write back before it can use them.  This probe times the same kernels after
a write flush (zero_), a read flush (a reduction over 256 MB: clean lines), and no flush, and
with a CUDA graph (no launch gaps), to separate the kernel from the measurement.

    PYTHONPATH=. python3 benchmarks/membw_probe.py
"""
from __future__ import annotations

import statistics

import torch

import tilecraft as tilelang
import tilecraft.kernels as K
import tilecraft.language as T


@tilelang.jit(out_idx=[-1])
def rowcopy(M, N, block_M, threads, dtype="float16"):
    """softmax's memory traffic and layout without its arithmetic"""
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            X_local = T.alloc_fragment((block_M, N), "float")
            T.copy(X[bx * block_M, 0], X_local)
            T.copy(X_local, Y[bx * block_M, 0])
    return main

FLUSH = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
SINK = torch.empty((), dtype=torch.float32, device="cuda")


def flush_write():
    FLUSH.zero_()


def flush_read():
    SINK.copy_(FLUSH.sum())


FLUSH2 = torch.empty_like(FLUSH)


def flush_write_read():
    FLUSH.zero_()
    SINK.copy_(FLUSH2.sum())


def flush_none():
    pass


def time_ms(fn, flush, n=200):
    for _ in range(10):
        flush()
        fn()
    s = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    e = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        flush()
        s[i].record()
        fn()
        e[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(s, e))


def main():
    flushes = {"write": flush_write, "read": flush_read, "write+read": flush_write_read, "none": flush_none}
    cases = []
    for mib in (32, 64, 128, 1024):
        src = torch.randn(mib * 1024 * 1024 // 2, dtype=torch.float16, device="cuda")
        dst = torch.empty_like(src)
        cases.append((f"copy {mib} MiB", lambda s=src, d=dst: d.copy_(s), 2 * mib * 2**20))
        if mib <= 64:  # read-only: far above DRAM speed would mean the input stayed in L2
            cases.append((f"read (sum) {mib} MiB", lambda s=src: s.sum(), mib * 2**20))
    for m, n, cfgs in ((16384, 1024, [(4, 128), (8, 256), (2, 64), (16, 512), (8, 128), (16, 256)]),
                       (4096, 8192, [(1, 256), (1, 128), (2, 256), (1, 512), (4, 512)])):
        x = torch.randn(m, n, dtype=torch.float16, device="cuda") * 3
        y = torch.empty_like(x)
        ref = torch.softmax(x.float(), -1).half()
        for bm, th in cfgs:
            k = K.softmax(m, n, block_M=bm, threads=th)
            k(x, y)
            err = (y.float() - ref.float()).abs().max().item()
            cases.append((f"softmax {m}x{n} {bm}/{th} err={err:.1e}", lambda k=k, x=x, y=y: k(x, y), 4 * m * n))
            c = rowcopy(m, n, bm, th)
            cases.append((f"rowcopy {m}x{n} {bm}/{th}", lambda c=c, x=x, y=y: c(x, y), 4 * m * n))
        cases.append((f"torch.softmax {m}x{n}", lambda x=x: torch.softmax(x, -1), 4 * m * n))
    print(f"{'case':<44} " + " ".join(f"{f:>16}" for f in flushes))
    for name, fn, nbytes in cases:
        cols = []
        for fname, fl in flushes.items():
            ms = time_ms(fn, fl)
            cols.append(f"{ms * 1e3:7.1f}us {nbytes / ms / 1e9:5.2f}")
        print(f"{name:<44} " + " ".join(f"{c:>16}" for c in cols), flush=True)


if __name__ == "__main__":
    main()
