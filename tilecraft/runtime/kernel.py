"""`JITKernel`: a compiled kernel you call with torch tensors.

Calling it checks every argument against the signature, allocates the `out_idx` outputs on the
inputs' device, and launches: the CPU target through ctypes into the compiled library, the CUDA
target through the driver API on torch's current stream.  Arguments are torch tensors or any
tensor that speaks DLPack (numpy, CuPy, JAX: shared, not copied, and checked the same way);
outputs are torch tensors.  Inside `torch.compile` the call is the kernel's custom op
(runtime/torch_op.py); static kernels get a generated call (runtime/fastpath.py).
Introspection: `get_kernel_source()`, `get_ir()`, `get_lowered_ir()`, `get_sass()`, `get_profiler()`.
"""
from __future__ import annotations

import ctypes

from ..compiler.build import Artifact
from . import torch_op
from .args import ArgChecker, CallError, CallTypeError, CallValueError, _load_torch, normalize_out_idx, param_infos
from .torch_op import compiled_call

class _CpuLauncher:
    def __init__(self, artifact: Artifact, nparams: int, symbols: list):
        from .openmp import configure, load_openmp
        load_openmp()  # done at `import tilecraft` already (runtime/openmp.py); a no-op here
        self.lib = ctypes.CDLL(artifact.binary_path)
        configure(self.lib)
        self.fn = getattr(self.lib, artifact.meta["entry"])
        self.error_text = artifact.meta.get("error_text", "tc_error_text")  # renamed in a batch (testing/fuzz_build.py)
        self.fn.restype = ctypes.c_int
        # No argtypes: the two ctypes arrays are passed as pointers to their storage (what the
        # entry's `void**, int64_t*` parameters take) without per-call argument conversion.  Both
        # are made per call (CDLL releases the GIL while the kernel runs: shared arrays would race
        # between threads); `dims` is one constant empty array for kernels without symbols.
        self.nparams = nparams
        self.ptr_array = ctypes.c_void_p * max(1, nparams)
        self.dim_array = ctypes.c_int64 * max(1, len(symbols))
        self.dims = self.dim_array()
        self.symbols = symbols
        self.iket = None   # runtime/iket.py: IketTrace, set by JITKernel for kernels with trace events

    def __call__(self, tensors, symbols, kernel_name):
        ptrs = self.ptr_array(*[t.data_ptr() for t in tensors])
        dims = self.dim_array(*[symbols[s] for s in self.symbols]) if self.symbols else self.dims
        rc = self.fn(ptrs, dims)
        if self.iket is not None:  # a kernel that records iket events: its launch goes into its trace
            self.iket.record(self.lib)
        if rc != 0:
            self.failed(rc, kernel_name)

    def failed(self, rc, kernel_name):
        """A kernel that explains its failure exports `tc_error_text(rc)` (a wait on an mbarrier
        that the CPU's program order cannot satisfy names the user's line, codegen/cpp_manual_sync.py)."""
        text = getattr(self.lib, self.error_text, None)
        if text is not None:
            text.restype = ctypes.c_char_p
            msg = text(ctypes.c_int(rc))
            if msg:
                from ..errors import TilecraftError
                raise TilecraftError(f"{kernel_name}: {msg.decode()}")
        raise RuntimeError(f"{kernel_name}: the CPU kernel returned error code {rc}")


def _plan_text(name: str, artifact: Artifact, note: str = "") -> str:
    lines = artifact.meta.get("plan", [])
    head = f"{name} ({artifact.target}{note})"
    return "\n".join([f"{head}:"] + [f"  {x}" for x in lines] if lines else
                     [f"{head}: no T.gemm and no pipelined loop"])


def _is_compiling_fn():
    torch = _load_torch()
    fn = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return fn if fn is not None else (lambda: False)


_is_compiling = None  # torch.compiler.is_compiling, set when the first kernel is built (torch is lazy)


