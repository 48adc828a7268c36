"""The tile IR: printer output, expression constructors (folding, identities, dtype promotion),
identity semantics of nodes, the Mutator's no-change contract, and the integer analyses."""
from __future__ import annotations

import math

import pytest

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.ir import (Binary, Cast, Const, Load, Mutator, Store, Var, Visitor, binary, call, cast,
                          collect, const, select, substitute, to_text, unary)
from tilecraft.ir import dtype as dt
from tilecraft.ir.analysis import INF, bounds, divisible, linear, static_difference


def gemm_softmax_func(M=64, N=48, K=32, bm=32, bn=16, bk=16):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=False)
            T.reduce_max(C_f, mx, dim=1)
            for i, j in T.Parallel(bm, bn):
                C_f[i, j] = T.exp(C_f[i, j] - mx[i])
            T.copy(C_f, C[by * bm, bx * bn])
    return main


# ---- printer ------------------------------------------------------------------------------------

def test_printer_shows_kernel_loops_and_tile_ops():
    text = gemm_softmax_func().script()
    for needle in ["@T.prim_func", "def main(A: T.Tensor((64, 32), \"float16\")",
                   "with T.Kernel(3, 2, threads=[128, 1, 1]) as (bx, by):",
                   "A_s = T.alloc_shared((32, 16), \"float16\")",
                   "for ko in T.Pipelined(2, num_stages=2):",
                   "T.copy(A[by * 32:by * 32 + 32, ko * 16:ko * 16 + 16], A_s)",
                   "T.gemm(A_s, B_s, C_f)", "T.reduce_max(C_f, mx, dim=1, clear=True)",
                   "for i in T.Parallel(32):", "C_f[i, j] = T.exp(C_f[i, j] - mx[i])",
                   "T.fill(C_f, 0.0)"]:
        assert needle in text, f"{needle!r} not in\n{text}"


def test_kernel_get_ir_matches_script_and_lowered_ir_has_no_tile_ops():
    k = tilelang.compile(gemm_softmax_func(), out_idx=-1, target="cpu")
    assert k.get_ir() == gemm_softmax_func().script()
    low = k.get_lowered_ir()
    assert "T.gemm" not in low and "T.copy" not in low and "T.reduce_max" not in low
    assert "for " in low


def test_printer_parenthesises_by_precedence():
    x, y = Var("x"), Var("y")
    assert to_text((x + y) * 3) == "(x + y) * 3"
    assert to_text(x - (y - 1)) == "x - (y - 1)"
    assert to_text(x * y + 1) == "x * y + 1"


# ---- constructors: folding and identities ------------------------------------------------------------

def test_constant_folding_int_and_float():
    e = binary("+", const(2), const(3))
    assert isinstance(e, Const) and e.value == 5 and e.dtype is dt.int32
    f = binary("*", const(1.5), const(4.0))
    assert isinstance(f, Const) and f.value == 6.0 and f.dtype is dt.float32
    assert binary("//", const(-7), const(2)).value == -4   # Python floor semantics
    assert binary("%", const(-7), const(2)).value == 1
    assert binary("<", const(1), const(2)).value is True
    assert unary("neg", const(3)).value == -3


def test_float_modulo_folds_like_the_runtime():
    assert binary("%", const(-1.0), const(0.75)).value == pytest.approx(-1.0 % 0.75)


def test_division_by_zero_is_not_folded():
    e = binary("//", const(1), const(0))
    assert isinstance(e, Binary)


def test_identities_are_dropped():
    x = Var("x")
    assert binary("+", x, 0) is x and binary("+", 0, x) is x
    assert binary("*", x, 1) is x and binary("*", 1, x) is x
    assert binary("-", x, 0) is x and binary("//", x, 1) is x
    assert isinstance(binary("*", x, 0), Const)


def test_select_with_constant_condition_folds():
    x, y = Var("x", dt.float32), Var("y", dt.float32)
    assert select(True, x, y) is x and select(False, x, y) is y


def test_cast_of_constant_folds_and_same_dtype_cast_is_identity():
    c = cast(3, dt.float16)
    assert isinstance(c, Const) and c.dtype is dt.float16 and c.value == 3.0
    x = Var("x", dt.float16)
    assert cast(x, "float16") is x
    assert isinstance(cast(x, "float32"), Cast)


