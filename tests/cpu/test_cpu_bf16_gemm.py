"""The CPU target's bf16 x bf16 tile GEMM (tc::gemm_bf16, device/include/tilecraft_cpu_gemm_bf16.h): the
documented chain bit for bit, from its vdpbf16ps path and from its FMA path alike.

The chain: per T.gemm call, each C element accumulates float32 fused multiply-adds with k taken in pairs,
the odd k of each pair first (1, 0, 3, 2, ...; an odd K's last k alone) -- vdpbf16ps's order.  Reference:
that chain in float64, rounded to float32 after every step.  It is exact: a bf16 x bf16 product is exact
in float32, and the float64 sum of two float32 values either is exact (exponents at most 28 apart) or is
so close to the larger one that it rounds to the same float32 (denormal results included), so each
rounded step is the fused multiply-add's one rounding.

Where the machine has AVX512_BF16 (and the compiler targets it, -march=native), tiles whose values keep
every running sum away from denormals take vdpbf16ps (which treats denormal inputs as zero and flushes
denormal results); other tiles (denormals, tiny or huge values, inf, NaN, in A, B or the C tile) take
the FMA path.  The exported `tc_gemm_bf16_dot` (1 by default) set to 0 sends every tile to the FMA path:
the tests compare the two on the same data, bit for bit.
"""
from __future__ import annotations

import ctypes

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.target import default_target


def _has_avx512_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512_bf16" in f.read()
    except OSError:
        return False


HAS_DP = _has_avx512_bf16()


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


def dot_switch(kernel) -> ctypes.c_int:
    return ctypes.c_int.in_dll(kernel._launch.lib, "tc_gemm_bf16_dot")


def run(kernel, a, b, c0, dot=True):
    """dot: True (the default, 1), False (0: the FMA path for every tile) or 2 (vdpbf16ps for every tile,
    without the range checks: not the CPU target's semantics)."""
    c = torch.empty_like(c0)
    flag = dot_switch(kernel)
    flag.value = int(dot)
    try:
        kernel(a, b, c0, c)
    finally:
        flag.value = 1
    return c


