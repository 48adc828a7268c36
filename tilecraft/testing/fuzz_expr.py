"""Random element-wise expressions for the differential fuzzer, printed twice: as tile-language
source for a kernel and as a torch expression of the same computation.

An expression is plain data (nested lists, JSON-able) so a failing program can be shrunk by
replacing a node with one of its children and saved as a regression test:

    ["leaf", name]            a value the program provides (a loaded element, a loop index)
    ["const", c]              a float (exactly representable) or int constant of the other side's dtype
    ["add"|"sub"|"mul"|"max"|"min", a, b]
    ["neg"|"abs"|"tanh"|"sigmoid", a]
    ["cast", dtype, a]
    ["ite", cond, a, b]       T.if_then_else / torch.where
    cond: ["gt", leaf, leaf] | ["gtc", leaf, c] | ["mod3", leaf, leaf]

Rules that keep the comparison meaningful (an exact reference would need the same rounding
order; these make any difference ulp-sized, which the tolerances absorb):
- both operands of a binary op have one dtype (a cast is inserted where they differ; an integer
  meeting a float is cast to the float, never the float truncated to an integer);
- conditions compare input elements or indices only (exact on every target), so a branch can
  never flip on a rounding difference;
- float-to-int32 casts apply to `4 * input` only (exact), integer ops stay exact;
- transcendentals are bounded (tanh, sigmoid): no overflow to inf on one side only.
"""
from __future__ import annotations

import random

FLOATS = ("float32", "float16", "bfloat16")
TORCH = {"float32": "torch.float32", "float16": "torch.float16", "bfloat16": "torch.bfloat16",
         "int32": "torch.int32"}
FLOAT_CONSTS = (0.5, 1.5, 2.0, 0.25, -1.0, 3.0, -0.75)
INT_CONSTS = (1, 2, 3, -2, 5)


def random_expr(rng: random.Random, leaves: dict, depth: int) -> list:
    """A random expression over `leaves` (name -> "v": an input element, "vx": a computed value
    conditions must not compare, "index": a loop index), at most `depth` operators deep."""
    if depth <= 0 or rng.random() < 0.25:
        return _leaf(rng, leaves)
    op = rng.choice(["add", "sub", "mul", "max", "min", "neg", "abs", "cast", "cast", "tanh", "sigmoid",
                     "ite", "ite", "const"])
    if op in ("add", "sub", "mul", "max", "min"):
        return [op, random_expr(rng, leaves, depth - 1), random_expr(rng, leaves, depth - 1)]
    if op == "const":
        return [rng.choice(["add", "mul"]), random_expr(rng, leaves, depth - 1), ["const", None]]
    if op in ("neg", "abs", "tanh", "sigmoid"):
        return [op, random_expr(rng, leaves, depth - 1)]
    if op == "cast":
        return ["cast", rng.choice(FLOATS + ("int32",)), random_expr(rng, leaves, depth - 1)]
    return ["ite", _cond(rng, leaves), random_expr(rng, leaves, depth - 1), random_expr(rng, leaves, depth - 1)]


def _leaf(rng, leaves):
    return ["leaf", rng.choice(sorted(leaves))]


def _cond(rng, leaves):
    names = sorted(leaves)
    idx = [n for n in names if leaves[n] == "index"]
    vals = [n for n in names if leaves[n] == "v"]   # "vx": a computed value, never compared
    kind = rng.choice(["gt", "gtc", "mod3"] if idx else ["gt", "gtc"]) if vals else "mod3"
    if kind == "mod3":
        return ["mod3", rng.choice(idx), rng.choice(idx)]
    if kind == "gt":
        return ["gt", rng.choice(vals), rng.choice(vals)]
    return ["gtc", rng.choice(vals), rng.choice((0.0, 0.5, -0.5))]


