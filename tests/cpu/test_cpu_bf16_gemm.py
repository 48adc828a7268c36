"""The CPU target's bf16 x bf16 tile GEMM (tc::gemm_bf16, device/include/tilecraft_cpu_gemm_bf16.h): the
documented order bit for bit, from its AMX, vdpbf16ps and FMA paths alike.

The order: per T.gemm call and block of 32 k of the call, the even k's products in one float32 FMA chain
from +0, the odd k's in another, then C = C + (even + odd) -- per block the formula of AMX's TDPBF16PS.
Reference: `tilecraft.testing.gemm_order.bf16_block_chain` (float64 steps rounded to float32: exact here).

Where the machine has AMX-BF16 (and the kernel grants the tile state) calls whose A and B keep every
running sum away from denormals take TDPBF16PS; else, where it has AVX512_BF16, vdpbf16ps (both treat
denormal inputs as zero and flush denormal results); other calls (denormals, tiny or huge values, inf,
NaN in A or B) take the FMA path.  C never enters the dot-product units.  The exported switches
`tc_gemm_bf16_dot` (1: the default; 0: the FMAs for every call; 2: the fast path unchecked) and
`tc_gemm_bf16_amx` (1 / 0) pick the path, and `tc_gemm_bf16_calls` counts the calls each path ran: the
tests compare the paths on the same data, bit for bit, and check which one ran.
"""
from __future__ import annotations

import ctypes

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.target import default_target
from tilecraft.testing.gemm_order import bf16_block_chain, k_order_chain


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return f.read()
    except OSError:
        return ""


