"""Binding an eager jit call's arguments to what the probe learned (jit_eager.py): the `T.const`
values (an explicit keyword, else the tensor dimension that binds the name), each tensor's sizes
checked against them (a message naming the tensor, the dimension and both values, at the line
declaring the tensor), and the scalar parameters' values (int32 ones passed by value, others compiled in as constants)."""
from __future__ import annotations

import inspect
import operator
from typing import TYPE_CHECKING

from .errors import TilecraftError
from .ir import Expr, Var
from .ir import dtype as dt

if TYPE_CHECKING:
    from .jit_eager import Probe


class CallBinding:
    """The argument side of `EagerJit` (a mixin: it uses the jit's `fn`, `_span`, `_decl_node`)."""

    def const_values(self, probe: Probe, tensors, extra) -> dict:
        unknown = [k for k in extra if k not in probe.binders]
        if unknown:
            consts = ", ".join(probe.binders) or "none"
            from .jit import jit  # @jit's own keywords, given at a call by mistake
            hint = (f"; a compile option goes in the decorator: @tilelang.jit({unknown[0]}=...)"
                    if unknown[0] in inspect.signature(jit).parameters else "")
            raise TypeError(f"{self.fn.__name__}() got an unexpected keyword argument {unknown[0]!r}: it is neither "
                            f"a parameter nor a T.const of the kernel (T.const: {consts}){hint}")
        values = {}
        for name, where in probe.binders.items():
            if name in extra:
                values[name] = extra[name]
                continue
            if where is not None and where[0] in tensors:
                t, d = where
                shape = self._shape_of(tensors[t], t, probe)
                if d >= len(shape):
                    raise self._rank_error(probe, t, shape)
                values[name] = int(shape[d])
                continue
            how = (f"it is dimension {where[1]} of {where[0]}: pass {where[0]}, or" if where else
                   "no tensor parameter has it as a dimension:")
            raise TilecraftError(f"{self.fn.__name__}: no value for T.const {name!r}: {how} give it as a keyword "
                                 f"({name}=...)", self._span(probe.lines.get(where[0]) if where else self.node))
        for name, v in values.items():
            try:
                values[name] = v = operator.index(v)  # numpy / torch integers too
            except TypeError:
                v = None
            if v is None or isinstance(v, bool) or v < 0:
                raise TilecraftError(f"{self.fn.__name__}: T.const {name} must be a non-negative int, got "
                                     f"{extra.get(name)!r}", self._span(self.node))
        return values

    @staticmethod
    def _shape_of(t, name, probe):
        shape = getattr(t, "shape", None)
        if shape is None:
            raise TypeError(f"parameter {name!r} is declared as {probe.specs[name]!r} but got a {type(t).__name__}")
        spec = probe.specs.get(name)
        if shape and getattr(getattr(spec, "dtype", None), "packed", False):
            # int4: the torch int8 tensor holds two elements a byte along its last dimension
            return tuple(shape[:-1]) + (2 * int(shape[-1]),)
        return tuple(shape)

    def _rank_error(self, probe, t, shape):
        spec = probe.specs[t]
        return TilecraftError(f"{self.fn.__name__}: tensor {t} is declared with {len(spec.shape)} dimensions "
                              f"{_show(spec.shape)} but the call passes one of shape {tuple(shape)}",
                              self._span(probe.lines[t]))

    def check_shapes(self, probe: Probe, tensors, values, extra):
        """Each tensor's sizes against the T.const values bound elsewhere (a clear message naming the
        tensor, the dimension and both values, at the line declaring the tensor)."""
        for t, spec in probe.specs.items():
            if t not in tensors:
                continue
            shape = self._shape_of(tensors[t], t, probe)
            if len(shape) != len(spec.shape):
                raise self._rank_error(probe, t, shape)
            for d, s in enumerate(spec.shape):
                name = next((n for n, v in probe.consts.items() if _is_const(s, v)), None)
                if name is None or int(shape[d]) == values[name]:
                    continue
                where = probe.binders[name]
                src = (f"given as {name}={values[name]}" if name in extra else
                       f"bound to {values[name]} by dimension {where[1]} of {where[0]}")
                raise TilecraftError(
                    f"{self.fn.__name__}: dimension {d} of tensor {t} is the T.const {name}, {src}, but {t} has "
                    f"{int(shape[d])} there (shape {tuple(shape)})", self._span(probe.lines[t]))

    # ---- building ---------------------------------------------------------------------------

    def scalar_values(self, probe: Probe, tensors, calling: bool) -> tuple[dict, dict]:
        """The values of the scalar parameters (`s: T.int32`), taken out of `tensors`: (compiled in,
        passed by value).  TileLang passes scalars at run time; tilecraft passes int32 scalars by value
        (one kernel for every value, `PrimFunc.scalars`) unless a tensor's size uses them or `.compile`
        was given a value for them, and compiles any other dtype in as a constant (the same results; a
        new kernel per value, said once in a PerformanceWarning)."""
        compiled, by_value = {}, {}
        sized = {s.name for spec in probe.specs.values() for d in spec.shape for s in _vars_of(d)}
        for name, d in probe.scalars.items():
            runtime = d is dt.int32 and name not in sized
            if name not in tensors:
                if runtime and not calling:
                    continue  # .compile without a value: the kernel takes it at each call
                raise TilecraftError(f"{self.fn.__name__}: the scalar parameter {name} ({d}) needs a value: tilecraft "
                                     f"compiles it into the kernel (give {name}=... to .compile too)",
                                     self._span(self._decl_node(name)))
            v = tensors.pop(name)
            if hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
                v = v.item()
            ok = isinstance(v, (int, float)) and (not d.is_int or (isinstance(v, int) and not isinstance(v, bool))
                                                  or d.is_bool)
            if not ok:
                raise TilecraftError(f"{self.fn.__name__}: the scalar parameter {name} is declared {d}, got {v!r}",
                                     self._span(self._decl_node(name)))
            if runtime and calling:
                if not -2 ** 31 <= v < 2 ** 31:
                    raise TilecraftError(f"{self.fn.__name__}: the scalar parameter {name} is int32, got {v} (out of "
                                         f"its range)", self._span(self._decl_node(name)))
                by_value[name] = v
            else:
                compiled[name] = v
        if compiled and not self._warned_scalars:
            import warnings
            from .errors import PerformanceWarning
            self._warned_scalars = True
            warnings.warn(f"{self.fn.__name__}: scalar parameter(s) {', '.join(compiled)} are compiled into the kernel "
                          f"as constants: each distinct value compiles a new kernel (tilecraft passes int32 scalars "
                          f"by value, other dtypes not yet)", PerformanceWarning, stacklevel=4)
        return compiled, by_value


