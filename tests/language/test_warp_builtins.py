"""TileLang's warp-level and smaller builtins (language/warp.py, language/lowlevel.py): lane / warp
indices, shuffles and warp reductions compiled for sm_80 / sm_90a and run on the CPU target (its
threads emulated) against torch; `T.dp4a`, `T.__ldg`, `T.loop_break` and `T.address_of` on the CPU target against numpy;
misuse refused.  GPU twin (every value against torch): tests/gpu/test_warp_builtins_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90a"}
THREADS = 128


def warp_program():
    """Row r of Out: what each of the 128 threads computes with builtin r; X float, B int32."""
    n = THREADS

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), B: T.Tensor((n,), "int32"),
             Out: T.Tensor((9, n), "float32"), Bits: T.Tensor((3, n), "int32"), Idx: T.Tensor((3, n), "int32")):
        with T.Kernel(1, threads=n) as bx:
            tid = T.get_thread_binding()
            v = X[tid]
            Out[0, tid] = T.shfl_xor(v, 1)
            Out[1, tid] = T.shfl_down(v, 2)
            Out[2, tid] = T.shfl_up(v, 3)
            Out[3, tid] = T.shfl_sync(v, 5)
            Out[4, tid] = T.shfl_xor(v, 4, width=8)
            Out[5, tid] = T.warp_reduce_sum(v)
            Out[6, tid] = T.warp_reduce_max(v)
            Out[7, tid] = T.warp_reduce_min(v)
            T.sync_warp()
            Out[8, tid] = T.shfl_down(v, 1, 16)
            w = B[tid]
            Bits[0, tid] = T.warp_reduce_bitand(w)
            Bits[1, tid] = T.warp_reduce_bitor(w)
            Bits[2, tid] = T.warp_reduce_bitxor(w)
            Idx[0, tid] = T.get_lane_idx()
            Idx[1, tid] = T.get_warp_idx()
            Idx[2, tid] = T.get_warp_group_idx(32, 2)
    return main


def warp_reference(x: torch.Tensor, b: torch.Tensor):
    """What warp_program computes, from torch on the host."""
    n = x.numel()
    lane = torch.arange(n) % 32
    base = torch.arange(n) - lane
    out = torch.empty(9, n)

    def pick(src_lane):
        return x[base + src_lane]
    out[0] = pick(lane ^ 1)
    out[1] = pick(torch.where(lane + 2 < 32, lane + 2, lane))
    out[2] = pick(torch.where(lane >= 3, lane - 3, lane))
    out[3] = pick(torch.full_like(lane, 5))
    seg8 = lane - lane % 8
    out[4] = pick(seg8 + ((lane % 8) ^ 4))
    w = x.view(-1, 32)
    out[5] = w.sum(1, keepdim=True).expand(-1, 32).reshape(-1)
    out[6] = w.amax(1, keepdim=True).expand(-1, 32).reshape(-1)
    out[7] = w.amin(1, keepdim=True).expand(-1, 32).reshape(-1)
    seg16 = lane - lane % 16
    out[8] = pick(torch.where(lane % 16 + 1 < 16, lane + 1, lane))
    del seg16
    bw = b.view(-1, 32)
    bits = torch.empty(3, n, dtype=torch.int32)
    acc_and, acc_or, acc_xor = bw[:, 0].clone(), bw[:, 0].clone(), bw[:, 0].clone()
    for j in range(1, 32):
        acc_and &= bw[:, j]
        acc_or |= bw[:, j]
        acc_xor ^= bw[:, j]
    for r, a in enumerate((acc_and, acc_or, acc_xor)):
        bits[r] = a[:, None].expand(-1, 32).reshape(-1)
    idx = torch.stack([lane, torch.arange(n) // 32, torch.arange(n) // 64]).int()
    return out, bits, idx


@pytest.mark.cuda_compile
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90a"])
def test_warp_builtins_compile(target):
    src = tilelang.compile(warp_program(), target=target).get_kernel_source()
    for s in ("tc::shfl_xor(", "tc::shfl_down(", "tc::shfl_up(", "tc::shfl_idx(", "tc::sync_warp()",
              "tc::shfl_xor_reduce<tc::SumOp, 1, 2, 4, 8, 16>", "tc::shfl_xor_reduce<tc::BitXorOp, 1, 2, 4, 8, 16>"):
        assert s in src, s


def test_warp_builtins_run_on_the_cpu_target():
    """Every builtin's value in every thread, the block's threads emulated (tests/cpu/test_cpu_threads.py)."""
    x, b = torch.randn(THREADS), torch.randint(-(1 << 30), 1 << 30, (THREADS,), dtype=torch.int32)
    out, bits, idx = torch.empty(9, THREADS), torch.empty(3, THREADS, dtype=torch.int32), torch.empty(3, THREADS, dtype=torch.int32)
    tilelang.compile(warp_program(), target="cpu")(x, b, out, bits, idx)
    want_out, want_bits, want_idx = warp_reference(x, b)
    torch.testing.assert_close(out, want_out)
    assert torch.equal(bits, want_bits) and torch.equal(idx, want_idx)


def test_a_warp_reduction_of_uniform_values_on_the_cpu_target():
    @T.prim_func
    def main(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(32):
                Y[i] = T.warp_reduce_sum(X[i])
    x = torch.randn(32)
    y = tilelang.compile(main, out_idx=[1], target="cpu")(x)
    torch.testing.assert_close(y, x * 32)


@pytest.mark.parametrize("body, message", [
    (lambda v: T.shfl_xor(T.cast(v, "int8"), 1), "16-, 32- or 64-bit"),
    (lambda v: T.shfl_down(v, 1, 48), "power of two up to 32"),
    (lambda v: T.warp_reduce_bitand(v), "integer value"),
])
def test_bad_shuffles_are_refused(body, message):
    with pytest.raises(TilecraftError, match=message):
        @T.prim_func
        def main(X: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                X[0] = body(X[0])


def small_builtins_program(n, stop_at):
    """Out[i] = dp4a of A's and B's row i (+ 7); Cnt[0]: elements of X before the first >= stop_at
    (T.loop_break); Cnt[1] = X[0] read by T.__ldg; an extern through T.address_of doubles Cnt[2]."""
    src = "static inline void tc_test_double(int* p) { *p *= 2; }"

    @T.prim_func
    def main(A: T.Tensor((n, 4), "int8"), B: T.Tensor((n, 4), "int8"), X: T.Tensor((n,), "int32"),
             Out: T.Tensor((n,), "int32"), Cnt: T.Tensor((3,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            acc = T.alloc_local((1,), "int32")
            c = T.alloc_var("int32")
            T.import_source(src)
            for i in T.serial(n):
                acc[0] = 7
                T.dp4a(A[i, 0], B[i, 0], acc[0])
                Out[i] = acc[0]
            c = 0
            for i in T.serial(n):
                if X[i] >= stop_at:
                    T.loop_break()
                c = c + 1
            Cnt[0] = c
            Cnt[1] = T.__ldg(X[0])
            acc[0] = 21
            T.call_extern("handle", "tc_test_double", T.address_of(acc[0]))
            Cnt[2] = acc[0]
    return main


def test_small_builtins_on_the_cpu_target():
    n = 16
    a = torch.randint(-128, 128, (n, 4), dtype=torch.int8)
    b = torch.randint(-128, 128, (n, 4), dtype=torch.int8)
    x = torch.randint(0, 100, (n,), dtype=torch.int32)
    out, cnt = torch.empty(n, dtype=torch.int32), torch.empty(3, dtype=torch.int32)
    tilelang.compile(small_builtins_program(n, 90), target="cpu")(a, b, x, out, cnt)
    assert out.tolist() == ((a.int() * b.int()).sum(1) + 7).tolist()
    first = next((i for i, v in enumerate(x.tolist()) if v >= 90), n)
    assert cnt.tolist() == [first, int(x[0]), 42]


def test_dp4a_takes_int8_and_an_int32_accumulator():
    with pytest.raises(TilecraftError, match="four int8 or uint8"):
        @T.prim_func
        def main(A: T.Tensor((4,), "float16"), Out: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                acc = T.alloc_local((1,), "int32")
                T.dp4a(A[0], A[0], acc[0])
                Out[0] = acc[0]


def test_loop_break_outside_a_serial_loop_is_refused():
    with pytest.raises(TilecraftError, match=r"T.loop_break\(\) cannot leave T.Parallel"):
        @T.prim_func
        def main(X: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(32):
                    T.loop_break()