def _amx_granted() -> bool:
    """The kernel grants this process AMX's tile state (what the library asks for before using AMX)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(158, 0x1023, 18) == 0  # arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
    except (OSError, AttributeError):
        return False


HAS_DP = "avx512_bf16" in _cpu_flags()
HAS_AMX_CPU = "amx_bf16" in _cpu_flags() and "avx512f" in _cpu_flags()
HAS_AMX = HAS_AMX_CPU and _amx_granted()
FMA, DP, AMX = 0, 1, 2
# (tc_gemm_bf16_dot, tc_gemm_bf16_amx) of each path this machine has, and the path it takes on data in range
PATHS = [((0, 1), FMA)] + ([((1, 0), DP)] if HAS_DP else []) + ([((1, 1), AMX)] if HAS_AMX else [])


def _kernel(M, N, K, block_k, trans_a=False, trans_b=False, c_dtype="float32"):
    """The program: per slice a T.gemm of static extents (the slices are unrolled in Python), into a
    c_dtype accumulator tile (a bf16 one is rounded once per call)."""
    a_shape = (K, M) if trans_a else (M, K)
    b_shape = (N, K) if trans_b else (K, N)
    slices = [(k0, min(block_k, K - k0)) for k0 in range(0, K, block_k)]

    @T.prim_func
    def main(A: T.Tensor(a_shape, "bfloat16"), B: T.Tensor(b_shape, "bfloat16"),
             C0: T.Tensor((M, N), c_dtype), C: T.Tensor((M, N), c_dtype)):
        with T.Kernel(1, threads=128) as _:
            acc = T.alloc_fragment((M, N), c_dtype)
            T.copy(C0, acc)
            for k0, kb in slices:
                A_s = T.alloc_shared((kb, M) if trans_a else (M, kb), "bfloat16")
                B_s = T.alloc_shared((N, kb) if trans_b else (kb, N), "bfloat16")
                T.copy(A[k0, 0] if trans_a else A[0, k0], A_s)
                T.copy(B[0, k0] if trans_b else B[k0, 0], B_s)
                T.gemm(A_s, B_s, acc, transpose_A=trans_a, transpose_B=trans_b)
            T.copy(acc, C)
    return main


_CACHE: dict = {}


def compiled(M, N, K, block_k, trans_a=False, trans_b=False, c_dtype="float32"):
    key = (M, N, K, block_k, trans_a, trans_b, c_dtype)
    if key not in _CACHE:
        _CACHE[key] = tilelang.compile(_kernel(*key), target="cpu")
    return _CACHE[key]


def switch(kernel, name) -> ctypes.c_int:
    return ctypes.c_int.in_dll(kernel._launch.lib, name)


def calls(kernel) -> list:
    return list((ctypes.c_longlong * 3).in_dll(kernel._launch.lib, "tc_gemm_bf16_calls"))


def run(kernel, a, b, c0, dot=1, amx=1, expect=None):
    """dot: 1 (the default), 0 (the FMA path for every call) or 2 (the fast path for every call, without
    the range checks: not the CPU target's semantics); amx 0 keeps AMX out.  expect: the path every call
    must have taken."""
    c = torch.empty_like(c0)
    flags = switch(kernel, "tc_gemm_bf16_dot"), switch(kernel, "tc_gemm_bf16_amx")
    flags[0].value, flags[1].value = dot, amx
    before = calls(kernel)
    try:
        kernel(a, b, c0, c)
    finally:
        flags[0].value, flags[1].value = 1, 1
    if expect is not None:
        ran = [x - y for x, y in zip(calls(kernel), before)]
        assert ran[expect] > 0 and sum(ran) == ran[expect], (ran, expect)
    return c


def every_path(kernel, a, b, c0, in_range=True):
    """c from each path this machine has (dict path -> c), each checked to have run where it should: on
    data in range the path asked for, else the FMAs"""
    return {path: run(kernel, a, b, c0, *flags, expect=path if in_range else FMA) for flags, path in PATHS}


def bits_equal(x, y) -> bool:
    """The same float32 bits, except that any NaN equals any NaN (the payload of a NaN made by inf - inf
    or 0 * inf is the machine's)."""
    nx, ny = torch.isnan(x), torch.isnan(y)
    it = torch.int16 if x.dtype == torch.bfloat16 else torch.int32
    return x.dtype == y.dtype and torch.equal(nx, ny) and torch.equal(x.view(it)[~nx], y.view(it)[~ny])


def wide(shape, g, lo=-20, hi=21):
    """bf16 values over 2^lo .. 2^hi with random signs (the summation order changes the result), some zeros
    of either sign."""
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(lo, hi, shape, generator=g).float())
    zero = torch.rand(shape, generator=g) < 0.05
    x = torch.where(zero, torch.where(torch.rand(shape, generator=g) < 0.5, 0.0, -0.0), x)
    return x.bfloat16()


SHAPES = [  # M, N, K, block_k, trans_a, trans_b
    (64, 64, 64, 32, False, False),
    (37, 50, 33, 33, False, False),     # ragged M / N, odd K: a block of 32 and one of 1
    (40, 96, 35, 16, False, True),      # transposed B, slices 16 16 3
    (24, 33, 17, 17, True, False),      # transposed A, odd K
    (8, 64, 3, 3, False, False),        # K = 3
    (128, 128, 96, 96, False, False),   # three blocks a call
    (64, 96, 80, 80, False, True),      # blocks of 32 32 16, transposed B
    (3, 40, 64, 64, True, True),        # a decode's few rows
]


@pytest.mark.parametrize("M,N,K,block_k,trans_a,trans_b", SHAPES)
def test_the_block_chain_bit_for_bit_every_path(M, N, K, block_k, trans_a, trans_b):
    g = torch.Generator().manual_seed(M * 7919 + N * 31 + K)
    k = compiled(M, N, K, block_k, trans_a, trans_b)
    a = in_range((M, K), g, -20, 21).bfloat16()
    b = in_range((K, N), g, -20, 21).bfloat16()
    c0 = wide((M, N), g).float()
    ref = bf16_block_chain(a, b, c0, block_k)
    at = a.T.contiguous() if trans_a else a
    bt = b.T.contiguous() if trans_b else b
    for path, c in every_path(k, at, bt, c0).items():
        assert bits_equal(c, ref), (path, (c - ref).abs().max())
    # the test can tell the orders apart: the plain k order differs somewhere on this data
    if K > 2:
        seq = c0.clone()
        for k0 in range(0, K, block_k):
            seq = k_order_chain(a[:, k0:k0 + block_k], b[k0:k0 + block_k], seq)
        assert not torch.equal(seq, ref)


def test_a_bf16_accumulator_tile_is_rounded_once_per_call():
    M, N, K, bk = 24, 40, 48, 16
    k = compiled(M, N, K, bk, c_dtype="bfloat16")
    g = torch.Generator().manual_seed(8)
    a, b, c0 = wide((M, K), g), wide((K, N), g), wide((M, N), g)
    ref = bf16_block_chain(a, b, c0, bk)
    for path, c in every_path(k, a, b, c0).items():
        assert bits_equal(c, ref), path


def test_signed_zeros_and_an_odd_k():
    """-0 accumulators with +-0 products: the chains start at +0 and stay there (-0 + +0 == +0), so C's
    -0 becomes +0; an odd K's last k (an even one) ends the even chain."""
    M, N, K = 16, 32, 7
    k = compiled(M, N, K, K)
    g = torch.Generator().manual_seed(5)
    sign = lambda shape: torch.where(torch.rand(shape, generator=g) < 0.5, 1.0, -1.0)  # noqa: E731
    a = (sign((M, K)) * 0.0).bfloat16()
    b = (sign((K, N)) * 0.0).bfloat16()
    c0 = sign((M, N)) * 0.0
    assert bool((c0.view(torch.int32) < 0).any())
    ref = bf16_block_chain(a, b, c0, K)
    assert not bool((ref.view(torch.int32) < 0).any())  # -0 + (+0 + +0) == +0
    for path, c in every_path(k, a, b, c0).items():
        assert bits_equal(c, ref), path
    a[:, -1] = 1.0  # the last k's product nonzero
    b[-1, :] = 2.0 ** -3
    ref = bf16_block_chain(a, b, c0, K)
    assert bool((ref == 2.0 ** -3).all())
    for path, c in every_path(k, a, b, c0).items():
        assert bits_equal(c, ref), path


def _special(kind, shape, g):
    x = wide(shape, g, -8, 9).float()
    i = torch.randint(0, x.numel(), (max(1, x.numel() // 50),), generator=g)
    v = {"denormal": 2.0 ** -130, "tiny": 2.0 ** -60, "huge": 2.0 ** 70, "inf": float("inf"),
         "nan": float("nan")}[kind]
    x.view(-1)[i] = v * torch.where(torch.rand(i.shape, generator=g) < 0.5, 1.0, -1.0)
    return x


@pytest.mark.parametrize("kind", ["denormal", "tiny", "huge", "inf", "nan"])
@pytest.mark.parametrize("where", ["A", "B", "C"])
def test_values_outside_the_fast_range(kind, where):
    """A or B holding denormals (which the dot-product units would read as zero), tiny or huge values, inf
    or NaN: the FMA path, exactly the order.  The same in C: the fast paths (C never enters them)."""
    M, N, K = 32, 64, 64
    k = compiled(M, N, K, K)
    g = torch.Generator().manual_seed(hash((kind, where)) % 1000)
    a, b, c0 = wide((M, K), g, -8, 9), wide((K, N), g, -8, 9), wide((M, N), g, -8, 9).float()
    if where == "A":
        a = _special(kind, (M, K), g).bfloat16()
    elif where == "B":
        b = _special(kind, (K, N), g).bfloat16()
    else:
        c0 = _special(kind, (M, N), g)
    ref = bf16_block_chain(a, b, c0, K)
    for path, c in every_path(k, a, b, c0, in_range=where == "C").items():
        assert bits_equal(c, ref), (kind, where, path)


def test_sums_that_cancel_into_denormals():
    """A and B in the fast range, C tiny (2^-112 + 2^-130, not a multiple of 2^-126): the block's product
    cancels C's leading bits and the sum is denormal -- C + (even + odd) is a float32 add outside the
    dot-product units, so every path keeps the denormal."""
    M, N, K = 8, 32, 2
    k = compiled(M, N, K, K)
    a = torch.zeros(M, K)
    b = torch.zeros(K, N)
    a[:, 1] = -(2.0 ** -56)
    b[1, :] = 2.0 ** -56
    a, b = a.bfloat16(), b.bfloat16()
    c0 = torch.full((M, N), 2.0 ** -112 + 2.0 ** -130)
    ref = bf16_block_chain(a, b, c0, K)
    assert float(ref[0, 0]) == 2.0 ** -130  # denormal
    for path, c in every_path(k, a, b, c0).items():
        assert bits_equal(c, ref), path


def in_range(shape, g, lo, hi):
    """Magnitudes in [2^lo, 2^hi] (bf16), random signs, some zeros of either sign."""
    e = torch.randint(lo, hi, shape, generator=g).float()
    x = (1 + torch.rand(shape, generator=g)) * torch.exp2(e) * torch.where(torch.rand(shape, generator=g) < 0.5, 1.0, -1.0)
    x = torch.where(torch.rand(shape, generator=g) < 0.05, x * 0.0, x)
    return x


@pytest.mark.skipif(not (HAS_DP or HAS_AMX), reason="no AVX512_BF16 or AMX-BF16 on this CPU")
def test_the_machines_dot_products_are_the_block_chain_in_range():
    """Data over the whole fast range (A, B: 2^-56 .. 2^55), with cancellation, C of any size: vdpbf16ps
    (fed the chains two k at a time) and TDPBF16PS (from zeroed tiles), unchecked, give the order's bits
    -- the machine's instructions are the SDM's pseudo-code."""
    M, N, K = 64, 64, 96
    k = compiled(M, N, K, 96)
    g = torch.Generator().manual_seed(1234)
    for lo, hi in [(-56, 55), (-28, 0), (-4, 5)]:
        a, b = in_range((M, K), g, lo, hi).bfloat16(), in_range((K, N), g, lo, hi).bfloat16()
        c0 = in_range((M, N), g, 2 * lo, 2 * hi)
        ref = bf16_block_chain(a, b, c0, K)
        for (dot, amx), path in PATHS:
            for d in ((2, 1) if path != FMA else (0,)):
                assert bits_equal(run(k, a, b, c0, d, amx, expect=path), ref), (lo, hi, d, path)


@pytest.mark.skipif(not (HAS_DP or HAS_AMX), reason="no AVX512_BF16 or AMX-BF16 on this CPU")
def test_the_range_checks_are_what_keeps_the_order():
    """Unchecked, the dot-product units read a denormal input as zero: the checked default does not."""
    M, N, K = 8, 32, 2
    k = compiled(M, N, K, K)
    a, b = torch.ones(M, K).bfloat16(), torch.zeros(K, N).bfloat16()
    b[0, :] = 2.0 ** -130  # denormal in bf16 too: the sum is 0 + 0 + 2^-130
    c0 = torch.zeros(M, N)
    ref = bf16_block_chain(a, b, c0, K)
    assert float(ref[0, 0]) == 2.0 ** -130
    for (dot, amx), path in PATHS[1:]:
        assert float(run(k, a, b, c0, 2, amx, expect=path)[0, 0]) == 0.0, path
        assert bits_equal(run(k, a, b, c0, 1, amx, expect=FMA), ref), path


def test_sums_that_overflow():
    """C = +-FLT_MAX plus products of 2^55 x 2^55: the sums overflow to +-inf, and stay there, on every
    path (and the unchecked units round the overflow to inf as the FMA does)."""
    M, N, K = 8, 32, 6
    k = compiled(M, N, K, K)
    big = torch.finfo(torch.float32).max
    a = torch.full((M, K), 2.0 ** 55)
    a[:, ::3] = -(2.0 ** 55)
    b = torch.full((K, N), 2.0 ** 55)
    a, b = a.bfloat16(), b.bfloat16()
    c0 = torch.full((M, N), big)
    c0[::2] = -big
    ref = bf16_block_chain(a, b, c0, K)
    assert bool(torch.isinf(ref).any())
    for path, c in every_path(k, a, b, c0).items():
        assert bits_equal(c, ref), path
    for (dot, amx), path in PATHS[1:]:
        assert bits_equal(run(k, a, b, c0, 2, amx, expect=path), ref), path


def test_kernels_gemm_matmul_bf16():
    """tilecraft.kernels.gemm.matmul with bf16 inputs and output (C rounded once at the end), ragged and
    transposed: the order per block_K slice, on the path this machine takes by default."""
    from tilecraft.kernels.gemm import matmul
    g = torch.Generator().manual_seed(3)
    for M, N, K, trans_b in [(256, 256, 256, False), (200, 136, 96, True)]:
        with default_target("cpu"):
            kern = matmul(M, N, K, dtype="bfloat16", trans_B=trans_b)
        a = wide((M, K), g, -6, 7)
        b = wide((K, N), g, -6, 7)
        out = kern(a, b.T.contiguous() if trans_b else b)
        ref = bf16_block_chain(a, b, torch.zeros(M, N), 32).bfloat16()
        assert torch.equal(out.view(torch.int16), ref.view(torch.int16))


def test_only_bf16_programs_include_the_bf16_header():
    from tilecraft.kernels.gemm import matmul
    with default_target("cpu"):
        bf = matmul(64, 64, 64, dtype="bfloat16").get_kernel_source()
        fp = matmul(64, 64, 64, dtype="float16").get_kernel_source()
    assert "tilecraft_cpu_gemm_bf16.h" in bf and "tc::gemm_bf16(" in bf
    assert "tilecraft_cpu_gemm_bf16.h" not in fp and "tc::gemm_bf16(" not in fp


@pytest.mark.skipif(not (HAS_DP or HAS_AMX), reason="no AVX512_BF16 or AMX-BF16 on this CPU")
def test_the_fast_paths_are_compiled_in_here():
    """On this machine the library has the fast paths it can run: -march=native defines __AVX512BF16__
    (and __AMX_BF16__ where the CPU has AMX)."""
    from tilecraft.compiler.cxx import CFLAGS
    import subprocess
    from tilecraft import env
    out = subprocess.run([env.cxx(), *CFLAGS, "-dM", "-E", "-x", "c++", "/dev/null"], capture_output=True, text=True)
    assert ("__AVX512BF16__" in out.stdout) == HAS_DP
    assert ("__AMX_BF16__" in out.stdout) == HAS_AMX_CPU
