"""Building fuzzed programs in batches: one g++ run (CPU) or one NVRTC run (per CUDA variant)
compiles many programs at once, because each compile pays mostly for parsing the headers.

Each program's generated source goes into its own C++ namespace inside one translation unit;
the CPU entry points are renamed apart (`tc_entry_<n>`, and a program's `tc_error_text` export
`tc_error_text_<n>`: the artifact's meta names both), CUDA kernels already have unique names
(each program's function name is unique).  When a batch fails, its programs are compiled one by
one so the failure lands on the right program.  The lowering itself (passes + printer) is the
one `compiler.build` runs; only the compile step is shared.
"""
from __future__ import annotations

import itertools
import os
import re

from ..compiler.build import Artifact, effective_pass_configs
from ..errors import InternalCompilerError, TilecraftError
from ..target import Target

CPU = "cpu"
# The CUDA variants every program is compiled for (and run on, with a GPU): the sm_80 path, and
# the sm_90a paths a pass config selects.  (name, arch, pass_configs)
CUDA_VARIANTS = (
    ("sm_80", "sm_80", {}),
    ("sm_90a", "sm_90a", {}),
    ("sm_90a-ws", "sm_90a", {"tc.warp_specialize": True}),
    ("sm_90a-mbarrier", "sm_90a", {"tc.mbarrier_pipeline": True, "tl.disable_wgmma": True}),
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
    return lower_with_meta(func, target, configs)[0]


def lower_with_meta(func, target, configs) -> tuple:
    """(source, launch metadata) of `func` for `target`, as `compiler.build` makes them.  A CUDA
    program of several T.Kernels (transform/split_kernels.py) is one source holding every part
    (under one set of wgmma switches) and metadata with each part's (`meta["parts"]`)."""
    from ..transform.pipeline import run_pipeline
    if target.kind == "cuda":
        from ..transform.split_kernels import split_kernels
        parts = split_kernels(func)
        if parts:
            lowered = [lower_with_meta(p, target, configs) for p in parts]
            splits = [_split(src) for src, _ in lowered]
            head = [f"#define {d}" for d in _wgmma_defines([defs for _, defs, _ in splits])]
            includes = list(dict.fromkeys(i for inc, _, _ in splits for i in inc))
            source = "\n".join(head + includes) + "\n" + "\n".join(body for _, _, body in splits)
            return source, {"parts": [m for _, m in lowered], "binary_name": "kernel.cubin", "kernel": func.name}
    configs = effective_pass_configs(configs, target)   # the target's defaults too, as compiler.build
    lowered = run_pipeline(func, target, configs)
    if target.kind == "cpu":
        from ..codegen.cpp import ENTRY, generate_cpp
        return generate_cpp(lowered), {"entry": ENTRY, "binary_name": "kernel.so"}
    from ..codegen.cuda import generate_cuda
    source, record = generate_cuda(lowered, target, configs)
    return source, dict(record.to_meta(), binary_name="kernel.cubin", kernel=func.name)


_WGMMA_DEFINE = re.compile(r"^#define (TC_NO_WGMMA|TC_WGMMA_ONLY|TC_WGMMA_N\d+)\b")


def _split(source: str):
    """(#include lines, wgmma #define names, the rest) of one generated source."""
    lines = source.splitlines()
    inc = [ln for ln in lines if ln.startswith("#include")]
    defs = [m.group(1) for m in map(_WGMMA_DEFINE.match, lines) if m]
    body = [ln for ln in lines if not ln.startswith("#include") and not _WGMMA_DEFINE.match(ln)]
    return inc, defs, "\n".join(body)


def _wgmma_defines(per_source: list) -> list:
    """The wgmma switches one translation unit of several sources may set before the headers
    (codegen/cuda.py sets them per kernel to parse fewer wrappers): TC_NO_WGMMA when no source
    issues a wgmma, else TC_WGMMA_ONLY with every shape any source issues, else none (all shapes)."""
    if all("TC_NO_WGMMA" in d for d in per_source):
        return ["TC_NO_WGMMA"]
    if all("TC_NO_WGMMA" in d or "TC_WGMMA_ONLY" in d for d in per_source):
        shapes = sorted({x for d in per_source for x in d if x.startswith("TC_WGMMA_N")}, key=lambda x: int(x[10:]))
        return ["TC_WGMMA_ONLY"] + shapes
    return []


def _batch_source(sources: list, cpu: bool) -> str:
    includes, defines, bodies = [], [], []
    for n, src in enumerate(sources):
        inc, defs, body = _split(src)
        includes += [i for i in inc if i not in includes]
        defines.append(defs)
        if cpu:   # extern "C" names must differ between the programs of one library
            body = re.sub(r"\btc_entry\(", f"tc_entry_{n}(", body)
            body = re.sub(r"\btc_error_text\(", f"tc_error_text_{n}(", body)
        bodies.append(f"namespace tcfz_{n} {{\n{body}\n}}  // namespace tcfz_{n}")
    head = [f"#define {d}" for d in _wgmma_defines(defines)] + includes
    return "\n".join(head) + "\n\n" + "\n\n".join(bodies) + "\n"


def cuda_artifact(func, target, source, meta, binary) -> Artifact:
    """The Artifact of a program compiled in a batch (`binary`: the batch's cubin); a program of
    several T.Kernels gets one part per kernel, all in that cubin."""
    if "parts" not in meta:
        return Artifact(target, source, meta, binary=binary)
    from ..transform.split_kernels import split_kernels
    parts = [(p, Artifact(target, source, m, binary=binary)) for p, m in zip(split_kernels(func), meta["parts"])]
    return Artifact(target, source, meta, binary=binary, extra={"parts": parts})


def _lower_job(job) -> tuple:
    """("ok", (source, meta)) | ("refused", why) | ("failed", why) for one (func, target, configs)."""
    func, target, configs = job
    try:
        return "ok", lower_with_meta(func, target, configs)
    except TilecraftError as e:
        return "refused", str(e).splitlines()[0]
    except Exception as e:  # noqa: BLE001 - an internal error is a finding, reported per program
        return "failed", f"internal error while lowering: {type(e).__name__}: {e}"


def lower_all(funcs, target, configs) -> tuple:
    """Lower every program (in the worker processes when there are many: the passes are Python)."""
    jobs_list = [(func, target, configs) for _, func in funcs]
    results = _map(jobs_list, _lower_job) if len(funcs) >= 4 * BATCH else [_lower_job(j) for j in jobs_list]
    outcomes, lowered = {}, {}
    for (name, _), (kind, value) in zip(funcs, results):
        if kind == "ok":
            lowered[name] = value
        else:
            outcomes[name] = Outcome(**{kind: value})
    return outcomes, lowered


# ---- compiling batches, in worker processes when there are cores to spare -------------------------

def jobs() -> int:
    """Worker processes for batch compiles: TILECRAFT_FUZZ_JOBS, else the cores (at most 16)."""
    n = os.environ.get("TILECRAFT_FUZZ_JOBS")
    return max(1, int(n)) if n else min(16, os.cpu_count() or 1)


def _compile_one(job):
    """(ok, bytes or error text) for one (kind, source, arch or name, configs) job; runs in a worker."""
    kind, source, where, configs = job
    try:
        if kind == "cpu":
            from ..compiler.cxx import compile_cxx
            return True, compile_cxx(source, where)
        from ..compiler.cuda import compile_cuda
        return True, compile_cuda(source, where, configs, name=f"{where}.cu")
    except Exception as e:  # noqa: BLE001 - reported per program by the caller
        return False, str(e)[:3000]


_POOL = None


def _map(jobs_list, fn=None):
    """fn (default: _compile_one) over the jobs, in the worker processes when there are several."""
    global _POOL
    fn = fn or _compile_one
    if jobs() <= 1 or len(jobs_list) <= 1:
        return [fn(j) for j in jobs_list]
    if _POOL is None:
        import concurrent.futures
        import multiprocessing
        _POOL = concurrent.futures.ProcessPoolExecutor(jobs(), mp_context=multiprocessing.get_context("spawn"))
        import atexit
        atexit.register(_POOL.shutdown)   # before the interpreter tears its modules down
    return list(_POOL.map(fn, jobs_list, chunksize=max(1, len(jobs_list) // (4 * jobs()))))


def compile_batches(kind: str, lowered: dict, where: str, configs: dict) -> dict:
    """name -> (ok, binary or error, position in its batch or None when compiled alone), compiling
    BATCH programs per translation unit and each program of a failed batch alone."""
    names = sorted(lowered)
    chunks = [names[b:b + BATCH] for b in range(0, len(names), BATCH)]
    results = _map([(kind, _batch_source([lowered[n][0] for n in c], kind == "cpu"), where, configs)
                    for c in chunks])
    out, retry = {}, []
    for chunk, (ok, binary) in zip(chunks, results):
        if ok:
            for i, n in enumerate(chunk):
                out[n] = (True, binary, i)
        else:
            retry += chunk
    if retry:
        for n, (ok, binary) in zip(retry, _map([(kind, lowered[n][0], where if kind != "cpu" else n, configs)
                                                for n in retry])):
            out[n] = (ok, binary, None)
    return out


def cpu_meta(pos) -> dict:
    """The artifact meta of a CPU program compiled alone (`pos` None) or at `pos` in a batch."""
    if pos is None:
        return {"entry": "tc_entry", "binary_name": "kernel.so"}
    return {"entry": f"tc_entry_{pos}", "error_text": f"tc_error_text_{pos}", "binary_name": "kernel.so"}


def build_cpu(funcs: list, workdir: str, configs: dict | None = None) -> dict:
    """name -> Outcome with a callable JITKernel, for [(name, PrimFunc)].  `configs`: pass configs, e.g.
    {"tc.cpu_threads": True} for the CUDA lowering run on the CPU with the block's threads emulated."""
    from ..runtime.kernel import JITKernel
    target = Target.resolve("cpu")
    configs = dict(configs or {})
    outcomes, lowered = lower_all(funcs, target, configs)
    byname = dict(funcs)
    libs: dict = {}
    for name, (ok, binary, pos) in compile_batches("cpu", lowered, "fuzz", {}).items():
        if not ok:
            outcomes[name] = Outcome(failed=f"C++ compile error: {binary}")
            continue
        path = libs.get(id(binary))
        if path is None:   # a fresh file per library: a loaded library must never be overwritten
            path = libs[id(binary)] = os.path.join(workdir, f"fuzz_{os.getpid()}_{next(_SERIAL)}.so")
            with open(path, "wb") as f:
                f.write(binary)
        art = Artifact(target, lowered[name][0], cpu_meta(pos), binary_path=path)
        outcomes[name] = Outcome(kernel=JITKernel(byname[name], art, pass_configs=configs or None))
    return outcomes


def compile_cuda_batch(funcs: list, variant: tuple, kernels: bool = False) -> dict:
    """name -> Outcome for one CUDA variant: kernel=True when it compiled (no GPU needed), or with
    `kernels` a JITKernel for the local GPU, loaded from the batch's cubin."""
    _, arch, configs = variant
    target = Target.resolve({"kind": "cuda", "arch": arch})
    outcomes, lowered = lower_all(funcs, target, configs)
    byname = dict(funcs)
    for name, (ok, binary, _) in compile_batches("cuda", lowered, arch, configs).items():
        if not ok:
            outcomes[name] = Outcome(failed=f"CUDA compile error ({arch}): {binary}")
        elif not kernels:
            outcomes[name] = Outcome(kernel=True)
        else:
            from ..runtime.kernel import JITKernel
            source, meta = lowered[name]
            art = cuda_artifact(byname[name], target, source, meta, binary)
            outcomes[name] = Outcome(kernel=JITKernel(byname[name], art, pass_configs=configs))
    return outcomes


def build_gpu(func, variant: tuple) -> Outcome:
    """One program compiled for the local GPU with `variant`'s pass configs (disk-cached)."""
    import tilecraft
    _, arch, configs = variant
    try:
        return Outcome(kernel=tilecraft.compile(func, target={"kind": "cuda", "arch": arch}, pass_configs=configs))
    except TilecraftError as e:
        if isinstance(e, InternalCompilerError):
            return Outcome(failed=str(e)[:2000])
        return Outcome(refused=str(e).splitlines()[0])
    except Exception as e:  # noqa: BLE001
        return Outcome(failed=f"{type(e).__name__}: {str(e)[:2000]}")
