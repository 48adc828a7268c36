"""Python operators on kernel values inside plain Python helpers and T.macro helpers, on every target
(see conftest.py) against torch.

A helper called from a kernel body runs as Python on IR values.  Every comparison (`==` and `!=`
too, TileLang's meaning: `T.if_then_else(s == 1, ...)`), the bitwise/boolean operators, abs(),
round(), divmod(), `**` and math.floor/ceil/trunc build kernel code on every kind of expression
(loads, constants, loop variables, block indices, lets, casts, calls, T.alloc_var scalars).
Operators whose Python answer would be made up at compile time (`if`, `and`/`or`/`not`, `in`,
min()/max(), int(), float(), math.exp(), chained comparisons, len(), iteration) are errors at the
helper's line.  The block-causal mask of TileLang's block_causal_attention example is checked in
the form that example writes it.
"""
from __future__ import annotations

import math

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import KernelValueError, TilecraftError

N = 128

_CMP = {
    "==": (lambda a, b: a == b, torch.eq), "!=": (lambda a, b: a != b, torch.ne),
    "<": (lambda a, b: a < b, torch.lt), "<=": (lambda a, b: a <= b, torch.le),
    ">": (lambda a, b: a > b, torch.gt), ">=": (lambda a, b: a >= b, torch.ge),
}
ROWS = 11


@tilelang.jit(out_idx=[-1])
def comparisons(op):
    cmp = _CMP[op][0]

    def flag(a, b):  # the helper: a comparison on whatever kernel values it is given
        return T.if_then_else(cmp(a, b), 1, 0)

    @T.prim_func
    def main(A: T.Tensor((2 * N,), "float32"), B: T.Tensor((2 * N,), "float32"),
             S: T.Tensor((2 * N,), "int32"), Y: T.Tensor((ROWS, 2 * N), "int32")):
        with T.Kernel(2, threads=N) as bx:
            v = T.alloc_var("int32")
            for i in T.Parallel(N):
                g = bx * N + i
                v = S[g]
                twice = S[g] * 2                      # a let
                Y[0, g] = flag(A[g], B[g])            # load vs load (float)
                Y[1, g] = flag(S[g], 1)               # load vs Python int
                Y[2, g] = flag(1, S[g])               # Python int vs load (reflected)
                Y[3, g] = flag(i, 37)                 # loop variable vs constant
                Y[4, g] = flag(bx, 1)                 # block index
                Y[5, g] = flag(T.cast(A[g], "int32"), S[g])   # cast vs load
                Y[6, g] = flag(T.abs(S[g] - 1), 1)    # call vs constant
                Y[7, g] = flag(twice, 2)              # let vs constant
                Y[8, g] = flag(v, 2)                  # T.alloc_var scalar vs constant
                Y[9, g] = flag(A[g], 0.5)             # float load vs Python float
                Y[10, g] = flag(T.int32(3), 3)        # constants fold
    return main


def _inputs(device):
    a = torch.randint(-2, 3, (2 * N,), device=device).float()
    b = torch.where(torch.rand(2 * N, device=device) < 0.5, a, torch.randint(-2, 3, (2 * N,), device=device).float())
    a[::7] = 0.5
    s = torch.randint(-1, 4, (2 * N,), device=device, dtype=torch.int32)
    return a, b, s


@pytest.mark.parametrize("op", sorted(_CMP))
def test_every_comparison_in_a_helper_builds_kernel_code(build, device, op):
    a, b, s = _inputs(device)
    k = build(comparisons, op)
    ref_op = _CMP[op][1]
    g = torch.arange(2 * N, device=device)
    i, bx = g % N, g // N
    full = lambda x: torch.full((2 * N,), x, device=device, dtype=torch.int32)  # noqa: E731
    want = torch.stack([
        ref_op(a, b), ref_op(s, full(1)), ref_op(full(1), s), ref_op(i, full(37)), ref_op(bx, full(1)),
        ref_op(a.int(), s), ref_op((s - 1).abs(), full(1)), ref_op(s * 2, full(2)), ref_op(s, full(2)),
        ref_op(a, torch.full((2 * N,), 0.5, device=device)), ref_op(full(3), full(3)),
    ]).int()
    got = k(a, b, s)
    assert torch.equal(got, want), [r for r in range(ROWS) if not torch.equal(got[r], want[r])]


