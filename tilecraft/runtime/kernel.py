"""`JITKernel`: a compiled kernel you call with torch tensors.

Calling it checks every argument against the signature, allocates the `out_idx` outputs on the
inputs' device, and launches: the CPU target through ctypes into the compiled library, the CUDA
target through the driver API on torch's current stream.  Introspection: `get_kernel_source()`,
`get_ir()`, `get_lowered_ir()`, `get_sass()`, `get_profiler()`.
"""
from __future__ import annotations

import ctypes
import threading

from ..compiler.build import Artifact
from .args import ArgChecker, _load_torch, normalize_out_idx, param_infos

_NO_SYMBOLS: dict = {}  # the symbol values of a kernel without symbolic shapes (never mutated)


class _CpuLauncher:
    def __init__(self, artifact: Artifact, nparams: int, symbols: list):
        self.lib = ctypes.CDLL(artifact.binary_path)
        self.fn = getattr(self.lib, artifact.meta["entry"])
        self.fn.restype = ctypes.c_int
        # No argtypes: the two ctypes arrays below are passed as pointers to their storage (what
        # the entry's `void**, int64_t*` parameters take) without per-call argument conversion.
        # One pair per calling thread: two threads calling the kernel at once must not overwrite
        # each other's arguments between the fill and the call.
        self.nparams = nparams
        self.symbols = symbols
        self._tls = threading.local()

    def _arrays(self):
        arrays = getattr(self._tls, "arrays", None)
        if arrays is None:
            arrays = self._tls.arrays = ((ctypes.c_void_p * max(1, self.nparams))(),
                                         (ctypes.c_int64 * max(1, len(self.symbols)))())
        return arrays

    def __call__(self, tensors, symbols, kernel_name):
        ptrs, dims = self._arrays()
        ptrs[0:self.nparams] = [t.data_ptr() for t in tensors]
        if self.symbols:
            for i, s in enumerate(self.symbols):
                dims[i] = symbols[s]
        rc = self.fn(ptrs, dims)
        if rc != 0:
            raise RuntimeError(f"{kernel_name}: the CPU kernel returned error code {rc}")