# ---- promotion -------------------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,out", [
    ("float16", "float32", "float32"), ("float32", "float16", "float32"),
    ("bfloat16", "float16", "float32"), ("int32", "int64", "int64"),
    ("int32", "float16", "float16"), ("int8", "int32", "int32"), ("bool", "int32", "int32"),
])
def test_binary_promotion_of_typed_operands(a, b, out):
    e = binary("+", Var("a", dt.dtype(a)), Var("b", dt.dtype(b)))
    assert e.dtype is dt.dtype(out)
    assert e.a.dtype is e.b.dtype is e.dtype  # operands are cast to the result type


def test_python_float_takes_the_float_operands_dtype():
    h = Var("h", dt.float16)
    assert binary("*", h, 0.5).dtype is dt.float16
    assert binary("*", 0.5, Var("b", dt.bfloat16)).dtype is dt.bfloat16


def test_python_float_with_int_becomes_float32():
    i = Var("i", dt.int32)
    e = binary("+", i, 0.5)
    assert e.dtype is dt.float32


def test_python_int_keeps_operand_dtype_and_compare_gives_bool():
    assert binary("+", Var("h", dt.float16), 1).dtype is dt.float16
    assert binary("+", Var("n", dt.int64), 1).dtype is dt.int64
    assert binary("<", Var("h", dt.float16), Var("f", dt.float32)).dtype is dt.bool_


def test_math_call_on_int_computes_in_float32():
    assert call("exp", Var("i", dt.int32)).dtype is dt.float32
    assert call("exp", Var("h", dt.float16)).dtype is dt.float16
    assert call("abs", Var("i", dt.int32)).dtype is dt.int32


def test_dtype_spellings_and_torch_dtypes():
    import torch
    assert dt.dtype("float") is dt.float32 and dt.dtype("half") is dt.float16
    assert dt.dtype(torch.bfloat16) is dt.bfloat16 and dt.dtype(T.float16) is dt.float16
    assert dt.to_torch(dt.bfloat16) is torch.bfloat16
    with pytest.raises(ValueError, match="flaot"):
        dt.dtype("flaot")


# ---- identity semantics -----------------------------------------------------------------------------

def test_nodes_hash_by_identity_and_compare_with_same():
    from tilecraft.ir import Binary, contains, index_of, same, same_seq
    a, b = const(1), const(1)
    assert same(a, a) and not same(a, b) and not same(a, 1) and same(3, 3)
    assert len({a, b}) == 2
    x1, x2 = Var("x"), Var("x")
    assert not same(x1, x2) and {x1: 1}.get(x2) is None
    assert same_seq((x1, 4), (x1, 4)) and not same_seq((x1, 4), (x2, 4)) and not same_seq((x1,), (x1, 4))
    assert index_of([x2, 4, x1], x1) == 2 and contains([x2, x1], x1) and not contains([x2, 1], x1)
    # `==` / `!=` on expressions build comparisons in the kernel (TileLang's meaning)
    for op in ("==", "!="):
        e = (x1 == x2) if op == "==" else (x1 != x2)
        assert isinstance(e, Binary) and e.op == op and e.a is x1 and e.b is x2
    assert (a == 1).value is True and (a != b).value is False   # constants fold
    assert (x1 == None) is False and (x1 != "x") is True  # noqa: E711 - not a number: Python's answer


# ---- functors -----------------------------------------------------------------------------------------

def test_mutator_returns_same_object_when_nothing_changes():
    func = gemm_softmax_func()
    body = func.body
    assert Mutator().visit(body) is body
    assert func.with_body(Mutator().visit(body)) is func


def test_mutator_rebuilds_only_the_changed_path():
    x, y = Var("x"), Var("y")
    left = binary("*", x, 3)
    right = binary("*", y, 5)
    e = binary("+", left, right)

    class RenameX(Mutator):
        def visit_Var(self, v):
            return Var("z") if v is x else v

    out = RenameX().visit(e)
    assert out is not e and out.b is right and out.a is not left
    assert to_text(out) == "z * 3 + y * 5"