@tilelang.jit(out_idx=[-1])
def boolean_ops():
    def both(a, b): return (a > 0) & (b > 0)
    def either(a, b): return (a > 0) | (b == 0)
    def neither(a, b): return ~((a > 0) | (b != 0))
    def one_of(a, b): return (a > 0) ^ (b > 0)
    def tl_style(a, b): return T.And(a == 1, T.Or(b == 0, T.Not(a != b)))
    def in_range(a): return (a >= 0) & (a < 2)

    @T.prim_func
    def main(S: T.Tensor((N,), "int32"), R: T.Tensor((N,), "int32"), Y: T.Tensor((6, N), "int32")):
        with T.Kernel(1, threads=N) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.if_then_else(both(S[i], R[i]), 1, 0)
                Y[1, i] = T.if_then_else(either(S[i], R[i]), 1, 0)
                Y[2, i] = T.if_then_else(neither(S[i], R[i]), 1, 0)
                Y[3, i] = T.if_then_else(one_of(S[i], R[i]), 1, 0)
                Y[4, i] = T.if_then_else(tl_style(S[i], R[i]), 1, 0)
                Y[5, i] = T.if_then_else(in_range(S[i]), 1, 0)
    return main


def test_boolean_operators_in_a_helper(build, device):
    s = torch.randint(-1, 3, (N,), device=device, dtype=torch.int32)
    r = torch.randint(-1, 3, (N,), device=device, dtype=torch.int32)
    want = torch.stack([(s > 0) & (r > 0), (s > 0) | (r == 0), ~((s > 0) | (r != 0)), (s > 0) ^ (r > 0),
                        (s == 1) & ((r == 0) | (s == r)), (s >= 0) & (s < 2)]).int()
    assert torch.equal(build(boolean_ops)(s, r), want)


@tilelang.jit(out_idx=[-1])
def builtins_on_kernel_values():
    def helper(x, n):
        q, r = divmod(n, 3)
        return abs(x), round(x), q, r, x ** 2, 2.0 ** x, math.floor(x), math.ceil(x), math.trunc(x), abs(n)

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), M: T.Tensor((N,), "int32"), Y: T.Tensor((10, N), "float32")):
        with T.Kernel(1, threads=N) as bx:
            for i in T.Parallel(N):
                a, r, q, m, sq, p2, fl, ce, tr, an = helper(X[i], M[i])
                Y[0, i] = a
                Y[1, i] = r
                Y[2, i] = q
                Y[3, i] = m
                Y[4, i] = sq
                Y[5, i] = p2
                Y[6, i] = fl
                Y[7, i] = ce
                Y[8, i] = tr
                Y[9, i] = an
    return main


def test_python_builtins_in_a_helper_build_kernel_code(build, device):
    x = torch.randn(N, device=device) * 3
    x[0], x[1], x[2] = 2.5, -2.5, 3.5   # round() is T.round: halves to even, as Python's round and torch.round
    m = torch.randint(-20, 20, (N,), device=device, dtype=torch.int32)
    got = build(builtins_on_kernel_values)(x, m)
    rounded = torch.round(x)
    want = torch.stack([x.abs(), rounded, torch.div(m, 3, rounding_mode="floor").float(), (m % 3).float(), x * x,
                        torch.exp2(x), x.floor(), x.ceil(), x.trunc(), m.abs().float()])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# ---- TileLang's block-causal mask (examples/block_causal_attention), as that example writes it ----

def _tile_allowed(i, j, dllm_block, is_noisy_diag, q_is_noisy):
    q_blk = i // dllm_block
    k_blk = j // dllm_block
    noisy_allowed = T.if_then_else(q_blk == k_blk, 1, 0)
    clean_boundary = T.if_then_else(q_is_noisy, T.if_then_else(q_blk > k_blk, 1, 0), T.if_then_else(q_blk >= k_blk, 1, 0))
    return T.if_then_else(is_noisy_diag == 1, noisy_allowed, clean_boundary)


@tilelang.jit(out_idx=[-1])
def block_causal_mask(B=32, dllm_block=8):
    @T.prim_func
    def main(S: T.Tensor((4, B, B), "float32"), Y: T.Tensor((4, B, B), "float32")):
        with T.Kernel(4, threads=128) as bx:
            is_noisy_diag = T.if_then_else(bx % 2 == 1, 1, 0)
            q_is_noisy = bx >= 2
            for i, j in T.Parallel(B, B):
                allowed = _tile_allowed(i, j, dllm_block, is_noisy_diag, q_is_noisy)
                Y[bx, i, j] = T.if_then_else(allowed > 0, S[bx, i, j], -T.infinity("float32"))
    return main


