"""hoist_invariants (transform/hoist_invariants.py): indices inside unrolled loops are rewritten
(floor-division/modulo identities, invariant parts moved to Lets before the loop) without changing
any value.  Checked numerically: random integer expressions through `normalize`, and every index
under an unrolled loop of real kernels (the README GEMM, the FlashAttention reference, a
transposed copy) evaluated before and after at random variable values, negative ones included."""
from __future__ import annotations

import random

import pytest

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.ir import For, Let, collect
from tilecraft.ir import dtype as dt
from tilecraft.ir.expr import Binary, Const, Load, Ref, Unary, Var, binary, const
from tilecraft.ir.stmt import Store
from tilecraft.transform.cuda_pipeline import CUDA_PIPELINE
from tilecraft.transform.hoist_invariants import _Indices, hoist_invariants, normalize

SM90 = {"kind": "cuda", "arch": "sm_90a"}


def ev(e, env):
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Unary):
        assert e.op == "neg"
        return -ev(e.a, env)
    a, b = ev(e.a, env), ev(e.b, env)
    ops = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "//": int.__floordiv__, "%": int.__mod__}
    return ops[e.op](a, b)  # Python's floor division and modulo: the IR's // and %


class RandomEnv(dict):
    """Variable values drawn on first use (negative ones included)."""

    def __init__(self, rng):
        super().__init__()
        self.rng = rng

    def __missing__(self, v):
        self[v] = self.rng.randint(-5, 600)
        return self[v]


def random_expr(rng, vars_, depth):
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(vars_) if rng.random() < 0.6 else const(rng.randint(-40, 40), dt.int32)
    op = rng.choice(["+", "-", "*", "//", "%", "*", "//", "%"])
    a = random_expr(rng, vars_, depth - 1)
    if op in ("//", "%"):
        return binary(op, a, const(rng.choice([1, 2, 3, 4, 8, 16, 6, 12, 64, 136]), dt.int32))
    if op == "*":
        return binary(op, a, const(rng.choice([-3, 1, 2, 4, 8, 16, 128]), dt.int32))
    return binary(op, a, random_expr(rng, vars_, depth - 1))


def test_normalize_keeps_every_value():
    rng = random.Random(7)
    xs = [Var("x"), Var("y"), Var("z")]
    changed = 0
    for _ in range(3000):
        e = random_expr(rng, xs, 4)
        n = normalize(e)
        changed += n is not e
        for _ in range(12):
            env = {v: rng.randint(-300, 300) for v in xs}
            assert ev(n, env) == ev(e, env), (e, n, env)
    assert changed > 500  # the identities do apply


def test_normalize_identities():
    g, t = Var("g"), Var("t")
    assert normalize(binary("//", binary("*", g, 2), 2)) is g
    assert isinstance(normalize(binary("%", binary("*", g, 2), 2)), Const)
    # (e*128 + t) // 16 -> e*8 + t // 16: the loop variable leaves the division
    n = normalize(binary("//", binary("+", binary("*", g, 128), t), 16))
    assert not any(x is g for x in collect(n, lambda m: isinstance(m, Binary) and m.op == "//"))


def _indices_under_unrolled_loops(body):
    out = []
    for loop in collect(body, lambda n: isinstance(n, For) and n.kind == "unroll"):
        inner = {loop.var} | {n.var for n in collect(loop.body, lambda n: isinstance(n, (Let, For)))}
        for node in collect(loop.body, lambda n: isinstance(n, (Load, Store, Ref))):
            out.append((loop, inner, node))
    return out


def transposed_copy():
    @T.prim_func
    def main(A: T.Tensor((256, 192), "float16"), B: T.Tensor((192, 256), "float16")):
        with T.Kernel(2, 3, threads=128) as (bx, by):
            s = T.alloc_shared((64, 128), "float16")
            T.copy(A[by * 64, bx * 128], s)
            for i, j in T.Parallel(128, 64):
                B[bx * 128 + i, by * 64 + j] = s[j, i]
    return main


