"""TileLang's kernel-body jit style: the `@tilelang.jit` function *is* the kernel.

    @tilelang.jit
    def scale(x, y, n_thr: int = 128):
        n = T.dynamic("n")
        x: T.Tensor((n,), T.float32)           # tensor parameters, declared in the body
        y: T.Tensor((n,), T.float32)
        with T.Kernel(T.ceildiv(n, n_thr), threads=n_thr) as bx:
            ...
    scale(x_tensor, y_tensor)                  # compiles for these Python arguments, then runs

A call binds the arguments; the parameters annotated in the body (`x: T.Tensor(...)`) take the
tensors, every other argument is a compile-time Python value.  The statements before the first
`with T.Kernel` run as ordinary Python (sizes, `T.dynamic` symbols, asserts); the kernel blocks are
parsed as a `@T.prim_func` body whose parameters are the annotated tensors, in signature order.
Kernels are cached per value of the Python arguments (and the jit's options); the call launches on
the tensors and returns what the kernel returns (outputs are passed in by the caller).
"""
from __future__ import annotations

import ast
import copy

from .errors import TilecraftError
from .language.types import TensorSpec


def _is_kernel_with(stmt) -> bool:
    if not isinstance(stmt, ast.With) or len(stmt.items) != 1:
        return False
    call = stmt.items[0].context_expr
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "Kernel"


def is_kernel_body_jit(fn) -> bool:
    """Whether `fn`'s own body holds a `with T.Kernel(...)` (the kernel-body style)."""
    from .language.parser import _function_ast
    try:
        node = _function_ast(fn)[0]
    except TilecraftError:
        return False
    return any(_is_kernel_with(s) for s in node.body)


class KernelBodyJit:
    """Builds and runs the kernels of one kernel-body jit function (see the module docstring)."""

    def __init__(self, fn):
        from .language.parser import _function_ast
        self.fn = fn
        self.node, self.file, self.line_offset, self.source = _function_ast(fn)
        first = next(i for i, s in enumerate(self.node.body) if _is_kernel_with(s))
        self.prelude, self.kernel_stmts = self.node.body[:first], self.node.body[first:]
        self.tensor_names = [s.target.id for s in self.prelude
                             if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is None]

    def _error(self, node, message):
        from .ir import Span
        line = getattr(node, "lineno", 1)
        text = self.source.splitlines()[line - 1] if line <= len(self.source.splitlines()) else ""
        return TilecraftError(message, Span(self.file, line + self.line_offset, getattr(node, "col_offset", 0),
                                            text, self.fn.__name__))

    def build(self, arguments: dict):
        """The PrimFunc for these bound arguments (tensor arguments are not looked at)."""
        from .language.parser import Parser, _python_env
        ns = _python_env(self.fn)
        ns.update({k: v for k, v in arguments.items() if k not in self.tensor_names})
        specs = {}
        for stmt in self.prelude:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is None:
                name = stmt.target.id
                if name not in arguments:
                    raise self._error(stmt, f"{name} is declared as a tensor but is not a parameter of "
                                            f"{self.fn.__name__}")
                spec = eval(compile(ast.Expression(stmt.annotation), self.file, "eval"), ns)  # noqa: S307
                if not isinstance(spec, TensorSpec):
                    raise self._error(stmt, f"{name}: a tensor parameter is declared as T.Tensor(shape, dtype), "
                                            f"got {spec!r}")
                specs[name] = spec
                continue
            mod = ast.Module([stmt], type_ignores=[])
            ast.increment_lineno(mod, self.line_offset)
            try:
                exec(compile(mod, self.file, "exec"), ns)  # noqa: S102 - the user's own statements
            except TilecraftError:
                raise
            except Exception as e:  # noqa: BLE001 - the user's statement failed: name it
                raise self._error(stmt, f"{type(e).__name__}: {e}") from None
        order = [n for n in self.fn.__code__.co_varnames[:self.fn.__code__.co_argcount] if n in specs]
        for n in order:
            ns[f"__tc_tensor_{n}"] = specs[n]
        fdef = copy.copy(self.node)
        fdef.decorator_list = []
        fdef.args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=n, annotation=ast.Name(id=f"__tc_tensor_{n}",
                                                                                      ctx=ast.Load()),
                                                                lineno=self.node.lineno, col_offset=0)
                                                        for n in order],
                                  kwonlyargs=[], kw_defaults=[], defaults=[])
        fdef.body = [s for s in self.kernel_stmts if not isinstance(s, ast.Return)]
        parser = Parser(self.fn)
        parser.node = fdef
        parser.env = ns
        return parser.parse(), order