def _vars_of(e) -> list:
    """The Vars an int or size expression mentions."""
    from .ir import collect
    return collect(e, lambda x: isinstance(x, Var)) if isinstance(e, Expr) else []


def _is_const(size, const) -> bool:
    """Whether a probed tensor size is exactly this T.const (its symbol, or its sentinel int)."""
    if isinstance(const, Var):
        return size is const
    return isinstance(size, int) and not isinstance(size, bool) and size == const


def _show(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


class AffineDims:
    """Tensor sizes that are affine expressions of T.dynamic symbols (`seq_len * heads`, `n + 1`):
    each distinct expression becomes a size symbol of its own, bound from the tensor like any other,
    and the kernel checks at every call that it equals the expression of the other symbols
    (`JITKernel._relations`).  Every symbol in such an expression must also be a plain size of an
    input tensor (that is where its value comes from)."""

    def __init__(self):
        self.fresh: dict = {}       # (constant, ((symbol name, coefficient), ...)) -> Var
        self.relations: list = []   # (size symbol name, constant, terms, text)

    def plain(self, shape, where: str, span):
        from .ir.analysis import linear
        out = []
        for s in shape:
            if isinstance(s, Expr) and not isinstance(s, Var):
                lin = linear(s)
                if lin is None or not lin[1] or not all(isinstance(a, Var) for a in lin[1]):
                    raise TilecraftError(f"{where} has the size {s}: a size is an int, a T.const, a T.dynamic symbol "
                                         f"or an affine expression of them (a * n + b)", span)
                key = (lin[0], tuple(sorted((a.name, k) for a, k in lin[1].items())))
                v = self.fresh.get(key)
                if v is None:
                    text = " + ".join(f"{k} * {a}" if k != 1 else a for a, k in key[1]) + (f" + {key[0]}" if key[0] else "")
                    name = "_".join(f"{a}_x{k}" if k != 1 else a for a, k in key[1]) + (f"_p{key[0]}" if key[0] else "")
                    v = self.fresh[key] = Var(name.replace("-", "m"), s.dtype)
                    self.relations.append((v.name, key[0], key[1], text, {a.name: a for a in lin[1]}, span))
                out.append(v)
            else:
                out.append(s)
        return tuple(out)

    def check_bound(self, input_shapes):
        """Every symbol of an expression is a plain size of some input (else it has no value)."""
        plain = {s.name for shape in input_shapes for s in shape if isinstance(s, Var)}
        for name, _, terms, text, _, span in self.relations:
            missing = [a for a, _ in terms if a not in plain]
            if missing:
                raise TilecraftError(f"the size {text} needs the value of {missing[0]}, which is not a size of any input "
                                     f"tensor by itself", span, hint=f"declare some input's size as {missing[0]} alone")
        return tuple((name, c, terms, text) for name, c, terms, text, _, _ in self.relations)