class JITKernel:
    """A compiled kernel: call it with tensors (torch, or anything that speaks DLPack).

    Static kernels get a generated `__call__` (runtime/fastpath.py: a subclass made for the
    signature); under `torch.compile` every call goes through the kernel's custom op
    (runtime/torch_op.py)."""

    # sizes declared as affine expressions of other symbols (the eager jit's `seq_len * heads`):
    # (size symbol, constant, ((symbol, coefficient), ...), text), checked at each call
    _relations: tuple = ()

    def __init__(self, func, artifact: Artifact, out_idx=None, target=None, pass_configs=None):
        self.func = func
        self.artifact = artifact
        self.target = artifact.target
        self.name = func.name
        self.pass_configs = dict(pass_configs or {})
        n_ws = getattr(func, "workspaces", 0)
        # scalar parameters (`n: T.int32`): (position in the signature, name); passed by value as symbols
        self._scalars = tuple((pos, v.name) for pos, v in getattr(func, "scalars", ()))
        self.out_idx = normalize_out_idx(_tensor_out_idx(out_idx, len(func.params) - n_ws, self._scalars, self.name),
                                         len(func.params) - n_ws, self.name)
        every = param_infos(func, self.out_idx)
        # T.alloc_global scratch tensors: the last parameters of the compiled kernel, allocated by each
        # call (_call_checked); the caller, the profiler and the fast paths see only the declared ones
        self.params, self._workspaces = every[:len(every) - n_ws], every[len(every) - n_ws:]
        self.device_type = self.target.device_type
        self.symbols = [s.name for s in func.symbols]
        self._checker = ArgChecker(self.name, self.params, self.device_type)
        traced = False
        if self.target.kind == "cpu":
            self._launch = _CpuLauncher(artifact, len(every), self.symbols)
            from .iket import IketTrace
            self._launch.iket = IketTrace.of(func)
            if self._launch.iket is not None:
                self._launch.iket.bind(self._launch.lib)
                traced = True  # the generic call (the fast paths call the entry directly)
        elif artifact.extra.get("parts"):  # several T.Kernels: launched in program order
            from .cuda_launch import SequenceLauncher
            from .iket import cuda_launcher
            self._launch = SequenceLauncher([cuda_launcher(a, f, every, self.symbols)
                                             for f, a in artifact.extra["parts"]])
        else:
            from .iket import IketCudaLauncher, cuda_launcher
            self._launch = cuda_launcher(artifact, func, every, self.symbols)
            traced = isinstance(self._launch, IketCudaLauncher)  # its log is reset and read around each launch
        global _is_compiling
        if _is_compiling is None:
            _is_compiling = _is_compiling_fn()
        torch = _load_torch()
        self._cpu_device = torch.device("cpu")
        self._n_in = len(self._checker.inputs)
        self._n_all = len(self.params)
        self._op_id = torch_op.new_id(self)
        from .fastpath import specialize
        cls = None if self._workspaces or traced or self._scalars else specialize(self)
        if cls is not None:
            self.__class__ = cls

    # ---- calling ----------------------------------------------------------------------------
    def __call__(self, *args, stream=None):
        """Check the arguments, allocate the `out_idx` outputs, launch; return the outputs."""
        if _is_compiling():
            if self._scalars:
                raise TypeError(f"{self.name}: a kernel with scalar parameters "
                                f"({', '.join(n for _, n in self._scalars)}) cannot run inside torch.compile yet; "
                                f"call it outside the compiled region")
            if self._workspaces:
                raise TypeError(f"{self.name}: a kernel with T.alloc_global scratch tensors "
                                f"({', '.join(p.name for p in self._workspaces)}) cannot run inside torch.compile yet; "
                                f"call it outside the compiled region")
            return compiled_call(self, args, stream)
        return self._call_checked(args, stream)

    def _eager_call(self, args, stream=None):
        """The call without the torch.compile test (what the custom op runs)."""
        return self._call_checked(tuple(args), stream)

    def _written_names(self) -> set:
        """Names of the parameters the kernel may write (outputs and in-place arguments)."""
        names = getattr(self, "_written", None)
        if names is None:
            from .torch_op import written_params
            names = self._written = {self.params[i].name for i in written_params(self.func)
                                     if i < len(self.params)} | \
                {self.params[i].name for i in self.out_idx}
        return names

    def _cpu_failed(self, rc):
        if isinstance(getattr(self, "_launch", None), _CpuLauncher):
            self._launch.failed(rc, self.name)
        raise RuntimeError(f"{self.name}: the CPU kernel returned error code {rc}")

    def _arity_error(self, n):
        checker = self._checker
        names = ", ".join(p.name for p in checker.inputs)
        raise CallTypeError(f"{checker.kernel_name}: expects {self._n_in} tensor argument(s) ({names}), got {n}"
                        + (f"; outputs {[p.name for p in checker.outputs]} are allocated and returned "
                           f"(out_idx={self.out_idx})" if self.out_idx else ""))

    def _take_scalars(self, args, symbols: dict) -> tuple:
        """The tensor arguments of a call with the scalar parameters' values taken out (into
        `symbols`): the call passes every parameter in signature order, the outputs left out or not."""
        n_s = len(self._scalars)
        if len(args) == self._n_in + n_s:
            outputs_given = False
        elif len(args) == self._n_all + n_s and self.out_idx:
            outputs_given = True
        else:
            names = ", ".join(p.name for p in self._checker.inputs)
            raise CallTypeError(f"{self._checker.kernel_name}: expects {self._n_in} tensor argument(s) ({names}) and "
                                f"{n_s} scalar(s) ({', '.join(n for _, n in self._scalars)}), got {len(args)} "
                                f"argument(s)")
        # the signature in order: tensors (by index) and scalars (by name)
        sig, t = [], 0
        scalar_at = dict(self._scalars)
        for pos in range(len(self.params) + n_s):
            if pos in scalar_at:
                sig.append(scalar_at[pos])
            else:
                sig.append(t)
                t += 1
        call = [s for s in sig if isinstance(s, str) or outputs_given or not self.params[s].is_output]
        tensors = []
        for what, a in zip(call, args):
            if isinstance(what, str):
                symbols[what] = _scalar_value(self._checker.kernel_name, what, a)
            else:
                tensors.append(a)
        return tuple(tensors)

    def called_as(self, label: str) -> "JITKernel":
        """Name the kernel in call-time errors as the user made it (`matmul(1024, 1024, 1024)`, the
        @jit factory and its arguments) rather than by its inner `@T.prim_func` (`main`)."""
        self._checker.kernel_name = label
        self._label = label
        return self

    def _call_checked(self, args, stream):
        """The general path; a mistake in the call is raised from here, without the checker's frames."""
        try:
            return self._call_checked_inner(args, stream)
        except CallError as e:
            raise e.with_traceback(None) from None

    def _call_checked_inner(self, args, stream):
        """Detailed checks (messages), DLPack inputs, symbolic shapes, outputs shaped from them."""
        torch = _load_torch()
        checker = self._checker
        symbols: dict = {}
        if self._scalars:
            args = self._take_scalars(args, symbols)
        if len(args) == self._n_in:
            given_outputs = False
        elif len(args) == self._n_all and self.out_idx:
            given_outputs = True  # the caller passed the outputs too: write into them
        else:
            self._arity_error(len(args))
        tensors = []
        it = iter(args)
        device = None
        for p in self.params:
            if p.is_output and not given_outputs:
                tensors.append(None)
                continue
            t = next(it)
            try:
                if not isinstance(t, torch.Tensor):
                    t = checker.from_dlpack(p, t, written=p.name in self._written_names())
                checker.check(p, t, symbols)
            except CallError as e:
                if given_outputs and p.is_output:   # most likely one argument too many, not a bad output
                    ins = ", ".join(q.name for q in checker.inputs)
                    raise type(e)(f"{e}; this call passed {len(args)} arguments, so {p.name} was taken as the "
                                  f"output to write into -- with out_idx={self.out_idx} the kernel takes "
                                  f"{self._n_in} input(s) ({ins}) and allocates its outputs itself") from None
                raise
            if device is None:
                device = t.device
            elif t.device != device:
                checker.fail(ValueError, p, f"is on {t.device} but an earlier argument is on {device}; "
                                            f"every tensor of one call must be on the same device")
            tensors.append(t)
        for name, c, terms, text in self._relations:
            want = c + sum(k * symbols[a] for a, k in terms)
            if symbols.get(name, want) != want:
                raise ValueError(f"{self.name}: a size declared as {text} is {symbols[name]}, but {text} = {want} "
                                 f"with {', '.join(f'{a}={symbols[a]}' for a, _ in terms)}")
        outputs = []
        for i, p in enumerate(self.params):
            if p.is_output:
                if tensors[i] is None:
                    dev = device if device is not None else (
                        torch.device("cuda", torch.cuda.current_device()) if self.device_type == "cuda" else "cpu")
                    tensors[i] = torch.empty(checker.output_shape(p, symbols), dtype=p.dtype, device=dev)
                outputs.append(tensors[i])
        for p in self._workspaces:
            dev = device if device is not None else (
                torch.device("cuda", torch.cuda.current_device()) if self.device_type == "cuda" else "cpu")
            tensors.append(torch.empty(checker.output_shape(p, symbols), dtype=p.dtype, device=dev))
        self._launch(tensors, symbols, self.name) if self.target.kind == "cpu" else \
            self._launch(tensors, symbols, self.name, stream)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    # ---- introspection ----------------------------------------------------------------------
    def get_kernel_source(self) -> str:
        return self.artifact.source

    def get_host_source(self) -> str:
        return self.artifact.meta.get("host_source", "# the host side is tilecraft's Python launcher "
                                                     "(tilecraft/runtime/kernel.py)\n")

    def get_ir(self) -> str:
        return self.artifact.ir

    def get_lowered_ir(self) -> str:
        return self.artifact.lowered_ir

    def get_plan(self) -> str:
        """What the compiler chose for each T.gemm (tensor-core path, warps) and each T.Pipelined loop
        (how its copies are issued and synchronised), one line each, with the reason where an
        option asked for in pass_configs (tc.use_wgmma, tc.use_tma) could not apply."""
        if self.target.kind != "cuda":
            text = f"{self.name}: compiled for {self.target}: loops run in order on the CPU (no tensor-core or pipeline plan)"
            also = self.artifact.extra.get("also_compiled")  # CPU mode's --also-compile (compat/cpu_mode.py)
            return text if also is None else text + "\n" + _plan_text(self.name, also, ", also compiled, not launched")
        return _plan_text(self.name, self.artifact)

    def get_sass(self) -> str:
        if self.target.kind != "cuda":
            raise RuntimeError(f"{self.name}: SASS exists only for CUDA targets (this kernel targets {self.target})")
        from ..compiler.sass import disassemble
        parts = self.artifact.extra.get("parts")
        if parts:
            return "\n".join(disassemble(a.binary) for _, a in parts)
        return disassemble(self.artifact.binary)

    show_sass = get_sass

    def get_ptx(self) -> str:
        """The PTX of the kernel (regenerated on demand through NVRTC: the cache keeps the cubin)."""
        if self.target.kind != "cuda":
            raise RuntimeError(f"{self.name}: PTX exists only for CUDA targets (this kernel targets {self.target})")
        from ..compiler.nvrtc import compile_cuda_nvrtc
        from ..device import include_dir
        sources = [a.source for _, a in self.artifact.extra.get("parts", [])] or [self.artifact.source]
        return "\n".join(compile_cuda_nvrtc(s, self.target.arch, include_dirs=[include_dir()]).ptx for s in sources)

    show_ptx = get_ptx

    def get_profiler(self, tensor_supply_type=None):
        from ..profiler import Profiler, TensorSupplyType
        return Profiler(self, tensor_supply_type if tensor_supply_type is not None else TensorSupplyType.Auto)

    @property
    def compile_seconds(self) -> float:
        return self.artifact.compile_seconds

    def __repr__(self):
        return f"<JITKernel {self.name} target={self.target} out_idx={self.out_idx}>"


