"""The front end: how a `@T.prim_func` body's Python source becomes IR (SPEC §1, §2).

These tests parse only (no compilation) and inspect the IR, so they are fast; the CPU tests run
the same constructs end to end.
"""
from __future__ import annotations

import inspect

import pytest

import tilecraft
import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.ir import (Alloc, Annotate, Binary, Copy, For, Gemm, If, Kernel, Let, Load, PrimFunc,
                          Select, Store, collect)
from tilecraft.ir import dtype as dt


def nodes(func, cls):
    return collect(func.body, lambda n: isinstance(n, cls))


# ---- parameters and the signature -------------------------------------------------------------

def test_tensor_params_buffer_alias_and_dtype_spellings():
    M, N = 12, 20

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Buffer((N,), T.bfloat16), C: T.Tensor([M], "float"),
             D: T.Tensor((4, 4), T.int32)):
        with T.Kernel(1) as bx:
            pass

    assert isinstance(main, PrimFunc)
    assert [(p.name, tuple(p.shape), p.dtype) for p in main.params] == [
        ("A", (12, 20), dt.float16), ("B", (20,), dt.bfloat16), ("C", (12,), dt.float32), ("D", (4, 4), dt.int32)]
    assert all(p.scope == "global" for p in main.params)


def test_dynamic_symbols_are_recorded_in_first_appearance_order():
    m, n = T.dynamic("m"), T.symbolic("n")

    @T.prim_func
    def main(A: T.Tensor((m, n), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(m, 16)) as bx:
            pass

    assert [s.name for s in main.symbols] == ["m", "n"]
    assert main.params[1].shape[0] is n


def test_prim_func_with_parentheses():
    @T.prim_func()
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            A[0] = 1.0
    assert isinstance(main, PrimFunc) and main.name == "main"


# ---- T.Kernel ------------------------------------------------------------------------------------

@pytest.mark.parametrize("threads,expect", [(128, (128, 1, 1)), ([32, 4], (32, 4, 1)), ((8, 4, 2), (8, 4, 2))])
def test_kernel_grid_bindings_and_threads(threads, expect):
    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(T.ceildiv(100, 32), 3, 2, threads=threads) as (bx, by, bz):
            A[0] = T.cast(bx + by + bz, "float32")

    (k,) = nodes(main, Kernel)
    assert [g.value for g in k.grid] == [4, 3, 2]
    assert [v.name for v in k.block_vars] == ["bx", "by", "bz"]
    assert tuple(k.threads) == expect


def test_kernel_single_name_binding():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(4) as bx:
            A[bx] = 1.0

    (k,) = nodes(main, Kernel)
    (st,) = nodes(main, Store)
    assert st.indices[0] is k.block_vars[0]


# ---- Python values vs kernel values -----------------------------------------------------------------

def test_enclosing_python_values_fold_at_parse_time():
    block, scale = 32, 0.5

    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(T.ceildiv(64, block)) as bx:
            for i in T.Parallel(block * 2 // 2):
                A[bx * block + i] = A[bx * block + i] * (scale * 4)

    (k,) = nodes(main, Kernel)
    assert k.grid[0].value == 2
    (loop,) = nodes(main, For)
    assert loop.extent.value == 32 and loop.kind == "parallel"
    assert "* 2.0" in main.script()


def test_python_if_picks_branch_kernel_if_becomes_code():
    use_fast = False

    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(8) as bx:
            if use_fast:
                A[bx] = 1.0
            else:
                A[bx] = 2.0
            if bx < 4:
                A[bx] = A[bx] + 3.0

    (branch,) = nodes(main, If)
    assert isinstance(branch.cond, Binary) and branch.cond.op == "<"
    values = [s.value for s in nodes(main, Store)]
    assert values[0].value == 2.0  # the Python branch chosen at parse time


def test_conditional_expression_on_python_and_kernel_values():
    causal = True

    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(8) as bx:
            A[bx] = 1.0 if causal else 2.0
            A[bx] = 3.0 if bx > 2 else 4.0

    first, second = nodes(main, Store)
    assert first.value.value == 1.0
    assert isinstance(second.value, Select)


def test_python_iterable_loop_is_unrolled_at_parse_time():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for k in [1, 3, 5]:
                A[k] = 0.0

    assert not nodes(main, For)
    assert [s.indices[0].value for s in nodes(main, Store)] == [1, 3, 5]


def test_comprehension_and_tuple_unpacking_of_python_values():
    dims = (4, 6)

    @T.prim_func
    def main(A: T.Tensor((4, 6), "float32")):
        with T.Kernel(1) as bx:
            m, n = dims
            sq = [d * d for d in dims]
            for i, j in T.Parallel(m, n):
                A[i, j] = T.cast(sq[0] + sq[1], "float32")

    (st,) = nodes(main, Store)
    assert st.value.value == 52.0


# ---- lets, stores, augmented assignment ---------------------------------------------------------------

def test_let_binding_and_rebinding_get_fresh_names():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(8) as bx:
            x = A[bx] * 2.0
            x = x + 1.0
            A[bx] = x

    lets = nodes(main, Let)
    assert [l.var.name for l in lets] == ["x", "x_1"]
    (st,) = nodes(main, Store)
    assert st.value is lets[1].var


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_augmented_assignment_on_elements(op):
    @T.prim_func
    def add(A: T.Tensor((8,), "float32")):
        with T.Kernel(8) as bx:
            A[bx] += 2.0

    @T.prim_func
    def sub(A: T.Tensor((8,), "float32")):
        with T.Kernel(8) as bx:
            A[bx] -= 2.0

    @T.prim_func
    def mul(A: T.Tensor((8,), "float32")):
        with T.Kernel(8) as bx:
            A[bx] *= 2.0

    @T.prim_func
    def div(A: T.Tensor((8,), "float32")):
        with T.Kernel(8) as bx:
            A[bx] /= 2.0

    func = {"+": add, "-": sub, "*": mul, "/": div}[op]
    (st,) = nodes(func, Store)
    assert isinstance(st.value, Binary) and st.value.op == op
    assert isinstance(st.value.a, Load) and st.value.a.buffer is st.buffer
    assert st.value.b.value == 2.0


def test_annotated_assignment_casts():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "int32")):
        with T.Kernel(8) as bx:
            v: T.int32 = A[bx] * 3.0
            B[bx] = v

    (let,) = nodes(main, Let)
    assert let.var.dtype is dt.int32


