"""The front end: a `@T.prim_func` body's Python AST → tile IR.

The body is never executed.  The parser walks its AST and *evaluates* each expression to either a
Python value (names from the enclosing scopes, arithmetic on them, `T.ceildiv(N, 128)`) or an IR
expression (anything touching a kernel value: block indices, loop variables, loaded elements).
So Python values fold at parse time, a Python `if` on a Python value picks its branch now, and an
`if` on a kernel value becomes code.  Language functions (`T.copy`, ...) are plain Python
functions that emit statements into the active `Builder`; every statement carries the user's
file and line.
"""
from __future__ import annotations

import ast
import builtins
import difflib
import inspect
import textwrap
import threading

from ..errors import InternalCompilerError, TilecraftError
from ..ir import (Buffer, Evaluate, Expr, If, Kernel, Let, Load, PrimFunc, Region, Span, Store, Var,
                  as_expr, cast, collect, const, dtype as dt)
from ..ir.intrinsics import Extern, IntrinsicCall
from .builder import Builder, activate, caller_span
from .compat import AttrScope
from .kernel import KernelSpec
from .parse_expr import _BINOPS, ExprMixin
from .parse_loops import LoopMixin
from .types import TensorSpec

class KernelFrame:
    """The open `T.Kernel`: its block index vars and (lazily) its thread index vars."""

    def __init__(self, spec: KernelSpec, block_vars):
        self.spec = spec
        self.block_vars = block_vars
        self.thread_vars = tuple(Var("threadIdx_" + c) for c in "xyz")

    def thread_var(self, dim: int) -> Var:
        return self.thread_vars[dim]


class Macro:
    """`@T.macro`: a helper whose body is parsed inline at each call site."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "macro")
        self.__doc__ = fn.__doc__

    def __call__(self, *args, **kwargs):
        stack = _active_parsers()
        parser = stack[-1] if stack else None
        if parser is None:
            raise TilecraftError(f"T.macro {self.__name__} can only be called inside a @T.prim_func body",
                                 caller_span())
        return parser.inline_macro(self, args, kwargs)


MACRO_DEPTH = 64  # nested calls of one T.macro: deeper is a recursion without a compile-time base case
_TLS = threading.local()  # per thread: the parsers active in it (threads may parse at once)


def _active_parsers() -> list:
    return _TLS.__dict__.setdefault("parsers", [])


def macro(fn=None, **_):
    if fn is None:
        return lambda f: Macro(f)
    return Macro(fn)


def _python_env(fn, caller_locals=None) -> dict:
    env = dict(builtins.__dict__)
    env.update(fn.__globals__)
    if caller_locals:
        env.update(caller_locals)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                env[name] = cell.cell_contents
            except ValueError:  # an enclosing variable not assigned yet
                pass
    return env


def _compiler_frame(e: BaseException) -> str | None:
    """`file:line (function)` of the innermost frame of `e` when that frame is tilecraft's own code."""
    import os
    import traceback
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return None
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    inner = frames[-1]
    if not os.path.abspath(inner.filename).startswith(pkg + os.sep):
        return None
    return f"{os.path.relpath(inner.filename, os.path.dirname(pkg))}:{inner.lineno} ({inner.name})"


# CPython (3.11.7 here) keeps the AST constructor's recursion depth in state the threads share, so two threads
# parsing at once can fail with "SystemError: AST constructor recursion depth mismatch" (seen once in make test
# under load: tests/runtime/test_threads.py's 8 compiling threads, session 18): parses take turns
_AST_LOCK = threading.Lock()


_SOURCES: dict = {}   # id(code object) -> (the code object, source text, file); the most recent 1024
_SOURCES_LOCK = threading.Lock()


