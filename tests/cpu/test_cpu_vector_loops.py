"""The CPU target's hand-vectorized loops (codegen/cpp_vector.py, tilecraft_cpu_vec.h) and the softmax
kernel they speed up.

- softmax against torch in float32 (tolerance) on every target, and the special values against
  expectations computed by hand: a row with a NaN or a +inf is NaN, a row of -inf is NaN (-inf - -inf),
  a -inf element is exactly +0, a row of signed zeros is exactly 1/N, subnormals and the largest half;
- bit for bit the scalar loops the vector loops replace: the same programs compiled with
  `CppPrinter.vector_loops` off, on inputs where every output element has one defined value (which of
  two different NaNs an addition or a multiplication returns is the compiled code's operand order, in
  the scalar code too, so rows mixing NaNs are compared up to that choice);
- every float16 value converted to float, float bit patterns of every class to float16, and the
  float32 max / min row reductions' signed zeros against the header's documented 8-lane order.
"""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.codegen.cpp import CppPrinter
from tilecraft.kernels import softmax

LOG2E = 1.4426950408889634


def _cpu(func, monkeypatch=None, vector=True):
    """`func` compiled for the CPU, with the vector loops or (vector=False) without; the cache is
    bypassed for the scalar build (its key is the program's, not the generated source's)."""
    if vector:
        return tilelang.compile(func, out_idx=[-1], target="cpu")
    with monkeypatch.context() as m:
        m.setattr(CppPrinter, "vector_loops", False)
        m.setenv("TILECRAFT_DISABLE_CACHE", "1")
        k = tilelang.compile(func, out_idx=[-1], target="cpu")
    assert "tc::vstore" not in k.get_kernel_source()
    return k


def _bits(t):
    return t.view({2: torch.int16, 4: torch.int32}[t.element_size()])


# ---- softmax against torch and against values computed by hand ------------------------------------