class JITKernel:
    def __init__(self, func, artifact: Artifact, out_idx=None, target=None, pass_configs=None):
        self.func = func
        self.artifact = artifact
        self.target = artifact.target
        self.name = func.name
        self.pass_configs = dict(pass_configs or {})
        self.out_idx = normalize_out_idx(out_idx, len(func.params), self.name)
        self.params = param_infos(func, self.out_idx)
        self.device_type = self.target.device_type
        self.symbols = [s.name for s in func.symbols]
        self._checker = ArgChecker(self.name, self.params, self.device_type)
        if self.target.kind == "cpu":
            self._launch = _CpuLauncher(artifact, len(self.params), self.symbols)
        else:
            from .cuda_launch import CudaLauncher
            self._launch = CudaLauncher(artifact, func, self.params, self.symbols)
        self._prepare_fast_path()

    def _prepare_fast_path(self):
        """Everything `__call__` needs that does not depend on the call."""
        torch = _load_torch()
        self._torch_tensor = torch.Tensor
        self._empty = torch.empty
        self._is_cpu = self.target.kind == "cpu"
        self._is_cuda = self.device_type == "cuda"
        self._cpu_device = torch.device("cpu")
        checker = self._checker
        self._n_in = len(checker.inputs)
        self._n_all = len(self.params)
        self._fast_in = checker.fast_inputs          # None: symbolic shapes or no inputs
        self._fast_all = checker.fast_all if self.out_idx else None
        # Outputs to allocate, as torch.empty's positional size arguments (the fastest form).
        self._out_alloc = tuple((tuple(p.shape) or ((),), p.dtype) for p in checker.outputs)
        self._outs_at_end = self.out_idx == list(range(self._n_in, self._n_all))
        self._single_out = len(self.out_idx) == 1

    # ---- calling ----------------------------------------------------------------------------
    def __call__(self, *args, stream=None):
        n = len(args)
        if n == self._n_in:
            specs = self._fast_in
        elif n == self._n_all:
            specs = self._fast_all
        else:
            specs = None
        if specs is not None:
            # Fast path: one combined test per tensor; any miss goes to the detailed checks,
            # which raise the message (or accept, e.g. a torch.Tensor subclass).
            tensor_t, cuda = self._torch_tensor, self._is_cuda
            for t, (dtype, shape) in zip(args, specs):
                if not (type(t) is tensor_t and t.dtype is dtype and (t.is_cuda if cuda else t.is_cpu)
                        and t.shape == shape and t.is_contiguous()):
                    break
            else:
                if n == self._n_in and self._out_alloc:
                    empty = self._empty
                    dev = args[0].device if cuda else self._cpu_device
                    outs = [empty(*size, dtype=dtype, device=dev) for size, dtype in self._out_alloc]
                    tensors = args + tuple(outs) if self._outs_at_end else self._merge(args, outs)
                else:
                    tensors = args
                    outs = [args[i] for i in self.out_idx]
                if self._is_cpu:
                    self._launch(tensors, _NO_SYMBOLS, self.name)
                else:
                    self._launch(tensors, _NO_SYMBOLS, self.name, stream)
                if not outs:
                    return None
                return outs[0] if self._single_out else tuple(outs)
        return self._call_checked(args, stream)

    def _merge(self, inputs, outputs) -> list:
        """All parameters in signature order from the inputs and the allocated outputs."""
        tensors, it_in, it_out = [], iter(inputs), iter(outputs)
        for p in self.params:
            tensors.append(next(it_out) if p.is_output else next(it_in))
        return tensors

    def _call_checked(self, args, stream):
        """The general path: detailed checks (messages), symbolic shapes, outputs shaped from them."""
        torch = _load_torch()
        checker = self._checker
        n_in = len(checker.inputs)
        symbols: dict = {}
        if len(args) == n_in:
            given_outputs = False
        elif len(args) == len(self.params) and self.out_idx:
            given_outputs = True  # the caller passed the outputs too: write into them
        else:
            names = ", ".join(p.name for p in checker.inputs)
            raise TypeError(f"{self.name}: expects {n_in} tensor argument(s) ({names}), got {len(args)}"
                            + (f"; outputs {[p.name for p in checker.outputs]} are allocated and returned "
                               f"(out_idx={self.out_idx})" if self.out_idx else ""))
        tensors = []
        it = iter(args)
        device = None
        for p in self.params:
            if p.is_output and not given_outputs:
                tensors.append(None)
                continue
            t = next(it)
            checker.check(p, t, symbols)
            if device is None:
                device = t.device
            tensors.append(t)
        outputs = []
        for i, p in enumerate(self.params):
            if p.is_output:
                if tensors[i] is None:
                    dev = device if device is not None else (
                        torch.device("cuda", torch.cuda.current_device()) if self.device_type == "cuda" else "cpu")
                    tensors[i] = torch.empty(checker.output_shape(p, symbols), dtype=p.dtype, device=dev)
                outputs.append(tensors[i])
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
            return f"{self.name}: compiled for {self.target}: loops run in order on the CPU (no tensor-core or pipeline plan)"
        lines = self.artifact.meta.get("plan", [])
        return "\n".join([f"{self.name} ({self.target}):"] + [f"  {x}" for x in lines] if lines else
                         [f"{self.name} ({self.target}): no T.gemm and no pipelined loop"])

    def get_sass(self) -> str:
        if self.target.kind != "cuda":
            raise RuntimeError(f"{self.name}: SASS exists only for CUDA targets (this kernel targets {self.target})")
        from ..compiler.sass import disassemble
        return disassemble(self.artifact.binary)

    show_sass = get_sass

    def get_ptx(self) -> str:
        """The PTX of the kernel (regenerated on demand through NVRTC: the cache keeps the cubin)."""
        if self.target.kind != "cuda":
            raise RuntimeError(f"{self.name}: PTX exists only for CUDA targets (this kernel targets {self.target})")
        from ..compiler.nvrtc import compile_cuda_nvrtc
        from ..device import include_dir
        return compile_cuda_nvrtc(self.artifact.source, self.target.arch, include_dirs=[include_dir()]).ptx

    show_ptx = get_ptx

    def get_profiler(self, tensor_supply_type=None):
        from ..profiler import Profiler, TensorSupplyType
        return Profiler(self, tensor_supply_type if tensor_supply_type is not None else TensorSupplyType.Auto)

    @property
    def compile_seconds(self) -> float:
        return self.artifact.compile_seconds

    def __repr__(self):
        return f"<JITKernel {self.name} target={self.target} out_idx={self.out_idx}>"