def _source_of(code) -> tuple[str, str]:
    """(source text, file) of the function whose code object is `code`.  Kept per code object (by identity:
    equal code objects may come from different files): a factory parses its kernel function again for
    every set of sizes, and `inspect.getsourcelines` tokenizes the file from the function's line each time
    (~1 ms); a function defined anew (an edited cell, a module imported again) has a new code object."""
    hit = _SOURCES.get(id(code))
    if hit is not None and hit[0] is code:
        return hit[1], hit[2]
    lines, _ = inspect.getsourcelines(code)
    source, file = textwrap.dedent("".join(lines)), inspect.getsourcefile(code) or "<unknown>"
    with _SOURCES_LOCK:   # compiling threads: the eviction iterates the dict
        if len(_SOURCES) >= 1024:
            _SOURCES.pop(next(iter(_SOURCES)))
        _SOURCES[id(code)] = (code, source, file)
    return source, file


def _function_ast(fn):
    try:
        code = inspect.unwrap(fn).__code__   # the function whose source is read, and whose lines count
        source, file = _source_of(code)
    except (OSError, TypeError, AttributeError) as e:
        raise TilecraftError(f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {e}; "
                             f"@T.prim_func needs the function's source file") from None
    with _AST_LOCK:
        tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return node, file, code.co_firstlineno - 1, source