@pytest.mark.parametrize("M,N", [(64, 1024), (24, 1000), (37, 77), (12, 9)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_softmax_matches_torch(build, device, M, N, dtype):
    tdt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(M * N)
    x = (torch.randn(M, N, generator=g) * 4).to(tdt)
    y = build(softmax, M, N, dtype=dtype)(x.to(device)).cpu()
    ref = torch.softmax(x.float(), -1)
    tol = {"float16": (1e-3, 1e-2), "bfloat16": (8e-3, 2e-2), "float32": (1e-6, 1e-5)}[dtype]
    torch.testing.assert_close(y.float(), ref, atol=tol[0], rtol=tol[1])


def test_softmax_special_values(build, device):
    n, nan, inf = 64, float("nan"), float("inf")
    rows = torch.randn(12, n) * 3
    rows[0] = -inf                                    # all -inf: -inf - (-inf) is NaN
    rows[1, 5] = nan                                  # a NaN: the row sum is NaN
    rows[2, 7] = inf                                  # +inf: inf - inf is NaN
    rows[3, ::3] = -inf                               # some -inf: exactly +0 there
    rows[4] = 0.0
    rows[4, 1::2] = -0.0                              # signed zeros: exactly 1/64 each
    rows[5] = 0.0
    rows[5, 9] = 65504.0                              # the largest half: 1 there, 0 elsewhere
    rows[6] = torch.tensor([5.9604645e-08, -5.9604645e-08, 6.0975552e-05, -6.0975552e-05] * 16)  # subnormals
    rows[7] = -65504.0
    rows[7, 3] = 0.0
    x = rows.half()
    y = build(softmax, 12, n)(x.to(device)).cpu()
    assert torch.isnan(y[:3]).all()
    assert not torch.isnan(y[3:]).any()
    assert torch.equal(_bits(y[3, ::3]), torch.zeros(22, dtype=torch.int16))          # +0, not -0
    finite = x[3].float()[x[3].float() > -inf]
    torch.testing.assert_close(y[3][x[3].float() > -inf].float(), torch.softmax(finite, -1), atol=1e-3, rtol=1e-2)
    assert torch.equal(y[4], torch.full((n,), 1 / 64, dtype=torch.float16))
    assert y[5, 9].item() == 1.0 and torch.equal(_bits(torch.cat([y[5, :9], y[5, 10:]])), torch.zeros(63, dtype=torch.int16))
    torch.testing.assert_close(y[6].float(), torch.full((n,), 1 / 64), atol=1e-5, rtol=0)
    assert y[7, 3].item() == 1.0 and (y[7].float().sum().item() == 1.0)
    torch.testing.assert_close(y[8:].float(), torch.softmax(x[8:].float(), -1), atol=1e-3, rtol=1e-2)


# ---- the vector loops are the scalar loops, bit for bit ----------------------------------------------

def _softmax_inputs(M, N, tdt, g):
    """Random rows and rows with specials, each row with at most one kind of NaN (see the module doc)."""
    x = torch.randn(M, N, generator=g) * 30
    x[0] = float("-inf")
    x[1, ::5] = float("nan")
    x[2, 1] = float("inf")
    x[3] = 0.0
    x[3, ::2] = -0.0
    x[4, ::7] = float("-inf")
    x[5] = torch.randn(N, generator=g) * 1e-6          # subnormal halves
    x[6] = torch.randn(N, generator=g) * 3e4           # past the float16 range: +-inf in float16
    x[7, 2] = float("-nan")
    x = x.to(tdt)
    if tdt == torch.float32:   # random bit patterns, NaNs replaced by one canonical NaN
        bits = torch.randint(-2 ** 31, 2 ** 31 - 1, (M - 8, N), generator=g, dtype=torch.int64).to(torch.int32)
        r = bits.view(torch.float32)
        x[8:] = torch.where(torch.isnan(r), torch.full_like(r, float("nan")), r)
    else:
        bits = torch.randint(-2 ** 15, 2 ** 15 - 1, (M - 8, N), generator=g, dtype=torch.int32).to(torch.int16)
        r = bits.view(tdt)
        x[8:] = torch.where(torch.isnan(r.float()), torch.full_like(r, float("nan")), r)
    return x


@pytest.mark.parametrize("M,N,block_M", [(40, 1024, 4), (24, 1000, 3), (21, 77, 1), (16, 16, 2)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_softmax_vector_loops_are_the_scalar_loops(monkeypatch, M, N, block_M, dtype):
    func = softmax.fn(M, N, block_M=block_M, dtype=dtype)
    fast, slow = _cpu(func), _cpu(func, monkeypatch, vector=False)
    assert "tc::vexp2" in fast.get_kernel_source()
    tdt = getattr(torch, dtype)
    x = _softmax_inputs(M, N, tdt, torch.Generator().manual_seed(M + N))
    a, b = fast(x), slow(x)
    # a row that meets an input NaN and the default NaN of inf - inf (a +inf, or x * log2(e)
    # overflowing): which of the two e * (1 / sum) returns at a NaN e is the compiled code's choice
    xf = x.float()
    top = torch.where(torch.isnan(xf), float("-inf"), xf).amax(1, keepdim=True)
    t = xf * LOG2E - top * LOG2E
    mixed = torch.isnan(xf).any(1) & (torch.isnan(t) & ~torch.isnan(xf)).any(1)
    na, nb = torch.isnan(a.float()), torch.isnan(b.float())
    assert torch.equal(na, nb)
    assert torch.equal(_bits(a)[~mixed], _bits(b)[~mixed])
    assert torch.equal(_bits(a)[mixed][~na[mixed]], _bits(b)[mixed][~nb[mixed]])


@tilelang.jit(out_idx=[-1])
def _elementwise(N, src, dst):
    """dst(exp2(x * log2e - 1.5) / 3 + (-x)) through a fragment: a vector load with a conversion, an
    exp2, division, negation and a vector store with a conversion, each element on its own"""
    @T.prim_func
    def main(X: T.Tensor((N,), src), Y: T.Tensor((N,), dst)):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((N,), "float32")
            T.copy(X, f)
            for i in T.Parallel(N):
                f[i] = T.exp2(f[i] * LOG2E - 1.5) / 3.0 + (-f[i])
            T.copy(f, Y)
    return main


@pytest.mark.parametrize("src,dst", [("float16", "float16"), ("bfloat16", "bfloat16"), ("float32", "float16"),
                                     ("float16", "float32"), ("float32", "float32")])
def test_elementwise_vector_loops_are_the_scalar_loops(monkeypatch, src, dst):
    n = 1 << 16
    func = _elementwise.fn(n + 13, src, dst)   # a scalar tail of 13
    fast, slow = _cpu(func), _cpu(func, monkeypatch, vector=False)
    g = torch.Generator().manual_seed(5)
    if src == "float32":   # every class of float: NaN payloads, subnormals, infinities, signed zeros
        x = torch.randint(-2 ** 31, 2 ** 31 - 1, (n + 13,), generator=g, dtype=torch.int64).to(torch.int32).view(torch.float32)
        x[:4096] = torch.randn(4096, generator=g) * 40   # the exp2 range, both tails
    else:
        x = torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).to(torch.int16)
        x = torch.cat([x, x[:13]]).view(getattr(torch, src))   # every 16-bit pattern
    assert torch.equal(_bits(fast(x)), _bits(slow(x)))


# ---- the conversions against values computed by hand -------------------------------------------------

@tilelang.jit(out_idx=[-1])
def _convert(N, src, dst):
    @T.prim_func
    def main(X: T.Tensor((N,), src), Y: T.Tensor((N,), dst)):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((N,), dst)
            T.copy(X, f)
            T.copy(f, Y)
    return main


def test_every_float16_value_to_float():
    h = torch.arange(0, 1 << 16, dtype=torch.int32)
    k = _cpu(_convert.fn(1 << 16, "float16", "float32"))
    assert "tc::vload" in k.get_kernel_source()
    y = _bits(k(h.to(torch.int16).view(torch.float16))).to(torch.int64) & 0xffffffff
    sign, e, m = (h & 0x8000).to(torch.int64) << 16, (h >> 10) & 0x1f, (h & 0x3ff).to(torch.int64)
    sub = _bits(m.float() * 2.0 ** -24).to(torch.int64)                     # exact
    want = sign | torch.where(e == 0, sub, torch.where(e == 31, 0x7f800000 | (m << 13), ((e + 112) << 23) | (m << 13)))
    assert torch.equal(y, want)   # a signaling NaN keeps its payload (the bit code's; vcvtph2ps would quiet it)


def test_float_bit_patterns_to_float16():
    g = torch.Generator().manual_seed(9)
    rand = torch.randint(-2 ** 31, 2 ** 31 - 1, (1 << 20,), generator=g, dtype=torch.int64).to(torch.int32)
    # every exponent with the mantissas around the rounding boundaries of the float16 normals and subnormals
    e = torch.arange(0, 256, dtype=torch.int32).repeat_interleave(64)
    low = torch.tensor([0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fffff] * 7 + [0x400000] * 1, dtype=torch.int32)
    edges = (e << 23) | low.repeat(256)
    x = torch.cat([rand, edges, edges | (-2 ** 31)]).view(torch.float32)
    k = _cpu(_convert.fn(x.numel(), "float32", "float16"))
    assert "tc::vstore" in k.get_kernel_source()
    y = _bits(k(x))
    nan = torch.isnan(x)
    assert torch.equal(y[~nan], _bits(x[~nan].half()))                      # round to nearest even, as torch
    want_nan = ((_bits(x[nan]) >> 16) & 0x8000 | 0x7e00).to(torch.int16)   # the canonical NaN, sign kept
    assert torch.equal(y[nan], want_nan)


# ---- float32 max / min of a row: zero signs and NaNs in the documented lane order --------------------

@tilelang.jit(out_idx=[-1])
def _row_minmax(M, N, kind):
    op = T.reduce_max if kind == "max" else T.reduce_min

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            T.copy(X, x)
            op(x, r, dim=1, clear=True)
            T.copy(r, Y)
    return main


def _lane_order(row, kind):
    """tilecraft_cpu.h's reduce_row: element i into lane i % 8, the lanes ((0 1)(2 3))((4 5)(6 7)),
    then the identity first; fmax / fmin keep the second operand between equal zeros and drop a NaN."""
    def f(a, b):
        if a != a:
            return b
        if b != b:
            return a
        return a if (a > b if kind == "max" else a < b) else b
    ident = float("-inf") if kind == "max" else float("inf")
    lane = [ident] * 8
    for i, v in enumerate(row):
        lane[i % 8] = f(lane[i % 8], v)
    lo, hi = f(f(lane[0], lane[1]), f(lane[2], lane[3])), f(f(lane[4], lane[5]), f(lane[6], lane[7]))
    return f(ident, f(lo, hi))


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("n", [7, 40, 77, 1024])
def test_row_max_min_follow_the_lane_order(kind, n):
    g = torch.Generator().manual_seed(n)
    m = 48
    pick = torch.randint(0, 6, (m, n), generator=g)
    vals = torch.tensor([0.0, -0.0, float("nan"), float("-inf"), float("inf"), -1.0])
    x = vals[pick]
    x[:16] = torch.where(torch.rand(16, n, generator=g) < 0.5, 0.0, -0.0)              # zeros alone
    x[16:24] = torch.where(torch.rand(8, n, generator=g) < 0.2, float("nan"), x[16:24] * 0)  # zeros and NaNs
    x[24:28] = float("nan")
    x[28:32] = torch.randn(4, n, generator=g)
    y = _cpu(_row_minmax.fn(m, n, kind))(x)
    want = torch.tensor([_lane_order(r.tolist(), kind) for r in x])
    assert torch.equal(_bits(y), _bits(want))


@tilelang.jit(out_idx=[-1])
def _row_sums(M, N, clear):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            T.copy(X, x)
            for i in T.Parallel(M):
                r[i] = T.cast(i, "float32") * 0.25 - 1.0   # what clear=False folds into
            T.reduce_sum(x, r, dim=1, clear=clear)
            T.copy(r, Y)
    return main


def _add(a, b):
    """a + b in float32, and where NaNs meet the one tilecraft_cpu_vec.h documents: a's if a is NaN,
    else b's (quieted)"""
    if torch.isnan(a):
        return a
    if torch.isnan(b):
        return (_bits(b.reshape(1)) | 0x400000).view(torch.float32)[0]
    return a + b


def _lane_sum(row, init):
    """reduce_row's sum in float32: element i into lane i % 8, ((0 1)(2 3))((4 5)(6 7)), init + that;
    a lane keeps its first NaN, and the lanes' NaNs are taken in the order 3, 2, 0, 1, 6, 7, 5, 4"""
    lane = [torch.tensor(0.0)] * 8
    for i, v in enumerate(row):
        lane[i % 8] = _add(lane[i % 8], v)
    lo = _add(_add(lane[3], lane[2]), _add(lane[0], lane[1]))
    hi = _add(_add(lane[6], lane[7]), _add(lane[5], lane[4]))
    return _add(_add(lo, hi), torch.tensor(init, dtype=torch.float32))


@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("M,N", [(9, 1024), (5, 37), (4, 7), (3, 64)])
def test_interleaved_row_sums_are_reduce_row(monkeypatch, clear, M, N):
    """tc::reduce_rows (four rows' chains at once, then the rows left one by one) is reduce_row's sum,
    and both are the documented lane order"""
    func = _row_sums.fn(M, N, clear)
    fast, slow = _cpu(func), _cpu(func, monkeypatch, vector=False)
    assert "tc::reduce_rows" in fast.get_kernel_source()
    g = torch.Generator().manual_seed(M * N)
    x = torch.randn(M, N, generator=g) * torch.exp2(torch.randint(-20, 20, (M, N), generator=g).float())
    x[0, 3] = float("inf")
    x[1] = 0.0
    x[1, ::2] = -0.0   # -0 + +0: +0 (and the identity is +0)
    y = fast(x)
    assert torch.equal(_bits(y), _bits(slow(x)))
    # NaNs of different signs and payloads (signaling ones too) in several lanes of a row
    nans = torch.tensor([0x7fc00001, -0x3ffffe, 0x7f800123, -0x7ffffb, 0x7fe00000], dtype=torch.int32).view(torch.float32)
    picks = torch.randint(0, N, (2, 5), generator=g)
    x[2, picks[0]] = nans
    x[min(3, M - 1), picks[1]] = nans.flip(0)
    y = fast(x)
    assert torch.isnan(y[2]) and torch.isnan(y[min(3, M - 1)])
    init = [0.0 if clear else float(torch.tensor(i * 0.25 - 1.0, dtype=torch.float32)) for i in range(M)]
    want = torch.stack([_lane_sum(x[i], init[i]) for i in range(M)])
    assert torch.equal(_bits(y), _bits(want))