def test_substitute_and_collect():
    func = gemm_softmax_func()
    loads = collect(func.body, lambda n: isinstance(n, Load))
    assert {ld.buffer.name for ld in loads} >= {"C_f", "mx"}
    x = Var("x")
    e = binary("+", binary("*", x, 4), 1)
    assert to_text(substitute(e, {x: const(2)})) == "2 * 4 + 1"
    assert to_text(e) == "x * 4 + 1"  # the original is untouched


def _collect_by_visitor(node, predicate) -> list:
    """`collect` as a Visitor subclass (as it was first written): the reference it must equal."""
    found = []

    class C(Visitor):
        def generic(self, n):
            if predicate(n):
                found.append(n)
            return Visitor.generic(self, n)

        def visit_Buffer(self, n):
            if predicate(n):
                found.append(n)

    C().visit(node)
    return found


def test_collect_finds_what_a_visitor_finds_in_the_same_order(tmp_path):
    """The same nodes, by identity and in pre-order, on fuzzed programs as parsed and as lowered for
    the CPU and sm_90a, for predicates that take everything, one node type, buffers, or a few."""
    from tilecraft.compiler.build import effective_pass_configs
    from tilecraft.ir import Buffer
    from tilecraft.target import Target
    from tilecraft.testing.fuzz import Program
    from tilecraft.transform.pipeline import run_pipeline
    funcs = [p.func for p in (Program(1001, i, str(tmp_path)) for i in range(24)) if p.func is not None]
    assert len(funcs) >= 20
    trees = [f.body for f in funcs]
    for target in (Target.resolve("cpu"), Target.resolve({"kind": "cuda", "arch": "sm_90a"})):
        trees += [run_pipeline(f, target, effective_pass_configs({}, target)).body for f in funcs[:12]]
    trees.append({"a": [funcs[0].body, (funcs[1].body, 3)], "b": funcs[2].body})   # containers are walked
    predicates = [lambda n: True, lambda n: isinstance(n, Load), lambda n: isinstance(n, Buffer),
                  lambda n: isinstance(n, (Store, Var))]
    for tree in trees:
        for pred in predicates:
            want, got = _collect_by_visitor(tree, pred), collect(tree, pred)
            assert len(got) == len(want) and all(a is b for a, b in zip(got, want))
        asked = [[], []]   # the predicate sees the same nodes in the same order (every 7th is taken)
        want = _collect_by_visitor(tree, lambda n: asked[0].append(n) or len(asked[0]) % 7 == 0)
        got = collect(tree, lambda n: asked[1].append(n) or len(asked[1]) % 7 == 0)
        assert len(asked[1]) == len(asked[0]) and all(a is b for a, b in zip(*asked))
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want))
    assert any(collect(t, predicates[2]) for t in trees) and any(collect(t, predicates[1]) for t in trees)


def test_functors_pass_over_only_subtrees_without_their_classes(tmp_path):
    """A Visitor or Mutator returns a subtree unwalked once every node class in it is known to
    have no method of its own there (ir/functor.py's class masks): on fuzzed programs lowered for
    sm_90a, a functor with a method for one class must still reach every node of that class,
    after other functors of the same class (and its own earlier walks) learned what they skip."""
    from tilecraft.compiler.build import effective_pass_configs
    from tilecraft.ir import Buffer, Mutator as M
    from tilecraft.target import Target
    from tilecraft.testing.fuzz import Program
    from tilecraft.transform.pipeline import run_pipeline
    target = Target.resolve({"kind": "cuda", "arch": "sm_90a"})
    funcs = [p.func for p in (Program(1002, i, str(tmp_path)) for i in range(10)) if p.func is not None]
    trees = [f.body for f in funcs] + [run_pipeline(f, target, effective_pass_configs({}, target)).body
                                       for f in funcs]
    classes = {type(n) for t in trees for n in collect(t, lambda n: True)} - {Buffer}
    assert len(classes) > 15
    for cls in sorted(classes, key=lambda c: c.__name__):
        seen = []
        counter = type("Count", (Visitor,), {f"visit_{cls.__name__}": lambda self, n: seen.append(n)
                                             or Visitor.generic(self, n)})
        marker = type("Mark", (M,), {f"visit_{cls.__name__}": lambda self, n: M.generic(self, n)})
        for _ in range(2):
            for t in trees:
                seen.clear()
                counter().visit(t)
                want = collect(t, lambda n: isinstance(n, cls))
                assert len(seen) == len(want) and all(a is b for a, b in zip(seen, want)), cls.__name__
                assert marker().visit(t) is t
    b = next(n for t in trees for n in collect(t, lambda n: isinstance(n, Buffer)))
    b2 = Buffer(b.name + "_2", b.shape, b.dtype, b.scope)
    M().visit(trees[0])                                   # the base Mutator has met Buffers
    for t in trees:
        has = bool(collect(t, lambda n: n is b))
        new = M(buffer_map={b: b2}).visit(t)
        assert (new is not t) == has and not collect(new, lambda n: n is b)
        assert bool(collect(new, lambda n: n is b2)) == has