def test_block_causal_mask_helper_as_tilelang_writes_it(build, device):
    B, blk = 32, 8
    s = torch.randn(4, B, B, device=device)
    got = build(block_causal_mask, B, blk)(s)
    qb = (torch.arange(B, device=device) // blk)[:, None]
    kb = (torch.arange(B, device=device) // blk)[None, :]
    want = []
    for bx in range(4):
        noisy_diag, q_noisy = bx % 2 == 1, bx >= 2
        allowed = (qb == kb) if noisy_diag else ((qb > kb) if q_noisy else (qb >= kb))
        want.append(torch.where(allowed, s[bx], torch.tensor(float("-inf"), device=device)))
    assert torch.equal(got, torch.stack(want))


# ---- T.macro helpers: parsed like the kernel body, so `if`, `and`, `in` become kernel code -----

@T.macro
def pick(x, s):
    if s == 1 and x > 0:
        return x * 2.0
    return T.if_then_else(s in (2, 3), x + 1.0, x)


@tilelang.jit(out_idx=[-1])
def macro_helpers():
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), S: T.Tensor((N,), "int32"), Y: T.Tensor((2, N), "float32")):
        with T.Kernel(1, threads=N) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.if_then_else(S[i] == 1, X[i] * 2.0, X[i])
                Y[1, i] = T.if_then_else(S[i] not in (0, 3), X[i], -X[i])    # `in` in a kernel body
    return main


@T.macro
def scale_if_one(X, Y, i, s):
    if s == 1:
        Y[i] = X[i] * 2.0
    elif s != 0 and not (s > 2):
        Y[i] = X[i] + 1.0
    else:
        Y[i] = X[i]


@tilelang.jit(out_idx=[-1])
def macro_branches():
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), S: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            for i in T.Parallel(N):
                scale_if_one(X, Y, i, S[i])
    return main


def test_comparisons_in_macros_and_kernel_bodies(build, device):
    x = torch.randn(N, device=device)
    s = torch.randint(0, 4, (N,), device=device, dtype=torch.int32)
    got = build(macro_helpers)(x, s)
    assert torch.equal(got[0], torch.where(s == 1, x * 2, x))
    assert torch.equal(got[1], torch.where((s != 0) & (s != 3), x, -x))
    want = torch.where(s == 1, x * 2, torch.where((s != 0) & (s <= 2), x + 1, x))
    assert torch.equal(build(macro_branches)(x, s), want)


def test_round_folds_as_the_targets_round():
    assert T.round(2.5) == 2.0 == round(2.5) and T.round(-2.5) == -2.0 and T.round(3.5) == 4.0


# ---- operators with no kernel meaning: a clear error at the helper's line ----

def _h_if(x, s):
    if s == 1:
        return x
    return x


def _h_max(x, s): return max(x, s)
def _h_min(x, s): return min(x, 1.0)
def _h_and(x, s): return T.if_then_else(s > 0 and s < 2, x, x)
def _h_or(x, s): return T.if_then_else(s == 0 or s == 2, x, x)
def _h_not(x, s): return T.if_then_else(not s, x, x)
def _h_in(x, s): return T.if_then_else(s in (1, 2), x, x)
def _h_chain(x, s): return T.if_then_else(0 < s < 2, x, x)
def _h_bool(x, s): return T.if_then_else(bool(s), x, x)
def _h_int(x, s): return x * int(s)
def _h_float(x, s): return float(x)
def _h_math(x, s): return math.exp(x)
def _h_len(x, s): return len(x)
def _h_iter(x, s): return sum(x)
def _h_round(x, s): return round(x, 2)
def _h_range(x, s): return x * len(range(s))


_BAD = {
    _h_if: ("`if`", "T.if_then_else"), _h_max: ("min() / max()", "T.max"), _h_min: ("min() / max()", "T.min"),
    _h_and: ("`and`", "&"), _h_or: ("`or`", "|"), _h_not: ("`not`", "~"), _h_in: ("`in`", "=="),
    _h_chain: ("chained comparison", "(a < b) & (b < c)"), _h_bool: ("truth value", "T.if_then_else"),
    _h_int: ("int(x)", "T.cast"), _h_float: ("float(x)", "T.cast"), _h_math: ("math.*", "T.exp"),
    _h_len: ("len(x)", "scalar"), _h_iter: ("iteration", "scalar"), _h_round: ("round(x, ndigits)", "T.round"),
    _h_range: ("compile-time integer", "Python values"),
}