class Printer:
    """Prints an expression for the kernel (`k`) and for torch (`r`).  `leaves` maps a leaf name to
    (kernel text, torch text, dtype); dtype "index" is an int32 loop index."""

    def __init__(self, leaves: dict):
        self.leaves = leaves

    def print(self, e) -> tuple:
        """(kernel text, torch text, dtype)."""
        op = e[0]
        if op == "leaf":
            k, r, d = self.leaves[e[1]]
            return k, r, ("int32" if d == "index" else d)
        if op in ("add", "sub", "mul", "max", "min"):
            a = self.print(e[1])
            if e[2][0] == "const":
                c = _const_for(a[2], e[2][1])
                sym = {"add": "+", "sub": "-", "mul": "*"}.get(op, "*")
                return f"({a[0]} {sym} {c})", f"({a[1]} {sym} {c})", a[2]
            b = self.print(e[2])
            if a[2] == "int32" and b[2] != "int32":   # an integer meets a float: compute in the float
                a = self._as(a, b[2])
            b = self._as(b, a[2])
            if op in ("max", "min"):
                return f"T.{op}({a[0]}, {b[0]})", f"torch.{op}imum({a[1]}, {b[1]})", a[2]
            sym = {"add": "+", "sub": "-", "mul": "*"}[op]
            return f"({a[0]} {sym} {b[0]})", f"({a[1]} {sym} {b[1]})", a[2]
        if op == "neg":
            a = self.print(e[1])
            return f"(-{a[0]})", f"(-{a[1]})", a[2]
        if op == "abs":
            a = self.print(e[1])
            return f"T.abs({a[0]})", f"torch.abs({a[1]})", a[2]
        if op in ("tanh", "sigmoid"):
            a = self.print(e[1])
            if a[2] == "int32":
                a = self._as(a, "float32")
            return f"T.{op}({a[0]})", f"torch.{op}({a[1]})", a[2]
        if op == "cast":
            a = self.print(e[2])
            if e[1] == "int32" and a[2] != "int32":
                return self._int_of(e[2])
            return self._as(a, e[1])
        if op == "ite":
            ck, cr = self.cond(e[1])
            a, b = self.print(e[2]), self.print(e[3])
            if a[2] == "int32" and b[2] != "int32":
                a = self._as(a, b[2])
            b = self._as(b, a[2])
            return f"T.if_then_else({ck}, {a[0]}, {b[0]})", f"torch.where({cr}, {a[1]}, {b[1]})", a[2]
        raise ValueError(f"unknown expression node {e!r}")

    def _int_of(self, e):
        """An exact int32 value derived from `e`: 4 * (a leaf of e), truncated."""
        leaf = _first_value_leaf(e, self.leaves)
        if leaf is None:
            return "0", "0", "int32"
        k, r, d = self.leaves[leaf]
        if d == "index":
            return k, r, "int32"
        if d == "int32":
            return k, r, d
        return f"T.cast({k} * 4.0, \"int32\")", f"({r} * 4.0).to(torch.int32)", "int32"

    def cond(self, c) -> tuple:
        if c[0] == "gt":
            a, b = self.leaves[c[1]], self.leaves[c[2]]
            if a[2] != b[2]:   # compare in float32: exact for every input dtype we draw
                return (f"T.cast({a[0]}, \"float32\") > T.cast({b[0]}, \"float32\")",
                        f"({a[1]}.to(torch.float32) > {b[1]}.to(torch.float32))")
            return f"{a[0]} > {b[0]}", f"({a[1]} > {b[1]})"
        if c[0] == "gtc":
            a = self.leaves[c[1]]
            return f"T.cast({a[0]}, \"float32\") > {c[2]}", f"({a[1]}.to(torch.float32) > {c[2]})"
        a, b = self.leaves[c[1]], self.leaves[c[2]]
        return f"({a[0]} + {b[0]}) % 3 == 0", f"(({a[1]} + {b[1]}) % 3 == 0)"

    @staticmethod
    def _as(a, d):
        if a[2] == d:
            return a
        return f"T.cast({a[0]}, \"{d}\")", f"{a[1]}.to({TORCH[d]})", d


def _const_for(dtype, c):
    if dtype == "int32":
        return int(c) if isinstance(c, int) else 3
    return float(c) if isinstance(c, float) else 0.5


def _first_value_leaf(e, leaves):
    if e[0] == "leaf":
        return e[1]
    for sub in e[1:]:
        if isinstance(sub, list) and sub and isinstance(sub[0], str):
            hit = _first_value_leaf(sub, leaves)
            if hit is not None:
                return hit
    return None


def fill_consts(rng: random.Random, e):
    """Replace the `None` constants of `random_expr` by concrete ones (kept in the spec)."""
    if not isinstance(e, list):
        return e
    if e and e[0] == "const" and e[1] is None:
        return ["const", rng.choice(FLOAT_CONSTS + INT_CONSTS)]
    return [fill_consts(rng, x) for x in e]


def subexpressions(e) -> list:
    """Children of `e` that are expressions themselves (shrinking replaces `e` by one of them)."""
    if not isinstance(e, list) or not e or e[0] in ("leaf", "const"):
        return []
    if e[0] == "cast":
        return [e[2]]
    if e[0] == "ite":
        return [e[2], e[3]]
    return [x for x in e[1:] if isinstance(x, list) and x and x[0] not in ("const",)]


def expr_dtypes(e, leaves: dict) -> set:
    """Every dtype the expression computes in (for the tolerance)."""
    out = set()
    if not isinstance(e, list):
        return out
    if e[0] == "leaf":
        d = leaves[e[1]][2]
        return {"int32" if d == "index" else d}
    if e[0] == "cast":
        out.add(e[1])
    for x in e[1:]:
        out |= expr_dtypes(x, leaves) if isinstance(x, list) else set()
    return out
