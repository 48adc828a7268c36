"""A compiled kernel inside `torch.compile`: each kernel dispatches through its own torch custom op.

Before: a `JITKernel` (any target).  After: while `torch.compile` traces a call of the kernel
(`torch.compiler.is_compiling()`), `compiled_call` replaces the launch by a call of a
`torch.library` custom op registered for this kernel, so the graph holds one opaque node instead
of breaking at `data_ptr()`.  Nothing changes for eager calls, and the user writes no extra line.

- Registration is lazy and per kernel: the first time a trace reaches the kernel, two ops are
  defined under unique names ``tilecraft::<kernel>_<id>_alloc`` (the inputs, returning the
  `out_idx` outputs) and ``..._out`` (every parameter, writing the outputs in place).  The
  trace reaches them through `_dispatch`, a function marked `allow_in_graph`: dynamo does not
  step into it, it runs it on fake tensors, and there the ops are registered in plain Python.
  The mark needs `torch._dynamo`, which is not imported for it (1.5 s): it is set at once when
  dynamo is loaded, else by a one-shot import hook right after dynamo loads.
- Schemas declare mutation: every parameter the kernel writes (a store, a tile op's destination,
  an intrinsic that takes its address: `written_params`) that the op takes as an input is
  `Tensor(a!)`, so functionalization orders and copies around it correctly.
- The fake implementation checks the arguments with the kernel's own `ArgChecker` (dtype,
  device, shape, contiguity: errors surface at trace time) and allocates the outputs from the
  `out_idx` shapes, symbolic dimensions taken from the input sizes (SymInts under dynamic shapes).
- The real implementation is the eager call.
- torch without `torch.library.custom_op` (< 2.4): no dispatch; the compiled function breaks its
  graph at the kernel as before (and `fullgraph=True` reports it).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import itertools
import re
import sys
import threading
import weakref

from ..ir.buffer import Buffer, Region
from ..ir.functor import Visitor
from ..ir.stmt import Store
from ..ir.tileop import TileOp
from .args import _load_torch

__all__ = ["compiled_call", "written_params", "register_ops", "supported"]

_ids = itertools.count(1)
_kernels: dict = {}          # id -> weakref to the JITKernel (the ops hold the kernel itself)
_lock = threading.Lock()


def supported() -> bool:
    """Whether this torch can define custom ops and keep a function call in a traced graph."""
    return _graph_dispatch is not None


def new_id(kernel) -> str:
    """A process-unique name for `kernel` (what the traced graph names it by: a string, because
    dynamo turns int attributes into symbols under dynamic shapes)."""
    prepare_for_compile()
    kid = f"k{next(_ids)}"
    _kernels[kid] = weakref.ref(kernel, lambda _ref, kid=kid: _kernels.pop(kid, None))
    return kid


# ---- which parameters a kernel writes --------------------------------------------------------
class _Writes(Visitor):
    _cache: dict = {}

    def __init__(self):
        self.buffers: list = []

    def visit_Store(self, node: Store):
        self.buffers.append(node.buffer)
        return self.generic(node)

    def visit_TileOp(self, node: TileOp):
        for r in node.writes():
            self.buffers.append(r.buffer if isinstance(r, Region) else r)
        return self.generic(node)

    def visit_Call(self, node):
        # an intrinsic given a buffer or region itself (its address) may write through it
        for a in node.args:
            if isinstance(a, Buffer):
                self.buffers.append(a)
            elif isinstance(a, Region):
                self.buffers.append(a.buffer)
        return self.generic(node)


def written_params(func) -> list:
    """Indices of `func.params` the kernel body may write (conservative: by identity or name)."""
    w = _Writes()
    w.visit(func.body)
    from ..ir import View, collect
    bases = {id(v.buffer): v.base for v in collect(func.body, lambda n: isinstance(n, View))}
    w.buffers += [bases[id(b)] for b in w.buffers if id(b) in bases]
    ids = {id(b) for b in w.buffers}
    names = {b.name for b in w.buffers if isinstance(b, Buffer) and b.scope == "global"}
    return [i for i, p in enumerate(func.params) if id(p) in ids or p.name in names]


# ---- the ops -------------------------------------------------------------------------------
def _op_base(kernel, kid: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]", "_", kernel.name) or "kernel"
    return f"{name}_{kid}"


def _schema(n: int, mutated: set, n_out: int) -> str:
    args = ", ".join(f"Tensor{'(a%d!)' % i if i in mutated else ''} t{i}" for i in range(n))
    ret = "()" if n_out == 0 else "Tensor" if n_out == 1 else "(" + ", ".join(["Tensor"] * n_out) + ")"
    return f"({args}) -> {ret}"


def register_ops(kernel) -> tuple:
    """The kernel's two custom ops (alloc, out), registered on first use."""
    ops = getattr(kernel, "_torch_ops", None)
    if ops is not None:
        return ops
    with _lock:
        ops = getattr(kernel, "_torch_ops", None)
        if ops is None:
            ops = kernel._torch_ops = (_make_alloc_op(kernel), _make_out_op(kernel))
    return ops