def pair_chain(a, b, c0, block_k):
    """The documented chain (module docstring): a (M, K), b (K, N) bf16, c0 float32 (or bfloat16: then C
    is rounded to bf16 after each call)."""
    a, b = a.double(), b.double()
    out_t = c0.dtype
    c = c0.float()
    K = a.shape[1]
    for k0 in range(0, K, block_k):
        kb = min(block_k, K - k0)
        order = [k0 + k for p in range(kb // 2) for k in (2 * p + 1, 2 * p)]
        if kb % 2:
            order.append(k0 + kb - 1)
        for k in order:
            c = (c.double() + a[:, k:k + 1] * b[k:k + 1, :]).float()
        c = c.to(out_t).float()
    return c.to(out_t)


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
    (37, 50, 33, 33, False, False),     # ragged M / N, odd K
    (40, 96, 35, 16, False, True),      # transposed B, slices 16 16 3
    (24, 33, 17, 17, True, False),      # transposed A, odd K
    (8, 64, 3, 3, False, False),        # K = 3: one pair and the tail
    (128, 128, 96, 32, False, False),
    (3, 40, 64, 64, True, True),        # a decode's few rows
]


@pytest.mark.parametrize("M,N,K,block_k,trans_a,trans_b", SHAPES)
def test_the_pair_chain_bit_for_bit_both_paths(M, N, K, block_k, trans_a, trans_b):
    g = torch.Generator().manual_seed(M * 7919 + N * 31 + K)
    k = compiled(M, N, K, block_k, trans_a, trans_b)
    a = wide((M, K), g)
    b = wide((K, N), g)
    c0 = wide((M, N), g).float()
    ref = pair_chain(a, b, c0, block_k)
    at = a.T.contiguous() if trans_a else a
    bt = b.T.contiguous() if trans_b else b
    fast, slow = run(k, at, bt, c0, dot=True), run(k, at, bt, c0, dot=False)
    assert bits_equal(fast, ref), (fast - ref).abs().max()
    assert bits_equal(slow, ref), (slow - ref).abs().max()
    # the test can tell the orders apart: the plain k order differs somewhere on this data
    if K > 1:
        seq = c0.clone()
        for kk in range(K):
            seq = (seq.double() + a.double()[:, kk:kk + 1] * b.double()[kk:kk + 1, :]).float()
        assert not torch.equal(seq, ref)


def test_a_bf16_accumulator_tile_is_rounded_once_per_call():
    M, N, K, bk = 24, 40, 48, 16
    k = compiled(M, N, K, bk, c_dtype="bfloat16")
    g = torch.Generator().manual_seed(8)
    a, b, c0 = wide((M, K), g), wide((K, N), g), wide((M, N), g)
    ref = pair_chain(a, b, c0, bk)
    for dot in (True, False):
        assert bits_equal(run(k, a, b, c0, dot), ref)


def test_signed_zeros_and_an_odd_k():
    """-0 accumulators with +-0 products: x + -0 == x, -0 + +0 == +0; an odd K's last pair is not padded
    with a +0 product (which would turn -0 into +0)."""
    M, N, K = 16, 32, 7
    k = compiled(M, N, K, K)
    g = torch.Generator().manual_seed(5)
    sign = lambda shape: torch.where(torch.rand(shape, generator=g) < 0.5, 1.0, -1.0)  # noqa: E731
    a = (sign((M, K)) * 0.0).bfloat16()
    b = (sign((K, N)) * 0.0).bfloat16()
    c0 = sign((M, N)) * 0.0
    ref = pair_chain(a, b, c0, K)
    assert bool((ref.view(torch.int32) < 0).any()) and bool((ref.view(torch.int32) == 0).any())
    for dot in (True, False):
        assert bits_equal(run(k, a, b, c0, dot), ref)
    a[:, -1] = 1.0  # the tail pair's product nonzero: -0 + x
    ref = pair_chain(a, b, c0, K)
    for dot in (True, False):
        assert bits_equal(run(k, a, b, c0, dot), ref)


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
    """A tile holding denormals (which vdpbf16ps would read as zero), tiny or huge values, inf or NaN:
    computed exactly as the chain says (the FMA path)."""
    M, N, K = 32, 64, 32
    k = compiled(M, N, K, K)
    g = torch.Generator().manual_seed(hash((kind, where)) % 1000)
    a, b, c0 = wide((M, K), g, -8, 9), wide((K, N), g, -8, 9), wide((M, N), g, -8, 9).float()
    if where == "A":
        a = _special(kind, (M, K), g).bfloat16()
    elif where == "B":
        b = _special(kind, (K, N), g).bfloat16()
    else:
        c0 = _special(kind, (M, N), g)
    ref = pair_chain(a, b, c0, K)
    for dot in (True, False):
        assert bits_equal(run(k, a, b, c0, dot), ref), (kind, where, dot)


def test_sums_that_cancel_into_denormals():
    """A and B in the fast range, C tiny (2^-120, not a multiple of 2^-126): products cancel C's leading
    bits, the sum is denormal (vdpbf16ps would flush it to zero) -- the FMA path computes the chain.  And
    the same products from C = 0: every sum a multiple of 2^-126, the fast path's, no denormal."""
    M, N, K = 8, 32, 2
    k = compiled(M, N, K, K)
    a = torch.zeros(M, K)
    b = torch.zeros(K, N)
    a[:, 1] = -(2.0 ** -56)  # the odd k first: -2^-56 * 2^-56 = -2^-112
    b[1, :] = 2.0 ** -56
    a, b = a.bfloat16(), b.bfloat16()
    c0 = torch.full((M, N), 2.0 ** -112 + 2.0 ** -130)
    ref = pair_chain(a, b, c0, K)
    assert float(ref[0, 0]) == 2.0 ** -130  # denormal
    for dot in (True, False):
        assert bits_equal(run(k, a, b, c0, dot), ref)


def in_range(shape, g, lo, hi):
    """Magnitudes in [2^lo, 2^hi] (bf16), random signs, some zeros of either sign."""
    e = torch.randint(lo, hi, shape, generator=g).float()
    x = (1 + torch.rand(shape, generator=g)) * torch.exp2(e) * torch.where(torch.rand(shape, generator=g) < 0.5, 1.0, -1.0)
    x = torch.where(torch.rand(shape, generator=g) < 0.05, x * 0.0, x)
    return x


@pytest.mark.skipif(not HAS_DP, reason="no AVX512_BF16 on this CPU")
def test_the_machines_vdpbf16ps_is_the_fma_pair_chain_in_range():
    """Data over the whole fast range (A, B: 2^-56 .. 2^55; C: 2^-103 and up), with cancellation:
    vdpbf16ps on every tile (tc_gemm_bf16_dot = 2, no checks) gives the chain's bits -- the machine's
    vdpbf16ps is the SDM's pseudo-code (odd product first, each step an FMA rounded to nearest even)."""
    M, N, K = 64, 64, 64
    k = compiled(M, N, K, 32)
    g = torch.Generator().manual_seed(1234)
    for lo, hi in [(-56, 55), (-28, 0), (-4, 5)]:
        a, b = in_range((M, K), g, lo, hi).bfloat16(), in_range((K, N), g, lo, hi).bfloat16()
        c0 = in_range((M, N), g, max(2 * lo, -103), 2 * hi)
        ref = pair_chain(a, b, c0, 32)
        for dot in (2, 1, 0):
            assert bits_equal(run(k, a, b, c0, dot), ref), (lo, hi, dot)


@pytest.mark.skipif(not HAS_DP, reason="no AVX512_BF16 on this CPU")
def test_the_range_checks_are_what_keeps_the_chain():
    """Unchecked, vdpbf16ps reads a denormal input as zero and flushes a denormal sum: the checked default
    does not."""
    M, N, K = 8, 32, 2
    k = compiled(M, N, K, K)
    a, b = torch.ones(M, K).bfloat16(), torch.zeros(K, N).bfloat16()
    b[0, :] = 2.0 ** -130  # denormal in bf16 too: the sum is 0 + 0 + 2^-130
    c0 = torch.zeros(M, N)
    ref = pair_chain(a, b, c0, K)
    assert float(ref[0, 0]) == 2.0 ** -130
    assert float(run(k, a, b, c0, 2)[0, 0]) == 0.0
    assert bits_equal(run(k, a, b, c0, 1), ref)
    # inputs in range, a denormal sum: -2^-56 * 2^-56 + 2^-112 (1 + 2^-23) = 2^-135 (only C's check sees it)
    a, b = torch.zeros(M, K), torch.zeros(K, N)
    a[:, 1], b[1, :] = -(2.0 ** -56), 2.0 ** -56
    a, b = a.bfloat16(), b.bfloat16()
    c0 = torch.full((M, N), 2.0 ** -112 * (1 + 2.0 ** -23))
    ref = pair_chain(a, b, c0, K)
    assert float(ref[0, 0]) == 2.0 ** -135
    assert float(run(k, a, b, c0, 2)[0, 0]) == 0.0
    assert bits_equal(run(k, a, b, c0, 1), ref)


def test_sums_that_overflow():
    """C = +-FLT_MAX (in the fast range) plus products of 2^55 x 2^55: the sums overflow to +-inf, and stay
    there, on both paths (and unchecked vdpbf16ps rounds the overflow to inf as the FMA does)."""
    M, N, K = 8, 32, 6
    k = compiled(M, N, K, K)
    big = torch.finfo(torch.float32).max
    a = torch.full((M, K), 2.0 ** 55)
    a[:, ::3] = -(2.0 ** 55)
    b = torch.full((K, N), 2.0 ** 55)
    a, b = a.bfloat16(), b.bfloat16()
    c0 = torch.full((M, N), big)
    c0[::2] = -big
    ref = pair_chain(a, b, c0, K)
    assert bool(torch.isinf(ref).any())
    for dot in ((2, 1, 0) if HAS_DP else (1, 0)):
        assert bits_equal(run(k, a, b, c0, dot), ref), dot


def test_kernels_gemm_matmul_bf16():
    """tilecraft.kernels.gemm.matmul with bf16 inputs and output (C rounded once at the end), ragged and
    transposed: the chain per block_K slice."""
    from tilecraft.kernels.gemm import matmul
    g = torch.Generator().manual_seed(3)
    for M, N, K, trans_b in [(256, 256, 256, False), (200, 136, 96, True)]:
        with default_target("cpu"):
            kern = matmul(M, N, K, dtype="bfloat16", trans_B=trans_b)
        a = wide((M, K), g, -6, 7)
        b = wide((K, N), g, -6, 7)
        out = kern(a, b.T.contiguous() if trans_b else b)
        ref = pair_chain(a, b, torch.zeros(M, N), 32).bfloat16()
        assert torch.equal(out.view(torch.int16), ref.view(torch.int16))


def test_only_bf16_programs_include_the_bf16_header():
    from tilecraft.kernels.gemm import matmul
    with default_target("cpu"):
        bf = matmul(64, 64, 64, dtype="bfloat16").get_kernel_source()
        fp = matmul(64, 64, 64, dtype="float16").get_kernel_source()
    assert "tilecraft_cpu_gemm_bf16.h" in bf and "tc::gemm_bf16(" in bf
    assert "tilecraft_cpu_gemm_bf16.h" not in fp and "tc::gemm_bf16(" not in fp


@pytest.mark.skipif(not HAS_DP, reason="no AVX512_BF16 on this CPU")
def test_the_fast_path_is_compiled_in_here():
    """On this machine (AVX512_BF16) the library has the vdpbf16ps path: -march=native defines __AVX512BF16__."""
    from tilecraft.compiler.cxx import CFLAGS
    import subprocess
    from tilecraft import env
    out = subprocess.run([env.cxx(), *CFLAGS, "-dM", "-E", "-x", "c++", "/dev/null"], capture_output=True, text=True)
    assert "__AVX512BF16__" in out.stdout
