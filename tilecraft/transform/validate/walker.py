"""The validation rules' shared walk: the enclosing statement's span (for the error's line), the
open kernel, the enclosing loops and the value ranges of block, thread and loop variables."""
from __future__ import annotations

from ...ir import For, Kernel, Let, Stmt, Visitor
from ...ir.analysis import bounds


class Walker(Visitor):
    def __init__(self, target):
        self.target = target
        self.span = None
        self.kernel: Kernel | None = None
        self.loops: list = []       # enclosing For statements, innermost last
        self.env: dict = {}         # Var -> (lo, hi)
        self.guards: list = []      # conditions of enclosing ifs / whiles

    def visit(self, node):
        if isinstance(node, Stmt) and node.span is not None:
            saved, self.span = self.span, node.span
            try:
                return super().visit(node)
            finally:
                self.span = saved
        return super().visit(node)

    def visit_Kernel(self, k: Kernel):
        saved, self.kernel = self.kernel, k
        for v, g in zip(k.block_vars, k.grid):
            self.env[v] = (0, bounds(g, self.env)[1] - 1)
        for v, t in zip(k.thread_vars, k.threads):
            self.env[v] = (0, t - 1)
        try:
            self.enter_kernel(k)
            Visitor.generic(self, k)
        finally:
            self.kernel = saved

    def enter_kernel(self, k: Kernel):
        pass

    def visit_For(self, f: For):
        lo = bounds(f.start, self.env)[0]
        self.env[f.var] = (lo, lo + bounds(f.extent, self.env)[1] - 1)
        self.check_for(f)
        self.loops.append(f)
        try:
            Visitor.generic(self, f)
        finally:
            self.loops.pop()

    def check_for(self, f: For):
        pass

    def visit_Let(self, s: Let):
        Visitor.generic(self, s)
        if s.var.dtype.is_int:
            self.env[s.var] = bounds(s.value, self.env)

    def visit_If(self, s):
        self.visit(s.cond)
        self.guards.append(s.cond)
        try:
            self.visit(s.then)
            if s.orelse is not None:
                self.visit(s.orelse)
        finally:
            self.guards.pop()

    def visit_While(self, s):
        self.visit(s.cond)
        self.guards.append(s.cond)
        try:
            self.visit(s.body)
        finally:
            self.guards.pop()
