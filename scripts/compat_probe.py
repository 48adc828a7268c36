"""How far does a TileLang program get on a machine without a GPU?  Runs it like `tilecraft run`,
but every kernel whose target is "auto"/"cuda" is compiled for sm_90a (NVRTC, no GPU needed), and
the program stops at its first kernel launch with the line

    COMPAT-PROBE: reached the first launch; N kernel(s) compiled for sm_90a

(exit status 3).  So a program that stops there parses, lowers and compiles every kernel it builds
before its first launch; an error before that is a front-end / compiler gap visible without a GPU.
A developer tool (scripts/), not part of the package: it patches target resolution for this process.

    python scripts/compat_probe.py PROG.py [ARGS...]
"""
from __future__ import annotations

import os
import sys

ARCH = os.environ.get("COMPAT_PROBE_ARCH", "sm_90a")


def _tensors_on_cpu():
    """Tensors the program makes on "cuda" are made on the CPU instead (the program stops at its
    first kernel launch, so only shapes and dtypes matter up to there)."""
    import torch
    from torch.overrides import TorchFunctionMode

    def is_cuda(d):
        return d is not None and str(d).startswith("cuda")

    class OnCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in (torch.Tensor.cuda,):
                return args[0]
            if is_cuda(kwargs.get("device")):
                kwargs["device"] = "cpu"
            if func is torch.Tensor.to:
                args = tuple(a for a in args if not is_cuda(a) and not (isinstance(a, int) and not isinstance(a, bool)
                                                                      and a is not args[0]))
            return func(*args, **kwargs)

    OnCpu().__enter__()
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.manual_seed = torch.cuda.manual_seed_all = lambda *a, **k: None
    torch.cuda.is_available = lambda: True
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    from tilecraft.compat import run_program
    from tilecraft.runtime.kernel import JITKernel
    from tilecraft.target import Target

    resolve = Target.resolve
    compiled = []

    def probe_resolve(spec=None):
        if spec is None or spec == "auto" or (isinstance(spec, str) and spec.strip().startswith("cuda")):
            spec = {"kind": "cuda", "arch": ARCH}
        elif isinstance(spec, dict) and spec.get("kind", "cuda") == "cuda" and not spec.get("arch"):
            spec = dict(spec, arch=ARCH)
        return resolve(spec)

    jit_module = sys.modules["tilecraft.jit"]
    build = jit_module.build

    def counting_build(func, target, pass_configs=None):
        artifact = build(func, target, pass_configs)
        compiled.append(func.name)
        return artifact
    jit_module.build = counting_build

    def probe_call(self, *args, **kwargs):
        print(f"COMPAT-PROBE: reached the first launch; {len(compiled)} kernel(s) compiled for {ARCH}", flush=True)
        os._exit(3)

    from tilecraft.runtime import fastpath
    fastpath.specialize = lambda kernel: None  # a specialized __call__ would bypass probe_call
    _tensors_on_cpu()
    Target.resolve = staticmethod(probe_resolve)
    JITKernel.__call__ = probe_call
    from tilecraft.runtime import fastpath
    fastpath.specialize = lambda kernel: None  # no generated __call__ that would bypass probe_call
    from tilecraft.profiler.profiler import Profiler
    Profiler.supply = probe_call  # the profiler's inputs are made for the launch
    run_program(sys.argv[1], sys.argv[2:])
    print(f"COMPAT-PROBE: finished without launching; {len(compiled)} kernel(s) compiled for {ARCH}")


if __name__ == "__main__":
    main()
