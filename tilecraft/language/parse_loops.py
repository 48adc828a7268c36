"""The parser's loops: `for` over T.Parallel / T.Pipelined / T.serial / T.unroll / range / T.Persistent
or a Python iterable (unrolled while parsing), `while`, and `break` (a mixin of `Parser`, which
provides `eval`, `value`, `bind`, `block`, `assign`, `error`, `span` and `builder`)."""
from __future__ import annotations

import ast
import builtins

from ..errors import TilecraftError
from ..ir import Break, Expr, For, If, Load, Var, While, as_expr, binary, cast, collect, const, dtype as dt
from ..ir.index_width import wide_extent
from .kernel import LoopSpec, PersistentSpec, serial


class LoopMixin:
    def stmt_For(self, node):
        if node.orelse:
            raise self.error(node, "for ... else is not supported in a kernel body")
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and self._is_builtin_range(it.func):
            args = [self.eval(a) for a in it.args]
            spec = serial(*args)
        else:
            spec = self.eval(it)
        if isinstance(spec, PersistentSpec):
            return self._persistent(node, spec)
        if not isinstance(spec, LoopSpec):
            if isinstance(spec, Expr) or not hasattr(spec, "__iter__"):
                raise self.error(node, f"cannot loop over {spec!r}; use T.Parallel, T.Pipelined, "
                                       f"T.serial, T.unroll or range")
            self.loop_kinds = getattr(self, "loop_kinds", []) + ["a loop over a Python iterable (unrolled when the kernel is built)"]
            try:
                for v in list(spec):  # a Python iterable: unrolled at parse time
                    self.assign(node.target, v, node)
                    self.block_inline(node.body)
            finally:
                self.loop_kinds = self.loop_kinds[:-1]
            return
        names = [node.target] if isinstance(node.target, ast.Name) else list(getattr(node.target, "elts", []))
        if not all(isinstance(n, ast.Name) for n in names) or len(names) != len(spec.extents):
            raise self.error(node, f"this loop binds {len(spec.extents)} variable(s); write "
                                   f"`for {', '.join('ijkl'[:len(spec.extents)])} in ...`")
        self.scopes.append({})
        self.loop_kinds = getattr(self, "loop_kinds", []) + [spec.kind]
        loop_vars = []
        try:
            for n, extent in zip(names, spec.extents):
                # a loop that may pass 2^31 iterations counts in int64 (ir/index_width.py)
                v = Var(self.builder.fresh_name(n.id), dt.int64 if wide_extent(extent) else dt.int32)
                loop_vars.append(v)
                index = v if spec.step == 1 and (isinstance(spec.start, int) and spec.start == 0) \
                    else binary("+", binary("*", v, spec.step), spec.start)
                self.bind(n.id, index)
            body = self.block(node.body)
        finally:
            self.scopes.pop()
            self.loop_kinds = self.loop_kinds[:-1]
        for v, extent in reversed(list(zip(loop_vars, spec.extents))):
            body = For(v, const(0), as_expr(extent), spec.kind, body, 1, spec.annotations, span=self.span(node))
        self.builder.emit(body)

    def _persistent(self, node, spec):
        """`for bx, by in T.Persistent(domain, wave_size, index)`: a serial loop over the waves; in
        wave w this block takes tile number w * wave_size + index when there is one."""
        names = [node.target] if isinstance(node.target, ast.Name) else list(getattr(node.target, "elts", []))
        if not all(isinstance(n, ast.Name) for n in names) or len(names) != len(spec.domain):
            raise self.error(node, f"T.Persistent over a domain of {len(spec.domain)} extent(s) binds "
                                   f"{len(spec.domain)} variable(s), got `{ast.unparse(node.target)}`")
        total = as_expr(1)
        for d in spec.domain:
            total = binary("*", total, as_expr(d))
        wave = Var(self.builder.fresh_name("wave"))
        linear = binary("+", binary("*", wave, as_expr(spec.wave_size)), as_expr(spec.index))
        self.scopes.append({})
        self.loop_kinds = getattr(self, "loop_kinds", []) + ["serial"]
        try:
            for n, e in zip(names, spec.tile_of(linear)):
                self.bind(n.id, e)
            body = self.block(node.body)
        finally:
            self.scopes.pop()
            self.loop_kinds = self.loop_kinds[:-1]
        waves = binary("//", binary("+", total, binary("-", as_expr(spec.wave_size), 1)), as_expr(spec.wave_size))
        guarded = If(binary("<", linear, total), body, None, span=self.span(node))
        self.builder.emit(For(wave, const(0), waves, "serial", guarded, 1, (), span=self.span(node)))

    def _is_builtin_range(self, func_node) -> bool:
        try:
            return self.lookup(func_node.id, func_node) is builtins.range
        except TilecraftError:
            return False

    def stmt_While(self, node):
        """`while cond:` -- a serial loop whose condition is evaluated before every iteration."""
        if node.orelse:
            raise self.error(node, "while ... else is not supported in a kernel body")
        cond = self.value(self.eval(node.test), node)
        if not isinstance(cond, Expr):
            if not cond:
                return  # never entered
            raise self.error(node, f"the condition of this while loop ({ast.unparse(node.test)}) is a "
                                   f"Python value, fixed when the kernel is built: the loop would never end "
                                   f"(`break` is not supported)",
                             hint="make the condition read a buffer element or a T.alloc_var that the body "
                                  "updates, e.g. `i = T.alloc_var('int32')` ... `while i < n: ...; i = i + 1`")
        if not collect(cond, lambda n: isinstance(n, Load)):
            raise self.error(node, f"the condition of this while loop ({ast.unparse(node.test)}) reads no "
                                   f"buffer or T.alloc_var, so nothing in the body can change it",
                             hint="keep the loop state in a T.alloc_var (or a buffer element) and update it in "
                                  "the body")
        self.loop_kinds = getattr(self, "loop_kinds", []) + ["while"]
        try:
            body = self.block(node.body, new_scope=True)
        finally:
            self.loop_kinds = self.loop_kinds[:-1]
        self.builder.emit(While(cast(cond, dt.bool_), body, span=self.span(node)))

    def stmt_Break(self, node):
        problem = break_problem(getattr(self, "loop_kinds", []), "`break`")
        if problem:
            raise self.error(node, problem, hint="use a T.serial loop or a while loop")
        self.builder.emit(Break(span=self.span(node)))


def break_problem(kinds, what: str) -> str | None:
    """Why `break` (or T.loop_break()) cannot be here, or None: it leaves a serial loop (T.serial /
    range / T.unroll / while); never T.Parallel, whose iterations are spread over threads, nor
    T.Pipelined, whose copies run ahead of the body."""
    if not kinds:
        return f"{what} outside a loop"
    if kinds[-1] not in ("serial", "unroll", "while"):
        loop = {"parallel": "T.Parallel (its iterations run on different threads)",
                "pipelined": "T.Pipelined (its copies are issued ahead of the body)"}.get(kinds[-1], kinds[-1])
        return f"{what} cannot leave {loop}"
    return None
