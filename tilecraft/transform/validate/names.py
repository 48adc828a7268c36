"""Every name a kernel uses has a value when it runs.

A kernel's scalar names are bound by T.Kernel (block and thread indices), loops, `x = ...` (lets),
or are shape symbols (T.dynamic / T.symbolic) bound from a tensor argument's shape at call time.
A T.dynamic symbol that no tensor's shape uses -- `T.Parallel(bs, 64)` with `bs = T.dynamic("bs")`
as a tile size -- has no value anywhere (the C++ compiler would report an undeclared name).
"""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import Buffer, For, Kernel, Let, Var, Visitor
from ...ir.expr import BuiltinVar
from .walker import Walker


class _Bound(Visitor):
    def __init__(self, bound: set):
        self.bound = bound

    def visit_Buffer(self, b: Buffer):
        for s in b.shape:
            if isinstance(s, Var):
                self.bound.add(id(s))

    def visit_Kernel(self, k: Kernel):
        self.bound.update(id(v) for v in k.block_vars + tuple(k.thread_vars))
        Visitor.generic(self, k)

    def visit_For(self, f: For):
        self.bound.add(id(f.var))
        Visitor.generic(self, f)

    def visit_Let(self, s: Let):
        self.bound.add(id(s.var))
        Visitor.generic(self, s)


class _Names(Walker):
    def __init__(self, target, bound: set):
        super().__init__(target)
        self.bound = bound

    def visit_Var(self, v: Var):
        if type(v) is Var and id(v) not in self.bound:
            raise TilecraftError(
                f"{v.name} has no value in this kernel: it is a symbol (T.dynamic / T.symbolic) that no tensor "
                f"parameter's shape uses, so nothing binds it when the kernel runs", self.span,
                hint=f"tile sizes are compile-time ints (a factory argument); a symbol stands for a tensor "
                     f"dimension: use it in a T.Tensor shape, e.g. T.Tensor(({v.name}, 64), ...)")


def check_names(func, target) -> None:
    bound = {id(s) for s in func.symbols}
    finder = _Bound(bound)
    for p in func.params:
        finder.visit_Buffer(p)
    finder.visit(func.body)
    _Names(target, bound).visit(func.body)