class Parser(ExprMixin, LoopMixin):
    def __init__(self, fn, caller_locals=None):
        self.fn = fn
        self.node, self.file, self.line_offset, self.source = _function_ast(fn)
        self.src_lines = self.source.splitlines()
        self.env = _python_env(fn, caller_locals)
        self.scopes: list[dict] = [{}]
        self.builder = Builder()
        self.func_name = fn.__name__
        self.symbols: list[Var] = []
        self.let_spans: dict = {}  # let-bound Var -> span of its `x = ...`
        self.let_values: dict = {}  # let-bound Var -> its value (for static slice extents)

    # ---- spans and errors -------------------------------------------------------------------
    def span(self, node) -> Span:
        line = getattr(node, "lineno", 1)
        text = self.src_lines[line - 1] if 0 < line <= len(self.src_lines) else ""
        return Span(self.file, line + self.line_offset, getattr(node, "col_offset", 0), text, self.func_name)

    def error(self, node, message, hint=None):
        return TilecraftError(message, self.span(node), hint=hint)

    # ---- names ------------------------------------------------------------------------------
    def lookup(self, name, node):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.env:
            return self.env[name]
        close = difflib.get_close_matches(name, [n for s in self.scopes for n in s] + list(self.env), 1)
        raise self.error(node, f"name {name!r} is not defined",
                         hint=f"did you mean {close[0]!r}?" if close else None)

    def bind(self, name, value):
        self.scopes[-1][name] = value

    def is_kernel_name(self, name) -> bool:
        return any(name in s for s in self.scopes)

    # ---- entry ------------------------------------------------------------------------------
    def parse(self) -> PrimFunc:
        params, scalars = [], []
        with activate(self.builder):
            _active_parsers().append(self)
            try:
                for pos, arg in enumerate(self.node.args.args):
                    p = self.param(arg)
                    if isinstance(p, Var):
                        scalars.append((pos, p))
                    else:
                        params.append(p)
                body = self.block(self.node.body)
            finally:
                _active_parsers().pop()
        workspaces = getattr(self.builder, "workspaces", [])  # T.alloc_global (language/kernel.py)
        for ws in workspaces:
            for s in ws.shape:
                if isinstance(s, Var) and s not in self.symbols:
                    raise TilecraftError(f"T.alloc_global: {ws.name}'s size {s.name} is not a size of any tensor "
                                         f"parameter, so a call cannot know it", ws.span)
        return PrimFunc(self.func_name, tuple(params) + tuple(workspaces), body, source=self.source,
                        symbols=tuple(self.symbols), imports=tuple(self.builder.imports), span=self.span(self.node),
                        workspaces=len(workspaces), scalars=tuple(scalars))

    def param(self, arg) -> Buffer:
        if arg.annotation is None:
            raise self.error(arg, f"parameter {arg.arg!r} needs a type annotation such as "
                                  f"T.Tensor((M, N), \"float16\")")
        self.builder.span = self.span(arg)
        spec = self.fn.__annotations__.get(arg.arg)  # already evaluated by Python at def time
        if not isinstance(spec, TensorSpec):
            spec = self.eval(arg.annotation)
        if isinstance(spec, dt.DType):
            return self._scalar_param(arg, spec)
        if not isinstance(spec, TensorSpec):
            raise self.error(arg, f"parameter {arg.arg!r}: annotation must be T.Tensor(shape, dtype) or a "
                                  f"scalar dtype (T.int32), got {spec!r}")
        return self._param_from_spec(arg, spec)

    def _scalar_param(self, arg, dtype, var: Var | None = None) -> Var:
        """`n: T.int32`: a scalar passed by value at each call (TileLang's scalar parameter): a kernel
        value usable anywhere, the grid included; the launchers pass it as they pass size symbols."""
        if dtype is not dt.int32:
            raise self.error(arg, f"parameter {arg.arg!r}: a scalar parameter of dtype {dtype} is not supported "
                                  f"yet; tilecraft passes int32 scalars (T.int32) by value",
                             hint="pass other scalars as a one-element tensor, or as a factory argument "
                                  "(compiled in)")
        if any(s.name == arg.arg for s in self.symbols):
            raise self.error(arg, f"parameter {arg.arg!r}: the name is already a size symbol of a tensor parameter")
        v = var if var is not None else Var(arg.arg, dtype)  # the eager jit's statements made it already
        self.symbols.append(v)
        self.bind(arg.arg, v)
        return v

    def _param_from_spec(self, arg, spec: TensorSpec) -> Buffer:
        """The global buffer parameter `arg` declared by `spec` (the eager jit gives its own specs)."""
        self.builder.span = self.span(arg)
        for s in spec.shape:
            if isinstance(s, Var) and all(s is not v for v in self.symbols):
                self.symbols.append(s)
        buf = Buffer(arg.arg, spec.shape, spec.dtype, "global", span=self.span(arg))
        self.bind(arg.arg, buf)
        return buf

    # ---- statements -------------------------------------------------------------------------
    def block(self, stmts, new_scope=False):
        if new_scope:
            self.scopes.append({})
        try:
            with self.builder.block() as box:
                for s in stmts:
                    self.stmt(s)
        finally:
            if new_scope:
                self.scopes.pop()
        return box[0]

    def stmt(self, node):
        self.builder.span = self.span(node)
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            raise self.error(node, f"{type(node).__name__} statements are not supported in a kernel body")
        try:
            method(node)
        except TilecraftError as e:
            raise e.with_span(self.span(node)) from None
        except (IndexError, KeyError, AttributeError, ZeroDivisionError, RecursionError) as e:
            bug = _compiler_frame(e)
            if bug is None:   # raised by the user's own Python (a helper, an index into a list)
                raise self.error(node, f"{type(e).__name__}: {e}") from None
            raise InternalCompilerError(
                f"compiler bug: {type(e).__name__}: {e} (in {bug}) while parsing {self.func_name}",
                self.span(node), hint="this is a mistake in tilecraft, not in your program; please report it "
                                      "with the program") from None
        except (TypeError, ValueError) as e:
            raise self.error(node, f"{type(e).__name__}: {e}") from None

    def stmt_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        value = self.eval(node.value)
        if isinstance(value, IntrinsicCall) and isinstance(value.intrinsic, Extern):  # `T.call_extern(...)` as a statement
            self.builder.emit(Evaluate(value, span=self.span(node)))

    def stmt_Pass(self, node):
        pass

    def stmt_Return(self, node):
        if getattr(self, "_macro_return", None) is not None:
            self._macro_return.append(None if node.value is None else self.eval(node.value))
            return
        if node.value is not None:
            raise self.error(node, "a @T.prim_func cannot return a value; write results into an "
                                   "output tensor (use out_idx to have it allocated)")

    def stmt_Assert(self, node):
        v = self.eval(node.test)
        if isinstance(v, Expr):  # checked when the kernel runs (language/lowlevel.py)
            from .lowlevel import assert_stmt
            msg = self.eval(node.msg) if node.msg is not None else ""
            self.builder.emit(assert_stmt(v, str(msg), self.span(node)))
            return
        if not v:
            msg = self.eval(node.msg) if node.msg is not None else "assertion failed"
            raise self.error(node, f"assertion failed at compile time: {msg}")

    def stmt_Assign(self, node):
        name = node.targets[0].id if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) else None
        self.builder.pending_name = name
        try:
            value = self.eval(node.value)
        finally:
            self.builder.pending_name = None
        for target in node.targets:
            self.assign(target, value, node)

    def stmt_AnnAssign(self, node):
        if node.value is None:
            return
        value = self.eval(node.value)
        ann = self.eval(node.annotation)
        try:
            value = cast(value, dt.dtype(ann)) if isinstance(value, (Expr, int, float)) else value
        except ValueError:
            pass
        self.assign(node.target, value, node)

    def assign(self, target, value, node):
        if isinstance(target, ast.Name):
            old, depth = None, -1
            for depth in range(len(self.scopes) - 1, -1, -1):
                if target.id in self.scopes[depth]:
                    old = self.scopes[depth][target.id]
                    break
            if 0 <= depth < len(self.scopes) - 1 and isinstance(old, Var) and old in self.let_spans:
                self._outer_let_rebound(target.id, self.let_spans[old], node)
            if isinstance(old, Buffer) and old.scope == "var" and isinstance(value, (Expr, int, float)):
                self.builder.emit(Store(old, (const(0),), cast(value, old.dtype), span=self.span(node)))
                return
            if isinstance(value, Buffer) and value.scope == "var":
                if isinstance(old, Buffer) and old.scope == "var" and old is not value and self._names_existing(value):
                    # `x = y` of two T.alloc_var scalars copies y's value into x (TileLang), it does
                    # not make x another name for y's storage
                    self.builder.emit(Store(old, (const(0),), cast(Load(value, (const(0),)), old.dtype),
                                            span=self.span(node)))
                    return
                self.bind(target.id, value)
                return
            if isinstance(value, Expr):
                var = Var(self.builder.fresh_name(target.id), value.dtype)
                self.builder.emit(Let(var, value, span=self.span(node)))
                self.let_spans[var] = self.span(node)
                self.let_values[var] = value
                self.bind(target.id, var)
            else:
                self.bind(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, Expr) or not hasattr(value, "__iter__"):
                raise self.error(node, f"cannot unpack {value!r} into {len(target.elts)} names")
            values = list(value)
            if len(values) != len(target.elts):
                raise self.error(node, f"cannot unpack {len(values)} values into {len(target.elts)} names")
            values = self._snapshot_unpacked(target.elts, values, node)
            for t, v in zip(target.elts, values):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            obj = self.eval(target.value)
            if not isinstance(obj, Buffer):
                raise self.error(node, "only buffers can be assigned by subscript inside a kernel")
            self.store(obj, self.subscript(obj, target.slice, node), value, node)
        else:
            raise self.error(node, f"cannot assign to {ast.unparse(target)}")

    def _names_existing(self, buf) -> bool:
        """Whether `buf` is already bound to a name (an existing T.alloc_var read, not a fresh one)."""
        return any(v is buf for scope in self.scopes for v in scope.values())

    def _snapshot_unpacked(self, targets, values, node) -> list:
        """`a[0], a[1] = a[1], a[0]`: Python evaluates every right-hand value before it assigns any.
        Values that read a buffer one of the targets writes (an element store, or a T.alloc_var
        name) are taken into lets first, so a later store cannot see an earlier one's result."""
        written = set()
        for t in targets:
            if isinstance(t, ast.Subscript):
                obj = self.eval(t.value)
                if isinstance(obj, Buffer):
                    written.add(id(obj))
            elif isinstance(t, ast.Name) and self.is_kernel_name(t.id):
                old = self.lookup(t.id, t)
                if isinstance(old, Buffer) and old.scope == "var":
                    written.add(id(old))
        if not written:
            return values
        out = []
        for v in values:
            if isinstance(v, Buffer) and v.scope == "var" and id(v) in written and self._names_existing(v):
                v = Load(v, (const(0),))
            if isinstance(v, Expr) and any(id(ld.buffer) in written for ld in collect(v, lambda n: isinstance(n, Load))):
                var = Var(self.builder.fresh_name("unpacked"), v.dtype)
                self.builder.emit(Let(var, v, span=self.span(node)))
                self.let_values[var] = v
                v = var
            out.append(v)
        return out

    def _outer_let_rebound(self, name, outer, node):
        """`x = ...` inside an `if`/loop body for an `x` bound (as a let) outside it: Python would
        mutate x, a kernel let cannot be mutated — refuse instead of silently shadowing."""
        where = f" (bound at line {outer.line})" if outer is not None else ""
        raise self.error(
            node, f"`{name} = ...` inside this block binds a new value visible only inside the block: "
                  f"the `{name}` of the enclosing scope{where} is a kernel value (a let) and keeps its "
                  f"old value after the block",
            hint=f"for a scalar you update in a branch or loop, declare it mutable: "
                 f"`{name} = T.alloc_var(dtype)` before the block, then `{name} = ...` stores into it; "
                 f"or use a different name for the block-local value")

    def store(self, buf, where, value, node):
        value = self.value(value, node)  # a T.alloc_var scalar stored into an element
        if isinstance(where, Region):
            raise self.error(node, f"cannot assign to a slice of {buf.name}; use T.fill or a T.Parallel loop")
        if isinstance(value, (Buffer, Region)):
            raise self.error(node, f"cannot store a whole tile into an element of {buf.name}; use T.copy")
        try:
            v = cast(as_expr(value, buf.dtype), buf.dtype)
        except TypeError as e:
            raise self.error(node, f"cannot store {value!r} into {buf.name} ({buf.dtype}): {e}") from None
        self.builder.emit(Store(buf, where.indices, v, span=self.span(node)))

    def stmt_AugAssign(self, node):
        op = _BINOPS[type(node.op)]
        target = node.target
        if isinstance(target, ast.Subscript):
            obj = self.eval(target.value)
            if not isinstance(obj, Buffer):
                raise self.error(node, "only buffers can be updated by subscript inside a kernel")
            where = self.subscript(obj, target.slice, node)
            self.store(obj, where, self.binop(op, where, self.eval(node.value), node), node)
        elif isinstance(target, ast.Name):
            cur = self.lookup(target.id, target)
            cur_val = Load(cur, (const(0),)) if isinstance(cur, Buffer) and cur.scope == "var" else cur
            self.assign(target, self.binop(op, cur_val, self.eval(node.value), node), node)
        else:
            raise self.error(node, f"cannot update {ast.unparse(target)}")

    def stmt_If(self, node):
        cond = self.value(self.eval(node.test), node)
        if not isinstance(cond, Expr):
            self.block_inline(node.body if cond else node.orelse)
            return
        then = self.block(node.body, new_scope=True)
        orelse = self.block(node.orelse, new_scope=True) if node.orelse else None
        self.builder.emit(If(cast(cond, dt.bool_), then, orelse, span=self.span(node)))

    def block_inline(self, stmts):
        for s in stmts:
            self.stmt(s)

    def stmt_With(self, node):
        if len(node.items) > 1:  # `with A, B:` is `with A: with B:` (T.Kernel(...) as bx, iket.range(...))
            inner = ast.copy_location(ast.With(items=node.items[1:], body=node.body), node)
            node = ast.copy_location(ast.With(items=node.items[:1], body=[inner]), node)
        item = node.items[0]
        spec = self.eval(item.context_expr)
        if isinstance(spec, AttrScope):  # `with T.attr(...)`: a hint; the body is ordinary code
            reducer = spec.key == "reduce_scope"  # ... or the combiner of T.tvm_thread_allreduce (language/lowlevel.py)
            if reducer:
                self.builder.reducers.append(spec.node)
            try:
                self.block_inline(node.body)
            finally:
                if reducer:
                    self.builder.reducers.pop()
            return
        if hasattr(spec, "build_scope"):  # `with T.ws(0):` (language/hopper.py): a statement around the body
            if self.builder.kernel is None:
                raise self.error(node, f"`with {ast.unparse(item.context_expr)}` must be inside `with T.Kernel(...)`")
            self.builder.emit(spec.build_scope(self.block(node.body, new_scope=True)))
            return
        if not isinstance(spec, KernelSpec):
            raise self.error(node, f"unsupported `with` target {ast.unparse(item.context_expr)}; only "
                                   f"`with T.Kernel(...) as ...:` is supported")
        if self.builder.kernel is not None:
            raise self.error(node, "T.Kernel cannot be nested inside another T.Kernel")
        tgt = item.optional_vars
        names = [] if tgt is None else [tgt] if isinstance(tgt, ast.Name) else list(tgt.elts)
        if len(names) > len(spec.grid):
            raise self.error(node, f"T.Kernel has {len(spec.grid)} grid dimension(s) but binds {len(names)} names")
        block_vars = tuple(Var(self.builder.fresh_name(n.id if i < len(names) else "bxyz"[i]))
                           for i, n in enumerate(names + [None] * (len(spec.grid) - len(names))))
        frame = KernelFrame(spec, block_vars)
        frame.body_depth = len(self.builder.blocks)  # blocks[body_depth]: the kernel body while it is parsed
        self.builder.kernel = frame
        self.scopes.append({})
        try:
            for n, v in zip(names, block_vars):
                self.bind(n.id, v)
            body = self.block(node.body)
        finally:
            self.scopes.pop()
            self.builder.kernel = None
        grid = tuple(as_expr(g) for g in spec.grid)
        from .grid_sync import split  # T.sync_grid(): one kernel per stretch between grid barriers
        for part in split(Kernel(grid, block_vars, spec.threads, body, frame.thread_vars, cluster=spec.cluster,
                                 span=self.span(node))):
            self.builder.emit(part)

    for _bad in ("Continue", "FunctionDef", "ClassDef", "Try", "Raise", "Delete",
                 "Global", "Nonlocal", "Import", "ImportFrom"):
        locals()["stmt_" + _bad] = (lambda kind: lambda self, node: (_ for _ in ()).throw(
            self.error(node, f"`{kind.lower()}` is not supported inside a kernel body")))(_bad)

    # ---- macros -----------------------------------------------------------------------------
    def inline_macro(self, m: Macro, args, kwargs):
        depth = sum(1 for p in _active_parsers() if p.fn is m.fn)
        if depth >= MACRO_DEPTH:
            raise TilecraftError(
                f"T.macro {m.__name__} calls itself {depth} times deep: a macro is inlined at each call while the "
                f"kernel is built, so a macro that calls itself must stop on a Python value (a base case on a "
                f"compile-time argument) within {MACRO_DEPTH} levels", self.builder.span or caller_span(),
                hint="recurse on a Python int that shrinks at each call, or write a loop")
        sub = Parser(m.fn)
        sub.builder = self.builder
        sub.let_spans = self.let_spans
        sub.let_values = self.let_values
        sub.scopes = [{}]
        sig = inspect.signature(m.fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TilecraftError(f"bad call of T.macro {m.__name__}: {e}") from None
        bound.apply_defaults()
        for k, v in bound.arguments.items():
            sub.bind(k, v)
        sub._macro_return = []
        saved_span = self.builder.span
        _active_parsers().append(sub)
        try:
            for s in sub.node.body:
                sub.stmt(s)
                if sub._macro_return:
                    break
        finally:
            _active_parsers().pop()
            self.builder.span = saved_span
        return sub._macro_return[0] if sub._macro_return else None


def prim_func(fn=None, **_):
    """Parse a kernel function into a `PrimFunc` (decorator)."""
    if fn is None:
        return lambda f: prim_func(f)
    if isinstance(fn, PrimFunc):
        return fn
    frame = inspect.currentframe()
    caller = frame.f_back.f_locals if frame is not None and frame.f_back is not None else None
    if caller is not None and caller.get("fn") is fn and frame.f_back.f_back is not None:
        caller = frame.f_back.f_back.f_locals  # called as prim_func()(fn)
    try:
        return Parser(fn, caller).parse()
    except TilecraftError as e:
        raise e.with_traceback(None) from None