def test_collect_never_answers_from_a_stale_pre_order():
    """`collect` keeps each node's pre-order on the node: a shallow copy, a pickled node and a
    node holding a list that is changed afterwards must still be walked as they are now."""
    import copy
    import pickle
    from tilecraft.ir.stmt import Evaluate, Seq
    x, y = Var("x"), Var("y")
    e = binary("+", binary("*", x, 4), 1)
    vars_of = (lambda t: [n.name for n in collect(t, lambda n: isinstance(n, Var))])
    assert vars_of(e) == ["x"] and vars_of(e) == ["x"]           # walked, then from the kept order
    c = copy.copy(e)                                               # __getstate__ leaves it out
    assert collect(c, lambda n: True)[0] is c
    back = pickle.loads(pickle.dumps(e))
    assert "_tc_preorder" not in back.__dict__ and vars_of(back) == ["x"]
    stmts = [Evaluate(e)]
    s = Seq(stmts)                                                 # a list: never kept
    outer = Seq((s, Evaluate(y)))
    assert vars_of(outer) == ["x", "y"]
    stmts.append(Evaluate(y))
    assert vars_of(outer) == ["x", "y", "y"] and vars_of(s) == ["x", "y"]


def test_visitor_walks_every_store():
    func = gemm_softmax_func()
    seen = []

    class V(Visitor):
        def visit_Store(self, s):
            seen.append(s.buffer.name)
            Visitor.generic(self, s)

    V().visit(func.body)
    assert seen == ["C_f"]


# ---- analysis ------------------------------------------------------------------------------------------

def test_linear_collects_terms():
    x, y = Var("x"), Var("y")
    c, terms = linear(binary("-", binary("+", binary("*", x, 64), 3), x))
    assert c == 3 and terms == {x: 63}
    c, terms = linear(binary("*", binary("+", x, 1), 64))
    assert c == 64 and terms == {x: 64}
    assert linear(Var("f", dt.float32)) is None
    c, terms = linear(binary("+", binary("*", x, y), 2))
    assert c == 2 and len(terms) == 1  # the product x*y is one atom


def test_static_difference():
    x, y = Var("x"), Var("y")
    assert static_difference(binary("*", binary("+", x, 1), 64), binary("*", x, 64)) == 64
    assert static_difference(binary("+", x, 7), x) == 7
    assert static_difference(x, y) is None
    assert static_difference(10, 3) == 7


def test_bounds_interval_arithmetic():
    x, y = Var("x"), Var("y")
    env = {x: (0, 9), y: (-2, 3)}
    assert bounds(binary("+", binary("*", x, 4), 3), env) == (3, 39)
    assert bounds(binary("-", x, y), env) == (-3, 11)
    assert bounds(binary("*", x, y), env) == (-18, 27)
    assert bounds(binary("//", x, 4), env) == (0, 2)
    assert bounds(binary("%", binary("+", x, 100), 8), env) == (0, 7)
    assert bounds(binary("min", x, 5), env) == (0, 5)
    lo, hi = bounds(Var("free"), env)
    assert lo == -INF and hi == INF


def test_divisible():
    x = Var("x")
    assert divisible(binary("*", x, 64), 16)
    assert divisible(binary("+", binary("*", x, 64), 32), 16)
    assert not divisible(binary("+", binary("*", x, 64), 8), 16)
    assert not divisible(x, 2)