def _custom_op(torch, name, impl, mutated, schema):
    """torch.library.custom_op with the stride tag where this torch takes tags (2.5+)."""
    tag = getattr(torch.Tag, "needs_fixed_stride_order", None)  # the kernel wants contiguous inputs
    if tag is not None:
        try:
            return torch.library.custom_op(name, impl, mutates_args=mutated, schema=schema, tags=(tag,))
        except TypeError:  # torch 2.4: no tags argument
            pass
    return torch.library.custom_op(name, impl, mutates_args=mutated, schema=schema)


def _make_alloc_op(kernel):
    torch = _load_torch()
    params, checker = kernel.params, kernel._checker
    ins = [i for i, p in enumerate(params) if not p.is_output]
    outs = [p for p in params if p.is_output]
    written = set(written_params(kernel.func))
    mutated = {j for j, i in enumerate(ins) if i in written}
    name = f"tilecraft::{_op_base(kernel, kernel._op_id)}_alloc"
    schema = _schema(len(ins), mutated, len(outs))
    eager = kernel._eager_call

    def impl(*tensors):
        result = eager(tensors)
        if len(outs) > 1:
            return tuple(result)
        return result

    op = _custom_op(torch, name, impl, tuple(f"t{j}" for j in sorted(mutated)), schema)

    def fake(*tensors):
        symbols: dict = {}
        for i, t in zip(ins, tensors):
            checker.check(params[i], t, symbols)
        device = tensors[0].device if tensors else torch.device(kernel.device_type)
        made = [torch.empty(checker.output_shape(p, symbols), dtype=p.dtype, device=device) for p in outs]
        if not made:
            return None
        return made[0] if len(made) == 1 else tuple(made)

    op.register_fake(fake)
    return op


def _make_out_op(kernel):
    torch = _load_torch()
    params, checker = kernel.params, kernel._checker
    written = set(written_params(kernel.func)) | set(kernel.out_idx)
    name = f"tilecraft::{_op_base(kernel, kernel._op_id)}_out"
    eager = kernel._eager_call

    def impl(*tensors):
        eager(tensors)

    op = _custom_op(torch, name, impl, tuple(f"t{i}" for i in sorted(written)), _schema(len(params), written, 0))

    def fake(*tensors):
        symbols: dict = {}
        for p, t in zip(params, tensors):
            checker.check(p, t, symbols)

    op.register_fake(fake)
    return op


def _dispatch(kid: str, variant: int, *tensors):
    """Run inside the traced graph (allow_in_graph): the kernel's op on these tensors."""
    ref = _kernels.get(kid)
    kernel = ref() if ref is not None else None
    if kernel is None:
        raise RuntimeError(f"tilecraft kernel {kid} no longer exists")
    return register_ops(kernel)[variant](*tensors)


_graph_dispatch = None   # `_dispatch` once dynamo has been told to keep it in graphs


def _allow_dispatch_in_graph() -> None:
    """Mark `_dispatch` with `torch.compiler.allow_in_graph` (needs `torch._dynamo`)."""
    global _graph_dispatch
    if _graph_dispatch is not None:
        return
    torch = _load_torch()
    allow = getattr(getattr(torch, "compiler", None), "allow_in_graph", None)
    if allow is None or not hasattr(getattr(torch, "library", None), "custom_op"):
        return  # torch < 2.4: no dispatch, the graph breaks at the kernel
    _graph_dispatch = allow(_dispatch)


class _DynamoImportWatcher(importlib.abc.MetaPathFinder):
    """One-shot: when `torch._dynamo` is imported (the first torch.compile), mark `_dispatch`
    right after the module has run, before any tracing.  Importing dynamo ourselves would add
    ~1.5 s to the first kernel of every process that never compiles."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch._dynamo":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = getattr(spec, "loader", None)
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec

        def exec_module(module):
            run(module)
            try:
                _allow_dispatch_in_graph()
            except Exception:  # noqa: BLE001 - never break the user's import; the graph breaks instead
                pass
        loader.exec_module = exec_module
        return spec


def prepare_for_compile() -> None:
    """Called when a kernel is built: mark `_dispatch` now if dynamo is loaded, else when it is."""
    if _graph_dispatch is not None:
        return
    if "torch._dynamo" in sys.modules:
        _allow_dispatch_in_graph()
    elif not any(isinstance(f, _DynamoImportWatcher) for f in sys.meta_path):
        sys.meta_path.insert(0, _DynamoImportWatcher())


def compiled_call(kernel, args, stream):
    """What a kernel call becomes while torch.compile traces it (see the module docstring)."""
    if stream is not None:
        raise TypeError(f"{kernel.name}: stream= is not supported inside torch.compile; the compiled "
                        f"graph launches on the current stream")
    if _graph_dispatch is None:
        return kernel._call_checked(args, stream)  # old torch: dynamo breaks the graph here
    n = len(args)
    if n == kernel._n_in:
        variant = 0
    elif n == kernel._n_all and kernel.out_idx:
        variant = 1
    else:
        kernel._arity_error(n)
    result = _graph_dispatch(kernel._op_id, variant, *args)
    if variant == 0:
        return result
    outs = [args[i] for i in kernel.out_idx]
    return outs[0] if len(outs) == 1 else tuple(outs)
