"""`JITKernel`: a compiled kernel you call with torch tensors.

Calling it checks every argument against the signature, allocates the `out_idx` outputs on the
inputs' device, and launches: the CPU target through ctypes into the compiled library, the CUDA
target through the driver API on torch's current stream.  Introspection: `get_kernel_source()`,
`get_ir()`, `get_lowered_ir()`, `get_sass()`, `get_profiler()`.
"""
from __future__ import annotations

import ctypes

from ..compiler.build import Artifact
from .args import ArgChecker, normalize_out_idx, param_infos


class _CpuLauncher:
    def __init__(self, artifact: Artifact, nparams: int, symbols: list):
        self.lib = ctypes.CDLL(artifact.binary_path)
        self.fn = getattr(self.lib, artifact.meta["entry"])
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64)]
        self.ptrs = (ctypes.c_void_p * max(1, nparams))()
        self.dims = (ctypes.c_int64 * max(1, len(symbols)))()
        self.symbols = symbols

    def __call__(self, tensors, symbols, kernel_name):
        for i, t in enumerate(tensors):
            self.ptrs[i] = t.data_ptr()
        for i, s in enumerate(self.symbols):
            self.dims[i] = symbols[s]
        rc = self.fn(self.ptrs, self.dims)
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

    # ---- calling ----------------------------------------------------------------------------
    def __call__(self, *args, stream=None):
        import torch
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

    def get_sass(self) -> str:
        if self.target.kind != "cuda":
            raise RuntimeError(f"{self.name}: SASS exists only for CUDA targets (this kernel targets {self.target})")
        from ..compiler.sass import disassemble
        return disassemble(self.artifact.binary)

    show_sass = get_sass

    def show_ptx(self) -> str:
        raise RuntimeError("PTX is not kept: kernels are compiled straight to cubin; use get_sass()")

    def get_profiler(self, tensor_supply_type=None):
        from ..profiler import Profiler, TensorSupplyType
        return Profiler(self, tensor_supply_type if tensor_supply_type is not None else TensorSupplyType.Auto)

    @property
    def compile_seconds(self) -> float:
        return self.artifact.compile_seconds

    def __repr__(self):
        return f"<JITKernel {self.name} target={self.target} out_idx={self.out_idx}>"