def _tensor_out_idx(out_idx, n_tensors: int, scalars: tuple, name: str):
    """`out_idx` counts the signature's parameters, scalars included (TileLang): the same outputs as
    indices among the tensor parameters."""
    if not scalars or out_idx is None:
        return out_idx
    n_sig = n_tensors + len(scalars)
    scalar_pos = {pos for pos, _ in scalars}
    one = isinstance(out_idx, int)
    out = []
    for i in ([out_idx] if one else list(out_idx)):
        if not isinstance(i, int) or not -n_sig <= i < n_sig:
            return out_idx   # normalize_out_idx names the mistake
        j = i % n_sig
        if j in scalar_pos:
            raise ValueError(f"{name}: out_idx lists parameter {i}, a scalar ({dict(scalars)[j]}); outputs are tensors")
        out.append(j - sum(1 for p in scalar_pos if p < j))
    return out[0] if one else out


def _scalar_value(kernel_name: str, name: str, value) -> int:
    """The value of scalar parameter `name` (int32) given at a call."""
    import operator
    if isinstance(value, bool) or not hasattr(value, "__index__") or (
            hasattr(value, "dim") and value.dim() != 0):
        raise CallTypeError(f"{kernel_name}: parameter '{name}' is a scalar (int32) passed by value, "
                            f"got {type(value).__name__}")
    try:
        v = operator.index(value)
    except (TypeError, RuntimeError):
        raise CallTypeError(f"{kernel_name}: parameter '{name}' is a scalar (int32) passed by value, got "
                            f"{type(value).__name__} {value!r}") from None
    if not -2 ** 31 <= v < 2 ** 31:
        raise CallValueError(f"{kernel_name}: parameter '{name}' is an int32 scalar, got {v} (out of range)")
    return v