def test_store_casts_to_buffer_dtype():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), H: T.Tensor((8,), "float16")):
        with T.Kernel(8) as bx:
            H[bx] = A[bx] + 1.0

    (st,) = nodes(main, Store)
    assert st.value.dtype is dt.float16


# ---- regions and tile ops --------------------------------------------------------------------------------

def test_slices_with_static_extent_become_regions():
    bm = 16

    @T.prim_func
    def main(Q: T.Tensor((2, 64, 4, 32), "float16")):
        with T.Kernel(4, 4, 2) as (bx, h, b):
            S = T.alloc_shared((bm, 32), "float16")
            T.copy(Q[b, bx * bm:(bx + 1) * bm, h, :], S)

    (cp,) = nodes(main, Copy)
    assert cp.src.buffer.name == "Q" and tuple(cp.src.extents) == (1, 16, 1, 32)
    assert cp.dst.covers_whole()


def test_slice_bounds_through_nested_lets_have_a_static_extent():
    # TileLang's persistent MLA decode: both bounds go through `sid = tile_id % n` and
    # `tile_id = 8 * w + bid`; the non-linear `%` must be the same atom in both
    @T.prim_func
    def main(KV: T.Tensor((4, 1024, 64), "float16")):
        with T.Kernel(8, threads=128) as block_id:
            s = T.alloc_shared((64, 64), "float16")
            for w in T.serial(2):
                tile_id = 8 * w + block_id
                sid = tile_id % 4
                for k in T.serial(4):
                    kv_start = (1024 // 4) * sid + k * 64
                    kv_end = (1024 // 4) * sid + (k + 1) * 64
                    T.copy(KV[0, kv_start:kv_end, :], s)

    (cp,) = nodes(main, Copy)
    assert tuple(cp.src.extents) == (1, 64, 64)


def test_slice_bounds_written_out_twice_have_a_static_extent():
    # `(it % 4) * 2` evaluated once for each bound: two equal trees, one atom for the extent
    def tile_of(it):   # a plain helper, inlined at each call
        return T.min(it // 4, 3)

    @T.prim_func
    def main(S: T.Tensor((8, 512), "float32")):
        with T.Kernel(2, threads=128) as b:
            s = T.alloc_shared((2, 128), "float32")
            for it in T.serial(16):
                T.copy(S[(it % 4) * 2:(it % 4) * 2 + 2, tile_of(it) * 128:tile_of(it) * 128 + 128], s)

    (cp,) = nodes(main, Copy)
    assert tuple(cp.src.extents) == (2, 128)


def test_point_copy_expands_to_the_tile_shape():
    @T.prim_func
    def main(A: T.Tensor((100, 80), "float16")):
        with T.Kernel(2, 4) as (bx, by):
            S = T.alloc_shared((32, 48), "float16")
            T.copy(A[by * 32, bx * 48], S)

    (cp,) = nodes(main, Copy)
    assert tuple(cp.src.extents) == (32, 48)


def test_gemm_flags_and_policy_recorded():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((16, 8), "float16")
            b = T.alloc_shared((32, 16), "float16")
            c = T.alloc_fragment((8, 32), "float32")
            T.gemm(a, b, c, transpose_A=True, transpose_B=True, policy=T.GemmWarpPolicy.FullRow, clear_accum=True)

    (g,) = nodes(main, Gemm)
    assert (g.trans_a, g.trans_b, g.policy, g.clear_accum) == (True, True, "FullRow", True)
    assert g.mnk == (8, 32, 16)


def test_allocations_scopes_and_pipelined_annotation():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((16,), "float16")
            f = T.alloc_fragment((16,), "float")
            l = T.alloc_local((4,), "int32")  # noqa: E741
            v = T.alloc_var("float32", init=1.5)
            T.use_swizzle(panel_size=8)
            for ko in T.Pipelined(4, num_stages=3):
                A[ko] = v

    allocs = nodes(main, Alloc)
    assert [(a.buffer.name, a.buffer.scope) for a in allocs] == [
        ("s", "shared"), ("f", "fragment"), ("l", "local"), ("v", "var")]
    assert allocs[3].init.value == 1.5
    (loop,) = nodes(main, For)
    assert loop.kind == "pipelined" and loop.annotation("num_stages") == 3
    (ann,) = nodes(main, Annotate)
    assert ann.key == "use_swizzle"


def test_swizzle_disabled_emits_nothing():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            T.use_swizzle(panel_size=8, enable=False)

    assert not nodes(main, Annotate)


# ---- macros, helpers, spans ------------------------------------------------------------------------------

@T.macro
def add_one(buf, n):
    for i in T.Parallel(n):
        buf[i] = buf[i] + 1.0


@T.macro
def doubled(x):
    return x * 2.0


def test_macro_inlines_statements_and_returns_values():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((8,), "float32")
            T.copy(A, f)
            add_one(f, 8)
            f[0] = doubled(f[1])
            T.copy(f, A)

    loops = nodes(main, For)
    assert len(loops) == 1 and loops[0].kind == "parallel"
    stores = nodes(main, Store)
    assert isinstance(stores[-1].value, Binary) and stores[-1].value.op == "*"


def test_every_statement_carries_the_users_file_and_line():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(8) as bx:
            A[bx] = 1.0

    lines, start = inspect.getsourcelines(test_every_statement_carries_the_users_file_and_line)
    store_line = start + next(i for i, l in enumerate(lines) if "A[bx] = 1.0" in l)
    (st,) = nodes(main, Store)
    assert st.span.file == __file__ and st.span.line == store_line
    assert st.span.source_line.strip() == "A[bx] = 1.0"


def test_docstring_and_pass_are_ignored():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        """A docstring."""
        with T.Kernel(1) as bx:
            pass

    (k,) = nodes(main, Kernel)
    assert not nodes(main, Store)


def test_compile_time_assert():
    n = 5

    def factory():
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            assert n % 2 == 0, "n must be even"
            with T.Kernel(1) as bx:
                pass
        return main

    with pytest.raises(tilecraft.TilecraftError, match="n must be even"):
        factory()


def test_jit_get_tir_parses_without_compiling():
    @tilelang.jit(out_idx=[-1])
    def f(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(N):
                    B[i] = A[i]
        return main

    func = f.get_tir(16)
    assert isinstance(func, PrimFunc) and func.params[0].shape == (16,)
