"""Expression evaluation for the parser (a mixin of `Parser`).

Every AST expression evaluates to a Python value (folded now) or an IR expression (code): Python
operators on Python values run in Python, anything touching a kernel value builds IR; buffer
subscripts become element loads or regions; calls run the language function or user helper.
"""
from __future__ import annotations

import ast
import builtins
import difflib
import operator

from ..errors import TilecraftError
from ..ir import Buffer, Expr, Load, Region, as_expr, binary, const, unary
from ..ir.analysis import share_equal, static_difference

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
           ast.RShift: ">>", ast.Pow: "**"}
_PYOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
          "//": operator.floordiv, "%": operator.mod, "&": operator.and_, "|": operator.or_,
          "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift, "**": operator.pow}
_PYTHON_ONLY = {ast.ListComp: "a list comprehension", ast.SetComp: "a set comprehension",
                ast.DictComp: "a dict comprehension", ast.GeneratorExp: "a generator expression",
                ast.Lambda: "a lambda"}
_EVAL_FRAMES = ("<module>", "<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>", "<lambda>")
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}



class ExprMixin:
    """Needs from the host class: `lookup`, `error`, `span`, `scopes`, `env`, `file`."""

    # ---- expressions ------------------------------------------------------------------------
    def value(self, v, node):
        """A read of a scalar `T.alloc_var` buffer used as a value."""
        if isinstance(v, Buffer) and v.scope == "var":
            return Load(v, (const(0),))
        return v

    def eval(self, node):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            return self.eval_python(node)
        return method(node)

    def eval_python(self, node):
        """Fallback for Python-only syntax (comprehensions, lambdas, f-strings): evaluate it with
        Python, seeing kernel names as their IR values."""
        env = dict(self.env)
        for scope in self.scopes:
            env.update(scope)
        try:
            return eval(compile(ast.Expression(node), self.file, "eval"), env)
        except TilecraftError as e:
            if e.span is not None and e.span.file == self.file and e.span.func in _EVAL_FRAMES:
                # raised in the evaluated expression's own frames, whose line numbers are the kernel
                # source's, not the file's: report it at the expression
                raise type(e)(e.message, self.span(node), hint=e.hint) from None
            raise
        except Exception as e:  # noqa: BLE001 - reported at the user's line
            kind = _PYTHON_ONLY.get(type(node))
            if kind is not None:
                raise self.error(node, f"{kind} in a kernel body is run by Python when the kernel is built, where "
                                       f"buffers are tiles, not values, so it cannot read or compute kernel values "
                                       f"({type(e).__name__}: {e})",
                                 hint="write a loop instead: `for i in T.unroll(n):` (or T.Parallel) and "
                                      "index the buffer inside it") from None
            raise self.error(node, f"{type(e).__name__}: {e}") from None

    def expr_Constant(self, node):
        return node.value

    def expr_Name(self, node):
        return self.lookup(node.id, node)

    def expr_Attribute(self, node):
        base = self.eval(node.value)
        if node.attr == "astype" and (isinstance(base, Expr) or getattr(base, "scope", None) == "var"):
            from .compat import astype
            value = self.value(base, node)
            return lambda dtype: astype(value, dtype)  # x.astype("float32")
        if node.attr == "data" and isinstance(base, Buffer):
            if base.scope != "global":
                raise self.error(node, f"{base.name}.data: only a global tensor's storage can be viewed with another "
                                       f"shape (T.Tensor(shape, dtype, X.data)); {base.name} is a {base.scope} buffer")
            from .types import BufferData
            return BufferData(base)
        try:
            return getattr(base, node.attr)
        except AttributeError:
            if getattr(base, "__name__", "").startswith("tilecraft.language"):
                names = [n for n in dir(base) if not n.startswith("_")]
                close = difflib.get_close_matches(node.attr, names, 1)
                raise self.error(node, f"unknown language construct T.{node.attr}",
                                 hint=f"did you mean T.{close[0]}?" if close else None) from None
            raise self.error(node, f"{ast.unparse(node.value)} has no attribute {node.attr!r}") from None

    def expr_Tuple(self, node):
        return tuple(self.eval(e) for e in node.elts)

    def expr_List(self, node):
        return [self.eval(e) for e in node.elts]

    def expr_BinOp(self, node):
        return self.binop(_BINOPS[type(node.op)], self.eval(node.left), self.eval(node.right), node)

    def binop(self, op, a, b, node):
        a, b = self.value(a, node), self.value(b, node)
        for x in (a, b):  # before the Python-value path: `S + 1` on a tile must not become a TypeError
            if isinstance(x, (Buffer, Region)):
                raise self.error(node, f"cannot use the tile {x.name if isinstance(x, Buffer) else x.buffer.name} "
                                       f"in arithmetic; index an element, e.g. {getattr(x, 'name', 'buf')}[i, j]")
        if isinstance(a, Load) is False and isinstance(a, Expr) is False and isinstance(b, Expr) is False:
            try:
                return _PYOPS[op](a, b)
            except ZeroDivisionError:
                raise self.error(node, f"division by zero: {ast.unparse(node)} (the divisor is 0 when the "
                                       f"kernel is built)") from None
        if op == "**":
            if isinstance(b, int) and b in (1, 2, 3):
                out = a
                for _ in range(b - 1):
                    out = binary("*", out, a)
                return out
            from ..ir import call
            return call("pow", a, b)
        return binary(op, a, b, self.span(node))

    def expr_UnaryOp(self, node):
        v = self.value(self.eval(node.operand), node)
        if not isinstance(v, Expr):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                    ast.Invert: operator.invert}[type(node.op)](v)
        if isinstance(node.op, ast.UAdd):
            return v
        return unary({ast.USub: "neg", ast.Not: "not", ast.Invert: "bitnot"}[type(node.op)], v)

    def expr_BoolOp(self, node):
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = None
        for sub in node.values:
            v = self.value(self.eval(sub), node)
            if not isinstance(v, Expr) and result is None:
                if (op == "and" and not v) or (op == "or" and v):
                    return v  # Python short-circuit
                continue
            result = v if result is None else binary(op, result, v)
        return True if result is None and op == "and" else False if result is None else result

    def expr_Compare(self, node):
        left = self.value(self.eval(node.left), node)
        out = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.value(self.eval(comp), node)
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(left, Expr):
                r = self.membership(left, right, isinstance(op, ast.NotIn), node)
            elif isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                r = {ast.Is: operator.is_, ast.IsNot: operator.is_not,
                     ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}[type(op)](left, right)
            elif isinstance(left, Expr) or isinstance(right, Expr):
                r = binary(_CMPOPS[type(op)], left, right, self.span(node))
            else:
                r = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
                     ast.Eq: operator.eq, ast.NotEq: operator.ne}[type(op)](left, right)
            out = r if out is None else (binary("and", out, r) if isinstance(out, Expr) or isinstance(r, Expr)
                                         else out and r)
            left = right
        return out

    def membership(self, x, values, negate, node):
        """`x in (a, b, ...)` on a kernel value: `x == a or x == b ...` in the kernel."""
        if isinstance(values, Expr) or not isinstance(values, (tuple, list, range, set, frozenset)):
            raise self.error(node, f"`in` needs a tuple, list or range of values to compare a kernel value with, "
                                   f"got {type(values).__name__}", hint="compare with == instead")
        out = None
        for v in values:
            eq = binary("!=" if negate else "==", x, self.value(v, node), self.span(node))
            out = eq if out is None else binary("and" if negate else "or", out, eq)
        return out if out is not None else negate

    def expr_IfExp(self, node):
        cond = self.value(self.eval(node.test), node)
        if not isinstance(cond, Expr):
            return self.eval(node.body) if cond else self.eval(node.orelse)
        from .math import if_then_else
        return if_then_else(cond, self.value(self.eval(node.body), node), self.value(self.eval(node.orelse), node))

    def expr_Subscript(self, node):
        obj = self.eval(node.value)
        if isinstance(obj, Buffer):
            return self.subscript(obj, node.slice, node)
        idx = self.eval(node.slice)
        if isinstance(idx, Expr):
            raise self.error(node, f"cannot index the Python value {ast.unparse(node.value)} with a kernel value")
        return obj[idx]

    def subscript(self, buf: Buffer, slice_node, node):
        items = list(slice_node.elts) if isinstance(slice_node, ast.Tuple) else [slice_node]
        if len(items) > buf.ndim:
            raise self.error(node, f"{buf.name} has {buf.ndim} dimension(s) but is indexed with {len(items)}")
        starts, extents, any_slice = [], [], False
        for d, it in enumerate(items):
            if isinstance(it, ast.Slice):
                any_slice = True
                if it.step is not None and self.eval(it.step) not in (None, 1):
                    raise self.error(node, f"slices of {buf.name} must have step 1")
                lo = self.value(self.eval(it.lower), node) if it.lower is not None else 0
                hi = self.value(self.eval(it.upper), node) if it.upper is not None else buf.shape[d]
                ext = self.static_extent(hi, lo)
                if ext is None:
                    raise self.error(node, f"the slice {ast.unparse(it)} of {buf.name} (dimension {d}) must have a "
                                           f"compile-time extent", hint="write it as start:start + EXTENT")
                if ext <= 0:
                    raise self.error(node, f"the slice {ast.unparse(it)} of {buf.name} is empty")
                starts.append(as_expr(lo))
                extents.append(ext)
            else:
                v = self.value(self.eval(it), node)
                if isinstance(v, float) or (isinstance(v, Expr) and not v.dtype.is_int):
                    raise self.error(node, f"index {ast.unparse(it)} of {buf.name} must be an integer, "
                                           f"got {v.dtype if isinstance(v, Expr) else 'float'}")
                if not isinstance(v, (int, Expr)):
                    raise self.error(node, f"index {ast.unparse(it)} of {buf.name} must be an integer, got {v!r}")
                starts.append(as_expr(v))
                extents.append(1)
        for d in range(len(items), buf.ndim):  # missing trailing indices: whole dimensions
            any_slice = True
            starts.append(const(0))
            extents.append(buf.shape[d])
        if any_slice:
            return Region(buf, tuple(starts), tuple(extents), span=self.span(node))
        return Load(buf, tuple(starts), span=self.span(node))

    def static_extent(self, hi, lo):
        """`hi - lo` when it is a compile-time constant, also through the lets and scalar variables
        the bounds are written with (`H1 = H0 + 64; X[H0:H1]`, `X[off + i*m : off + (i+1)*m]` with
        `off` a T.alloc_var): both bounds are read at the same point, so equal names are equal values."""
        ext = static_difference(hi, lo, exact_division=True)
        if ext is not None or not isinstance(hi, Expr) and not isinstance(lo, Expr):
            return ext
        from ..ir import Var
        from ..ir.functor import Mutator
        lets = getattr(self, "let_values", {})
        canon: dict = {}

        expanded: dict = {}  # one object per let, so both bounds share their non-linear atoms

        class _Expand(Mutator):
            def visit_Var(self, v):
                if v not in lets:
                    return v
                if v not in expanded:
                    expanded[v] = self.visit(lets[v])
                return expanded[v]

            def visit_Load(self, ld):
                if ld.buffer.scope == "var":
                    return canon.setdefault(ld.buffer, Var(ld.buffer.name, ld.buffer.dtype))
                return self.generic(ld)
        hi, lo = share_equal(*(_Expand().visit(x) if isinstance(x, Expr) else x for x in (hi, lo)))
        return static_difference(hi, lo, exact_division=True)

    def expr_Call(self, node):
        func = self.eval(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.eval(a.value))
            else:
                args.append(self.eval(a))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.eval(kw.value))
            else:
                kwargs[kw.arg] = self.eval(kw.value)
        if func in (builtins.max, builtins.min, builtins.abs) and any(isinstance(self.value(a, node), Expr) for a in args):
            from . import math as tm
            func = {builtins.max: tm.max, builtins.min: tm.min, builtins.abs: tm.abs}[func]
            args = [self.value(a, node) for a in args]
        try:
            return func(*args, **kwargs)
        except TilecraftError as e:
            raise e.with_span(self.span(node)) from None
        except TypeError as e:
            raise self.error(node, f"bad call {ast.unparse(node.func)}(...): {e}") from None
        except Exception as e:
            if (getattr(func, "__module__", None) or "").startswith("tilecraft"):
                raise   # the language's own functions raise TilecraftErrors; anything else is a compiler bug
            # the program's own Python (a helper, a builtin) failed while the kernel was being parsed
            raise self.error(node, f"{ast.unparse(node)} raised {type(e).__name__}: {e}") from e

    def expr_Slice(self, node):
        raise self.error(node, "a slice is only valid as a buffer index")

