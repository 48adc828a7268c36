"""TileLang's eager jit style: the `@tilelang.jit` function *is* the kernel.

    @tilelang.jit
    def matmul(A, B, block_M: int = 128, dtype=T.float16):
        M, N, K = T.const("M, N, K")           # shape names, bound from the call's tensors
        A: T.Tensor((M, K), dtype)             # the parameter A is this tensor
        B: T.Tensor((K, N), dtype)
        C = T.empty((M, N), dtype)             # an output, allocated by the call and returned
        with T.Kernel(T.ceildiv(N, block_M), T.ceildiv(M, block_M), threads=128) as (bx, by):
            ...
        return C

    c = matmul(a, b)                           # specializes, compiles (once), runs, returns C
    k = matmul.compile(M=1024, N=1024, K=1024) # or binds the consts explicitly: k(a, b)

Parameters: those declared as tensors (`A: T.Tensor(...)` in the body, or annotated so in the
signature) are the kernel's tensor arguments; every other parameter is a compile-time Python value
(dtypes, block sizes, flags).  Keyword arguments that are not parameters bind `T.const` names
explicitly.  The statements before the first `with T.Kernel` run as ordinary Python: first with
every `T.const` a symbol ("the probe", once per set of compile-time values) to learn which tensor
dimension binds each name, then with the bound ints (once per distinct set of values), so sizes
derived from them fold at compile time.  `T.dynamic` sizes stay symbolic: one kernel serves every
value.  The kernel blocks are parsed as a `@T.prim_func` whose parameters are the tensor
parameters in signature order, then the `T.empty` outputs in the order the function returns them
(they are the kernel's `out_idx`).  A kernel is cached per (compile-time values, const values,
the jit's options).
"""
from __future__ import annotations

import ast
import copy
import inspect
import threading
from dataclasses import dataclass

from .errors import TilecraftError
from .ir import Expr, Span, Var, const
from .ir.dtype import DType
from .language.eager import EagerScope, OutputSpec, eager_scope
from .language.types import TensorSpec
from .jit_eager_args import AffineDims, CallBinding, _is_const


def _is_kernel_with(stmt) -> bool:
    if not isinstance(stmt, ast.With) or len(stmt.items) != 1:
        return False
    call = stmt.items[0].context_expr
    # T.Kernel, and the forms that wrap it (T.ClusterKernel)
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr.endswith("Kernel")


def is_kernel_body_jit(fn) -> bool:
    """Whether `fn`'s own body holds a `with T.Kernel(...)` (the eager style)."""
    from .language.parser import _function_ast
    try:
        node = _function_ast(fn)[0]
    except TilecraftError:
        return False
    return any(_is_kernel_with(s) for s in node.body) or any(_declares_eagerly(s) for s in node.body)


def _declares_eagerly(stmt) -> bool:
    """`A: T.Tensor(...)` (no value) or a top-level call of T.const / T.empty: only the eager style has them."""
    if isinstance(stmt, ast.AnnAssign) and stmt.value is None and _looks_like_tensor(stmt.annotation):
        return True
    value = getattr(stmt, "value", None)
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("const", "empty")