def _kernel_with(helper):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), S: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            for i in T.Parallel(N):
                Y[i] = helper(X[i], S[i])
    return main


@pytest.mark.parametrize("helper", list(_BAD), ids=lambda h: h.__name__)
def test_python_only_operators_on_kernel_values_are_errors_at_the_helpers_line(helper):
    what, instead = _BAD[helper]
    with pytest.raises(KernelValueError) as info:
        _kernel_with(helper)
    err = info.value
    assert isinstance(err, TilecraftError) and isinstance(err, TypeError)
    assert what in err.message, err.message
    assert instead in (err.hint or ""), err.hint
    assert err.span is not None and err.span.file == __file__
    assert err.span.line == helper.__code__.co_firstlineno + (1 if helper is _h_if else 0)


def test_python_only_operators_written_in_the_kernel_body_name_the_kernels_line():
    with pytest.raises(TilecraftError, match=r"int\(x\)") as info:
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=N) as bx:
                for i in T.Parallel(N):
                    Y[i] = X[i] * int(X[i])
    assert info.value.span.file == __file__ and "int(X[i])" in info.value.span.source_line


@tilelang.jit(out_idx=[-1])
def buffers_indexed_in_a_helper():
    """TileLang's buffers index in a plain Python helper too: an element (a load, with a kernel-value or
    a T.alloc_var index) and a slice (a region, here the source of a T.copy)."""
    def pick(buf, row, col):
        return buf[row, col]

    def bias(buf, j):
        return buf[T.min(j + 1, N - 1)] - buf[j]

    def first_rows(buf):
        return buf[0:2, :]

    @T.prim_func
    def main(X: T.Tensor((4, N), "float32"), B: T.Tensor((N,), "float32"), Y: T.Tensor((4, N), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((2, N), "float32")
            r = T.alloc_var("int32")
            r = 3
            T.copy(first_rows(X), S)
            for i in T.Parallel(N):
                Y[0, i] = pick(X, r, i) + bias(B, i)
                Y[1, i] = pick(S, 1, N - 1 - i)
                Y[2, i] = S[0, i] * 2.0
                Y[3, i] = pick(X, 2, i)
    return main


def test_buffers_index_in_a_helper(build, device):
    x = torch.randn(4, N, device=device)
    b = torch.randn(N, device=device)
    y = build(buffers_indexed_in_a_helper)(x, b)
    shifted = torch.cat([b[1:], b[-1:]])
    torch.testing.assert_close(y[0], x[3] + (shifted - b))
    torch.testing.assert_close(y[1], x[1].flip(0))
    torch.testing.assert_close(y[2], x[0] * 2)
    torch.testing.assert_close(y[3], x[2])


def test_a_helper_indexing_a_buffer_wrongly_is_an_error_at_its_line():
    def bad(buf, i):
        return buf[i, 0, 1]   # X has two dimensions

    with pytest.raises(TilecraftError, match=r"X has 2 dimension\(s\) but is indexed with 3") as e:
        @T.prim_func
        def main(X: T.Tensor((4, N), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=N) as bx:
                for i in T.Parallel(N):
                    Y[i] = bad(X, i)
    assert "return buf[i, 0, 1]" in str(e.value), str(e.value)   # the helper's line


@tilelang.jit(out_idx=[-1])
def comprehension_of_reads():
    """A comprehension over a compile-time range that reads buffers builds one kernel expression per item
    (as TileLang's parser does); a range over a kernel value stays an error (tests/language/test_validation.py)."""
    @T.prim_func
    def main(X: T.Tensor((4, N), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            for i in T.Parallel(N):
                rows = [X[r, i] * (r + 1) for r in range(4)]
                Y[i] = sum(rows) + max(2.0, 1.0)
    return main


def test_a_comprehension_of_buffer_reads(build, device):
    x = torch.randn(4, N, device=device)
    want = x[0] + 2 * x[1] + 3 * x[2] + 4 * x[3] + 2.0
    torch.testing.assert_close(build(comprehension_of_reads)(x), want)