def _kernels():
    from tilecraft.kernels.attention import flash_attention
    from tilecraft.kernels.gemm import matmul
    yield "readme gemm", matmul.get_tir(4096, 4096, 4096), None
    yield "gemm 128x256", matmul.get_tir(1000, 1000, 1000, 128, 256, 64, 3, 256), None
    yield "gemm mma.sync (swizzled cp.async tiles)", matmul.get_tir(512, 512, 512, 128, 128, 64, 3, 128), \
        {"tl.disable_wgmma": True}
    yield "flash attention", flash_attention.get_tir(2, 4, 256, 128, is_causal=True, block_M=128, block_N=128,
                                                     num_stages=2, threads=256), None
    yield "transposed copy", transposed_copy(), None


def flat_offset(buf, idx, env):
    """The element a Load/Store/Ref reaches, as the printer computes it for an unswizzled buffer."""
    if len(idx) == 1:
        return ev(idx[0], env)
    return sum(ev(i, env) * s for i, s in zip(idx, buf.strides()))


@pytest.mark.parametrize("name,func,configs", list(_kernels()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_rewritten_index_keeps_its_value(name, func, configs):
    from tilecraft.compiler.build import effective_pass_configs
    from tilecraft.ir.lowering import SWIZZLE_SM80, SWIZZLE_SM90
    from tilecraft.target import Target
    target = Target.resolve(SM90)
    from tilecraft.transform.pipeline import PassContext
    ctx = PassContext(target, effective_pass_configs(configs, target))
    for p in CUDA_PIPELINE[:-1]:
        func = p(func, ctx)
    assert CUDA_PIPELINE[-1] is hoist_invariants
    swizzled = set(func.lowering.swizzled(SWIZZLE_SM80)) | set(func.lowering.swizzled(SWIZZLE_SM90))
    rng = random.Random(1)
    rewritten = 0
    for loop, bound, node in _indices_under_unrolled_loops(func.body):
        lets: list = []
        new = _Indices(bound, lets, {}, frozenset(swizzled)).indices(node.buffer, node.indices)
        if new is node.indices:
            continue
        rewritten += 1
        if node.buffer in swizzled or node.buffer.scope not in ("shared", "global"):
            # the printer swizzles (row, column) / registers fold: same dims, each index the same value
            assert len(new) == len(node.indices), (name, node.buffer.name)
        for _ in range(20):
            env = RandomEnv(rng)
            for let in lets:
                env[let.var] = ev(let.value, env)
            if len(new) == len(node.indices):
                assert [ev(i, env) for i in new] == [ev(i, env) for i in node.indices], (name, node.indices, new)
            else:
                assert flat_offset(node.buffer, new, env) == flat_offset(node.buffer, node.indices, env), \
                    (name, node.indices, new)
    assert rewritten, f"{name}: nothing under an unrolled loop was rewritten"


def test_readme_gemm_epilogue_addresses_are_hoisted():
    from tilecraft.kernels.gemm import matmul
    src = tilelang.compile(matmul.get_tir(4096, 4096, 4096), out_idx=[-1], target=SM90).get_kernel_source()
    loops = src.split("#pragma unroll")[1:]
    stores = [chunk.split("}")[0] for chunk in loops if "vec_store" in chunk.split("}")[0]]
    assert stores, src
    for body in stores:  # per-thread parts live in a const before the loop, not in its 64 copies
        assert "tc_tid" not in body, body


def test_index_split_by_hand():
    g, t, b = Var("g"), Var("t"), Var("b")
    idx = binary("+", binary("*", binary("+", binary("*", b, 128), binary("//", binary("+", binary("*", g, 64), t), 16)), 136),
                 binary("+", binary("%", t, 16), 3))
    lets: list = []
    new = _Indices({g}, lets, {}).index(idx)
    assert len(lets) == 1 and not any(x is g for x in collect(lets[0].value, lambda n: isinstance(n, Var)))
    assert not any(x is t or x is b for x in collect(new, lambda n: isinstance(n, Var)))  # only g and the Let remain
    rng = random.Random(3)
    for _ in range(200):
        env = RandomEnv(rng)
        env[lets[0].var] = ev(lets[0].value, env)
        assert ev(new, env) == ev(idx, env)