def _looks_like_tensor(node) -> bool:
    """An annotation spelled `T.Tensor(...)` / `T.Tensor[...]` / `T.Buffer(...)` (before it can be evaluated)."""
    if isinstance(node, (ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return isinstance(node, (ast.Attribute, ast.Name)) and \
        (node.attr if isinstance(node, ast.Attribute) else node.id) in ("Tensor", "Buffer", "StridedTensor")


@dataclass(frozen=True)
class Probe:
    """What the symbolic run of the statements found: per T.const name its symbol, and the tensor
    parameter and dimension that binds it (None: only an explicit keyword can)."""
    consts: dict          # name -> Var
    binders: dict         # name -> (tensor name, dim) or None
    specs: dict           # tensor name -> TensorSpec (shapes in terms of the symbols)
    lines: dict           # tensor name -> the ast node declaring it (for errors)
    scalars: dict         # scalar parameter name -> DType


@dataclass(frozen=True)
class Built:
    kernel: object        # JITKernel
    inputs: tuple         # tensor and by-value scalar parameter names, in kernel order (outputs excluded)


class EagerJit(CallBinding):
    """Builds, caches and runs the kernels of one eager-style jit function (module docstring)."""

    def __init__(self, fn, compile_kwargs: dict):
        from .language.parser import _function_ast
        self.fn = fn
        self.compile_kwargs = compile_kwargs
        self.node, self.file, self.line_offset, self.source = _function_ast(fn)
        self.lines = self.source.splitlines()
        body = self.node.body
        # the statements before the first one holding a `with T.Kernel` (an `if` on a Python value may)
        first = next((i for i, s in enumerate(body) if any(_is_kernel_with(n) for n in ast.walk(s))), None)
        if first is None:
            raise self._error(self.node, f"{fn.__name__}: an eager @tilelang.jit function (T.const, T.empty, tensors "
                                         f"declared in its body) holds its kernel: a `with T.Kernel(...)` in its body")
        self.prelude, rest = body[:first], body[first:]
        returns = [s for s in rest if isinstance(s, ast.Return)]
        if len(returns) > 1:
            raise self._error(returns[1], "an eager @tilelang.jit function returns once, after its kernels "
                                          "(`return C` or `return C, D`: the T.empty outputs)")
        self.ret = returns[0] if returns else None
        self.kernel_stmts = [s for s in rest if not isinstance(s, ast.Return)]
        self.signature = inspect.signature(fn)
        self.param_names = list(self.signature.parameters)
        self.has_var_kw = any(p.kind is p.VAR_KEYWORD for p in self.signature.parameters.values())
        declared = [s.target.id for s in self.prelude
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is None]
        sig_ann = {a.arg: a.annotation for a in self.node.args.args + self.node.args.kwonlyargs
                   if a.annotation is not None}
        self.sig_tensors = {n for n, a in sig_ann.items() if self._signature_kind(n, a) == "tensor"}
        self.sig_scalars = {n: self._signature_value(n) for n, a in sig_ann.items()
                            if self._signature_kind(n, a) == "scalar"}
        self.runtime = [n for n in self.param_names if n in declared or n in self.sig_tensors or n in self.sig_scalars]
        self._probes: dict = {}
        self._warned_scalars = False
        self._kernels: dict = {}
        self._compiled: dict = {}   # id of a prelude statement (held by self.prelude) -> its code
        self._lock = threading.Lock()

    def _prelude_code(self, stmt):
        """A prelude statement compiled once, at its line in the file.  The statement's own AST stays as
        parsed (lines counted from the function's first): incrementing it in place, as each call once did,
        moved every later call's error message further down the file."""
        code = self._compiled.get(id(stmt))
        if code is None:
            mod = ast.Module([copy.deepcopy(stmt)], type_ignores=[])
            ast.increment_lineno(mod, self.line_offset)
            code = self._compiled[id(stmt)] = compile(mod, self.file, "exec")
        return code

    # ---- errors -----------------------------------------------------------------------------
    def _span(self, node) -> Span:
        line = getattr(node, "lineno", 1)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return Span(self.file, line + self.line_offset, getattr(node, "col_offset", 0), text, self.fn.__name__)

    def _error(self, node, message, hint=None):
        return TilecraftError(message, self._span(node), hint=hint)

    def _signature_value(self, name):
        value = self.fn.__annotations__.get(name)
        if isinstance(value, str) and not isinstance(value, DType):
            from .language.parser import _python_env
            value = eval(value, _python_env(self.fn))  # noqa: S307 - the user's own annotation
        return value

    def _signature_kind(self, name, ann) -> str:
        """'tensor', 'scalar' (a dtype: a run-time scalar in TileLang) or 'python' (a compile-time value)."""
        value = self.fn.__annotations__.get(name)
        if isinstance(value, str) and not isinstance(value, DType):  # a DType is a str too
            if _looks_like_tensor(ann):
                return "tensor"
            from .language.parser import _python_env
            try:
                value = eval(value, _python_env(self.fn))  # noqa: S307 - the user's own annotation
            except Exception:  # noqa: BLE001 - refers to names of the body: a compile-time value
                return "python"
        if isinstance(value, TensorSpec):
            return "tensor"
        if isinstance(value, DType):
            return "scalar"
        return "python"

    # ---- binding a call ---------------------------------------------------------------------
    def bind(self, args, kwargs, need_tensors: bool):
        """(compile-time values, tensors given, explicit const values) for a call or a compile."""
        extra = {k: v for k, v in kwargs.items() if k not in self.signature.parameters}
        if extra and self.has_var_kw:
            extra = {}
        given = {k: v for k, v in kwargs.items() if k not in extra}
        try:
            bound = self.signature.bind_partial(*args, **given)
        except TypeError as e:
            raise TypeError(f"{self.fn.__name__}(): {e}") from None
        bound.apply_defaults()
        values = dict(bound.arguments)
        missing = [n for n in self.param_names if n not in values and
                   self.signature.parameters[n].kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                             inspect.Parameter.VAR_KEYWORD)]
        python_missing = [n for n in missing if n not in self.runtime]
        if python_missing:
            raise TypeError(f"{self.fn.__name__}(): missing a required argument: {python_missing[0]!r}")
        if need_tensors and missing:
            raise TypeError(f"{self.fn.__name__}(): missing the argument {missing[0]!r}")
        statics = {k: v for k, v in values.items() if k not in self.runtime}
        tensors = {k: v for k, v in values.items() if k in self.runtime and v is not None}
        if need_tensors and len(tensors) < len(self.runtime):
            n = next(n for n in self.runtime if n not in tensors)
            raise TypeError(f"{self.fn.__name__}(): the tensor argument {n!r} is None")
        return statics, tensors, extra

    def _key(self, statics, extra=()):
        from . import env
        from .engine.callback import memo_key as postproc_key
        from .jit import _freeze
        from .target import default_target_key
        return (_freeze(tuple(statics.items())), _freeze(tuple(sorted(dict(extra).items()))),
                repr(sorted(env.default_pass_configs().items())),
                default_target_key() if self.compile_kwargs.get("target") in (None, "auto") else None,
                postproc_key())   # a CUDA post-processing callback registered since: a new kernel

    # ---- running the statements before the kernel --------------------------------------------
    def _namespace(self, statics):
        from .language.parser import _python_env
        ns = _python_env(self.fn)
        ns.update(statics)
        return ns

    def _declared_spec(self, stmt, ns):
        name = stmt.target.id
        if name not in self.signature.parameters:
            raise self._error(stmt, f"{name} is declared as a tensor but is not a parameter of {self.fn.__name__}")
        spec = self._eval(stmt.annotation, ns, stmt)
        if isinstance(spec, DType):
            return spec
        if not isinstance(spec, TensorSpec):
            raise self._error(stmt, f"{name}: a tensor parameter is declared as T.Tensor(shape, dtype) (or a scalar as "
                                    f"a dtype, `{name}: T.int32`), got {spec!r}")
        return spec

    def _eval(self, expr, ns, stmt):
        try:
            return eval(compile(ast.Expression(expr), self.file, "eval"), ns)  # noqa: S307 - the user's code
        except TilecraftError as e:
            raise e.with_span(self._span(stmt)) from None
        except Exception as e:  # noqa: BLE001 - the user's expression failed: name it
            raise self._error(stmt, f"{type(e).__name__}: {e}") from None

    def _run(self, statics, scope: EagerScope, scalars=None):
        """Run the statements before the kernel; returns (namespace, declarations by name: a TensorSpec
        per tensor parameter, a DType per scalar parameter).  A scalar given in `scalars` is a constant
        of its dtype, any other a symbol (while probing, and for a scalar passed by value)."""
        ns = self._namespace(statics)
        specs = {}

        def scalar(name, d):
            specs[name] = d
            ns[name] = const(scalars[name], d) if scalars is not None and name in scalars else Var(name, d)

        for name, d in self.sig_scalars.items():
            scalar(name, d)
        with eager_scope(scope):
            for stmt in self.prelude:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is None:
                    spec = self._declared_spec(stmt, ns)
                    if isinstance(spec, DType):
                        scalar(stmt.target.id, spec)
                    else:
                        specs[stmt.target.id] = spec
                    continue
                try:
                    exec(self._prelude_code(stmt), ns)  # noqa: S102 - the user's own statements
                except TilecraftError as e:
                    if scope.probing and isinstance(e, TypeError):  # a KernelValueError: Python needed an int
                        if isinstance(stmt, ast.Assert):
                            continue
                        if not scope.sentinel:
                            raise _NeedsInts(stmt, e) from None
                    raise e.with_span(self._span(stmt)) from None
                except Exception as e:  # noqa: BLE001 - the user's statement failed: name it
                    if scope.probing and isinstance(stmt, ast.Assert) and isinstance(e, (TypeError, AssertionError)):
                        continue  # an assert on a T.const: checked when the values are bound
                    if scope.probing and not scope.sentinel and scope.consts and \
                            isinstance(e, (TypeError, ValueError, AttributeError)):
                        raise _NeedsInts(stmt, e) from None
                    hint = None
                    if scope.sentinel:
                        hint = (f"this ran while tilecraft learns which tensor dimension binds each T.const "
                                f"({', '.join(scope.consts)}), each standing for a large placeholder int")
                    raise self._error(stmt, f"{type(e).__name__}: {e}", hint=hint) from None
            for name in self.runtime:
                if name not in specs and name in self.sig_tensors:
                    arg = next(a for a in self.node.args.args + self.node.args.kwonlyargs if a.arg == name)
                    spec = self.fn.__annotations__.get(name)
                    specs[name] = spec if isinstance(spec, TensorSpec) else self._eval(arg.annotation, ns, arg)
        return ns, specs

    def probe(self, statics, key=None) -> Probe:
        key = self._key(statics) if key is None else key
        p = self._probes.get(key)
        if p is not None:
            return p
        scope = EagerScope()
        try:
            _, decls = self._run(statics, scope)
        except _NeedsInts:  # Python code that needs ints: probe with a distinct large int per name
            scope = EagerScope(sentinel=True)
            _, decls = self._run(statics, scope)
        specs = {n: d for n, d in decls.items() if isinstance(d, TensorSpec)}
        binders = {}
        for name, var in scope.consts.items():
            binders[name] = next(((t, d) for t in self.runtime if t in specs
                                  for d, s in enumerate(specs[t].shape) if _is_const(s, var)), None)
        decl = {s.target.id: s for s in self.prelude if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        decl.update({a.arg: a for a in self.node.args.args + self.node.args.kwonlyargs if a.arg in self.sig_tensors})
        p = Probe(dict(scope.consts), binders, specs, decl,
                  {n: d for n, d in decls.items() if isinstance(d, DType)})
        self._probes[key] = p
        return p

    def build(self, statics, values, scalars=None):
        """(PrimFunc, input names, out_idx, size relations) for these compile-time values, const and
        scalar values."""
        scope = EagerScope(values=dict(values))
        ns, decls = self._run(statics, scope, scalars or {})
        affine = AffineDims()
        specs = {n: TensorSpec(affine.plain(d.shape, f"tensor {n}", self._span(self._decl_node(n))), d.dtype)
                 for n, d in decls.items() if isinstance(d, TensorSpec)}
        outputs = self._returned(ns, scope)
        # the tensors and the scalars passed by value (a symbol here), in signature order
        inputs = [n for n in self.runtime if n in specs or (isinstance(decls.get(n), DType) and isinstance(ns.get(n), Var))]
        order = inputs + [o.name for o in outputs]
        all_specs = dict(specs)
        all_specs.update({o.name: TensorSpec(affine.plain(o.shape, f"output {o.name}", o.span), o.dtype)
                          for o in outputs})
        relations = affine.check_bound([specs[n].shape for n in inputs if n in specs])
        fdef = copy.copy(self.node)
        fdef.decorator_list = []
        fdef.returns = None
        fdef.args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=n, annotation=ast.Constant(value=n),
                                                                lineno=self._decl_line(n, outputs), col_offset=0)
                                                        for n in order],
                                  kwonlyargs=[], kw_defaults=[], defaults=[])
        fdef.body = self.kernel_stmts
        from .language.parser import Parser

        class _EagerParser(Parser):
            def param(self, arg):
                self.fn_specs = all_specs
                if arg.arg not in all_specs:  # a scalar passed by value: the symbol the statements used
                    return self._scalar_param(arg, decls[arg.arg], var=ns[arg.arg])
                return self._param_from_spec(arg, all_specs[arg.arg])

        parser = _EagerParser(self.fn)
        parser.node = fdef
        parser.env = ns
        func = parser.parse()
        nin = len(inputs)
        return func, tuple(inputs), list(range(nin, nin + len(outputs))), relations

    def _decl_node(self, name):
        for s in self.prelude:
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.target.id == name:
                return s
        return next((a for a in self.node.args.args + self.node.args.kwonlyargs if a.arg == name), self.node)

    def _decl_line(self, name, outputs):
        for o in outputs:
            if o.name == name and o.span is not None:
                return o.span.line - self.line_offset
        return getattr(self._decl_node(name), "lineno", self.node.lineno)

    def _returned(self, ns, scope) -> list:
        """The T.empty outputs in the order the function returns them (every one, once)."""
        outs = scope.outputs
        if not outs:
            if self.ret is not None and self.ret.value is not None:
                raise self._error(self.ret, "an eager @tilelang.jit function returns only tensors made by T.empty "
                                            "(this one makes none)")
            return []
        for o in outs:
            names = [k for k, v in ns.items() if v is o]
            if not names:
                raise TilecraftError(f"{self.fn.__name__}: the output {o!r} is not bound to a name; write "
                                     f"`C = T.empty(...)`", o.span)
            o.name = names[0]
        if self.ret is None or self.ret.value is None:
            raise TilecraftError(f"{self.fn.__name__}: T.empty output(s) {', '.join(o.name for o in outs)} are made "
                                 f"but not returned; end the function with `return "
                                 f"{', '.join(o.name for o in outs)}`", outs[0].span)
        value = self._eval(self.ret.value, ns, self.ret)
        value = list(value) if isinstance(value, (tuple, list)) else [value]
        seen = []
        for v in value:
            if not isinstance(v, OutputSpec) or v not in outs:
                raise self._error(self.ret, f"an eager @tilelang.jit function returns only tensors made by T.empty, "
                                            f"got {v!r}")
            if any(v is s for s in seen):
                raise self._error(self.ret, f"{v.name} is returned twice")
            seen.append(v)
        left = [o.name for o in outs if not any(o is s for s in seen)]
        if left:
            raise self._error(self.ret, f"not every T.empty output is returned: {', '.join(left)} missing")
        return seen

    # ---- the entry points ---------------------------------------------------------------------
    def kernel_for(self, args, kwargs, need_tensors: bool):
        """(Built, tensors given) for a call or a compile."""
        statics, tensors, extra = self.bind(args, kwargs, need_tensors)
        static_key = self._key(statics)
        probe = self.probe(statics, static_key)
        scalars, by_value = self.scalar_values(probe, tensors, calling=need_tensors)
        values = self.const_values(probe, tensors, extra)
        self.check_shapes(probe, tensors, values, extra)
        tensors.update(by_value)
        key = (static_key, tuple(sorted(values.items())), _freeze_scalars(scalars))
        built = self._kernels.get(key)
        if built is None:
            func, inputs, out_idx, relations = self.build(statics, values, scalars)
            from .jit import compile as compile_func
            kw = dict(self.compile_kwargs)
            kw["out_idx"] = out_idx or None
            kernel = compile_func(func, **kw)
            if relations:
                kernel._relations = relations  # sizes that are expressions of others: checked per call
            built = Built(kernel, inputs)
            with self._lock:
                self._kernels[key] = built
        return built, tensors

    def __call__(self, args, kwargs):
        built, tensors = self.kernel_for(args, kwargs, need_tensors=True)
        return built.kernel(*[tensors[n] for n in built.inputs])

    def compile(self, args, kwargs):
        return self.kernel_for(args, kwargs, need_tensors=False)[0].kernel

    def get_tir(self, args, kwargs):
        statics, tensors, extra = self.bind(args, kwargs, need_tensors=False)
        probe = self.probe(statics)
        scalars, _ = self.scalar_values(probe, tensors, calling=False)
        values = self.const_values(probe, tensors, extra)
        return self.build(statics, values, scalars)[0]


class _NeedsInts(Exception):
    """A statement before the kernel failed with the T.consts as symbols (it branches on them)."""


def _freeze_scalars(scalars: dict) -> tuple:
    return tuple(sorted((k, type(v).__name__, v) for k, v in scalars.items()))
