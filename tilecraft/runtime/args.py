"""Checking call arguments against a kernel's signature, and allocating its outputs.

Every mismatch raises `TypeError` (not a tensor, wrong dtype, wrong device) or `ValueError`
(wrong rank, shape, strides) naming the kernel, the parameter, what was expected and what came,
before anything is launched: a bad argument must never become a wrong answer or a crash.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Var
from ..ir import dtype as dt

_torch = None  # imported once, when the first checker is built (not per call)

_CAPSULE = type(__import__("datetime").datetime_CAPI)   # the PyCapsule type (a DLPack capsule is one)


def _load_torch():
    global _torch
    if _torch is None:
        import torch
        _torch = torch
    return _torch


@dataclass(frozen=True)
class ParamInfo:
    name: str
    shape: tuple          # ints, or symbol names (str) for T.dynamic dimensions
    dtype: object         # torch.dtype
    is_output: bool
    ir_dtype: dt.DType

    @property
    def static(self) -> bool:
        return all(isinstance(s, int) for s in self.shape)


def param_infos(func, out_idx) -> list:
    out = set(out_idx)
    infos = []
    for i, b in enumerate(func.params):
        shape = tuple(s.name if isinstance(s, Var) else s for s in b.shape)
        if b.dtype.packed:
            shape = packed_shape(b, shape)
        infos.append(ParamInfo(b.name, shape, _torch_dtype(b.dtype), i in out, b.dtype))
    return infos


def _torch_dtype(d):
    """The torch dtype a tensor of `d` arrives as: int4 in an int8 tensor (TileLang's convention)."""
    return _load_torch().int8 if d.packed else dt.to_torch(d)


def packed_shape(b, shape: tuple) -> tuple:
    """The torch shape of an int4 tensor parameter: two elements per byte along the last dimension,
    the even flat index in the low nibble (as TileLang's `(lo & 0xF) | (hi << 4)` packs them)."""
    last = shape[-1] if shape else None
    if not isinstance(last, int) or last % 2:
        from ..errors import TilecraftError
        raise TilecraftError(f"parameter {b.name}: an {b.dtype} tensor of shape {shape} needs a static even last "
                             f"dimension (it is passed as a torch int8 tensor holding two per byte along it)",
                             b.span)
    return shape[:-1] + (last // 2,)


def normalize_out_idx(out_idx, nparams: int, kernel_name: str) -> list:
    if out_idx is None:
        return []
    if isinstance(out_idx, int):
        out_idx = [out_idx]
    result = []
    for i in out_idx:
        if not isinstance(i, int) or not -nparams <= i < nparams:
            raise ValueError(f"{kernel_name}: out_idx {i!r} is out of range for {nparams} parameters")
        j = i % nparams
        if j in result:
            raise ValueError(f"{kernel_name}: out_idx lists parameter {j} twice")
        result.append(j)
    return sorted(result)


def _contiguous_strides(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(1, s)
    return tuple(reversed(strides))


class ArgChecker:
    """Validates tensors for one kernel and resolves symbolic sizes.

    `check` is the detailed check that builds the messages: it runs when the generated fast test
    of runtime/fastpath.py fails (to raise, or to accept a tensor subclass or a DLPack tensor), for
    symbolic shapes, and on fake tensors while torch.compile traces the kernel's custom op."""

    def __init__(self, kernel_name: str, params: list, device_type: str):
        _load_torch()
        self.kernel_name = kernel_name
        self.params = params
        self.device_type = device_type
        self.inputs = [p for p in params if not p.is_output]
        self.outputs = [p for p in params if p.is_output]

    def fail(self, exc, p: ParamInfo, what: str):
        raise _CALL_ERRORS.get(exc, exc)(f"{self.kernel_name}: parameter '{p.name}' {what}")

    def from_dlpack(self, p: ParamInfo, obj, written: bool = False):
        """A torch tensor sharing the memory of `obj` if it speaks DLPack (numpy, CuPy, JAX, a
        DLPack capsule), for the same checks as a torch tensor; else the TypeError.  A parameter
        the kernel writes must not be a read-only array (numpy's `writeable` flag)."""
        if hasattr(obj, "__dlpack__") or isinstance(obj, _CAPSULE):
            flags = getattr(obj, "flags", None)
            if written and flags is not None and getattr(flags, "writeable", True) is False:
                self.fail(TypeError, p, f"is written by the kernel, but the {type(obj).__name__} given is read-only")
            try:
                return _torch.from_dlpack(obj)
            except (BufferError, RuntimeError, TypeError, ValueError) as e:
                self.fail(TypeError, p, f"got a {type(obj).__name__} that speaks DLPack, but torch cannot "
                                        f"share its memory: {e}")
        self.fail(TypeError, p, f"expects a tensor (torch.Tensor, or one that speaks DLPack: numpy, CuPy, "
                                f"JAX) of dtype {p.ir_dtype} and shape {p.shape}, got {type(obj).__name__}")

    def check(self, p: ParamInfo, t, symbols: dict):
        if not isinstance(t, _torch.Tensor):
            self.fail(TypeError, p, f"expects a tensor (torch.Tensor, or one that speaks DLPack: numpy, "
                                    f"CuPy, JAX) of dtype {p.ir_dtype} and shape {p.shape}, got {type(t).__name__}")
        if t.device.type != self.device_type:
            self.fail(TypeError, p, f"expects a tensor on the {self.device_type} device (the kernel was "
                                    f"compiled for {self.device_type}), got one on {t.device}")
        if t.dtype != p.dtype:
            held = f" (held in an int8 tensor of shape {p.shape}, two per byte)" if p.ir_dtype.packed else ""
            self.fail(TypeError, p, f"expects dtype {p.ir_dtype}{held}, got {str(t.dtype).replace('torch.', '')}")
        shape = t.shape
        if len(shape) != len(p.shape):
            self.fail(ValueError, p, f"expects {len(p.shape)} dimensions with shape {p.shape}, got "
                                     f"{len(shape)} dimensions with shape {tuple(shape)}")
        for d, (want, got) in enumerate(zip(p.shape, shape)):
            if isinstance(want, int):
                if want != got:
                    self.fail(ValueError, p, f"expects shape {p.shape}, got {tuple(shape)} (dimension {d}: "
                                             f"expected {want}, got {got})")
            else:
                prev = symbols.setdefault(want, got)
                if prev != got:
                    self.fail(ValueError, p, f"dimension {d} is the symbol '{want}', already bound to {prev} "
                                             f"by an earlier argument, but is {got} here")
        if not t.is_contiguous():
            want = _contiguous_strides([symbols.get(s, s) if isinstance(s, str) else s for s in p.shape])
            self.fail(ValueError, p, f"expects a contiguous (row-major) tensor with strides {want}, got "
                                     f"strides {tuple(t.stride())}; call .contiguous() on it first")

    def output_shape(self, p: ParamInfo, symbols: dict) -> tuple:
        shape = []
        for s in p.shape:
            if isinstance(s, str):
                if s not in symbols:
                    raise ValueError(f"{self.kernel_name}: cannot allocate output '{p.name}': its "
                                     f"dimension '{s}' is not fixed by any input")
                shape.append(symbols[s])
            else:
                shape.append(s)
        return tuple(shape)


class CallError(Exception):
    """A mistake in how a kernel is called (arguments), raised as the TypeError / ValueError below."""


class CallTypeError(CallError, TypeError):
    pass


class CallValueError(CallError, ValueError):
    pass


_CALL_ERRORS = {TypeError: CallTypeError, ValueError: CallValueError}
