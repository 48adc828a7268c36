"""Building fuzzed programs in batches: one g++ run (CPU) or one NVRTC run (per CUDA variant)
compiles many programs at once, because each compile pays mostly for parsing the headers.

Each program's generated source goes into its own C++ namespace inside one translation unit;
the CPU entry points are renamed apart (`tc_entry_<n>`), CUDA kernels already have unique names
(each program's function name is unique).  When a batch fails, its programs are compiled one by
one so the failure lands on the right program.  The lowering itself (passes + printer) is the
one `compiler.build` runs; only the compile step is shared.
"""
from __future__ import annotations

import itertools
import os
import re

from ..compiler.build import Artifact, check_pass_configs
from ..errors import TilecraftError
from ..target import Target

CPU = "cpu"
# The CUDA variants every program is compiled for (and run on, with a GPU): the sm_80 path, and
# the sm_90a paths a pass config selects.  (name, arch, pass_configs)
CUDA_VARIANTS = (
    ("sm_80", "sm_80", {}),
    ("sm_90a", "sm_90a", {}),
    ("sm_90a-wgmma-tma", "sm_90a", {"tc.use_wgmma": True, "tc.wgmma_async": True, "tc.use_tma": True}),
    ("sm_90a-mbarrier", "sm_90a", {"tc.mbarrier_pipeline": True}),
)
BATCH = 24
_SERIAL = itertools.count()


class Outcome:
    """What happened to one program on one target: a kernel (or cubin), a refusal with a clear
    error (TilecraftError: a known gap, not a wrong answer), or a failure (anything else)."""

    def __init__(self, kernel=None, refused: str = "", failed: str = ""):
        self.kernel, self.refused, self.failed = kernel, refused, failed


def lower(func, target, configs) -> str:
    """Generated source of `func` for `target` (what `compiler.build` would compile)."""
    from ..transform.pipeline import run_pipeline
    configs = check_pass_configs(configs)
    lowered = run_pipeline(func.with_attr("pass_configs", configs), target)
    if target.kind == "cpu":
        from ..codegen.cpp import generate_cpp
        return generate_cpp(lowered)
    from ..codegen.cuda import generate_cuda
    return generate_cuda(lowered, target, configs)[0]


def _split(source: str):
    inc = [ln for ln in source.splitlines() if ln.startswith("#include")]
    body = [ln for ln in source.splitlines() if not ln.startswith("#include")]
    return inc, "\n".join(body)


def _batch_source(sources: list, cpu: bool) -> str:
    includes, bodies = [], []
    for n, src in enumerate(sources):
        inc, body = _split(src)
        includes += [i for i in inc if i not in includes]
        if cpu:
            body = re.sub(r"\btc_entry\(", f"tc_entry_{n}(", body)
        bodies.append(f"namespace tcfz_{n} {{\n{body}\n}}  // namespace tcfz_{n}")
    return "\n".join(includes) + "\n\n" + "\n\n".join(bodies) + "\n"


def _lower_all(funcs, target, configs) -> tuple:
    outcomes, sources = {}, {}
    for name, func in funcs:
        try:
            sources[name] = lower(func, target, configs)
        except TilecraftError as e:
            outcomes[name] = Outcome(refused=str(e).splitlines()[0])
        except Exception as e:  # noqa: BLE001 - an internal error is a finding, reported per program
            outcomes[name] = Outcome(failed=f"internal error while lowering: {type(e).__name__}: {e}")
    return outcomes, sources


def build_cpu(funcs: list, workdir: str) -> dict:
    """name -> Outcome with a callable JITKernel, for [(name, PrimFunc)]."""
    from ..compiler.cxx import compile_cxx
    from ..runtime.kernel import JITKernel
    target = Target.resolve("cpu")
    outcomes, sources = _lower_all(funcs, target, {})
    byname = dict(funcs)
    names = sorted(sources)

    def load(chunk, binary, tag):
        # a fresh file per library: a loaded library must never be overwritten in place
        path = os.path.join(workdir, f"{tag}_{next(_SERIAL)}.so")
        with open(path, "wb") as f:
            f.write(binary)
        for n, name in enumerate(chunk):
            entry = f"tc_entry_{n}" if len(chunk) > 1 else "tc_entry"
            art = Artifact(target, sources[name], {"entry": entry, "binary_name": "kernel.so"}, binary_path=path)
            outcomes[name] = Outcome(kernel=JITKernel(byname[name], art))

    for b in range(0, len(names), BATCH):
        chunk = names[b:b + BATCH]
        try:
            load(chunk, compile_cxx(_batch_source([sources[n] for n in chunk], cpu=True), "fuzz"), f"cpu_{b}")
        except Exception:  # noqa: BLE001 - find the program(s) that broke the batch
            for name in chunk:
                try:
                    load([name], compile_cxx(sources[name], name), f"cpu_{name}")
                except Exception as e:  # noqa: BLE001
                    outcomes[name] = Outcome(failed=f"C++ compile error: {str(e)[:2000]}")
    return outcomes


def compile_cuda_batch(funcs: list, variant: tuple) -> dict:
    """name -> Outcome (kernel=True when it compiled) for one CUDA variant, without a GPU."""
    from ..compiler.cuda import compile_cuda
    _, arch, configs = variant
    target = Target.resolve({"kind": "cuda", "arch": arch})
    outcomes, sources = _lower_all(funcs, target, configs)
    names = sorted(sources)
    for b in range(0, len(names), BATCH):
        chunk = names[b:b + BATCH]
        try:
            compile_cuda(_batch_source([sources[n] for n in chunk], cpu=False), target, configs, name="fuzz.cu")
            for name in chunk:
                outcomes[name] = Outcome(kernel=True)
        except Exception:  # noqa: BLE001
            for name in chunk:
                try:
                    compile_cuda(sources[name], target, configs, name=f"{name}.cu")
                    outcomes[name] = Outcome(kernel=True)
                except Exception as e:  # noqa: BLE001
                    outcomes[name] = Outcome(failed=f"CUDA compile error ({arch}): {str(e)[:2000]}")
    return outcomes


def build_gpu(func, variant: tuple) -> Outcome:
    """One program compiled for the local GPU with `variant`'s pass configs (disk-cached)."""
    import tilecraft
    _, arch, configs = variant
    try:
        return Outcome(kernel=tilecraft.compile(func, target={"kind": "cuda", "arch": arch}, pass_configs=configs))
    except TilecraftError as e:
        if type(e).__name__ == "InternalCompilerError":
            return Outcome(failed=str(e)[:2000])
        return Outcome(refused=str(e).splitlines()[0])
    except Exception as e:  # noqa: BLE001
        return Outcome(failed=f"{type(e).__name__}: {str(e)[:2000]}")
