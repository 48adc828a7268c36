"""Compilation targets: what the code generator may assume about the machine.

`Target.resolve("auto")` picks the current CUDA device when torch sees one, else the CPU.  A CUDA
target names an architecture (`sm_80` ... `sm_90a`); generating and compiling code for it needs no
GPU.  In CPU mode (compat/cpu_mode.py) every target a program names ("cuda", "auto", "sm_90a", a
dict) resolves to the CPU, and `cuda_available()` is False whatever `torch.cuda` says.  Features (`mma_sync`, `cp_async`, `wgmma`, `tma`) and the shared-memory limit per block
follow from the architecture.
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass

_SMEM_LIMIT = {80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024, 90: 227 * 1024,
               100: 227 * 1024, 120: 99 * 1024}
_NUM_SMS = {80: 108, 86: 84, 87: 16, 89: 128, 90: 132, 100: 148, 120: 84}
ARCHS = ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120")


@dataclass(frozen=True)
class Target:
    kind: str                 # "cpu" or "cuda"
    arch: str = ""            # "sm_80", "sm_90a", ... for CUDA

    @property
    def sm(self) -> int:
        return int("".join(c for c in self.arch if c.isdigit())) if self.arch else 0

    @property
    def device_type(self) -> str:
        return "cuda" if self.kind == "cuda" else "cpu"

    @property
    def max_shared_memory(self) -> int:
        """Bytes of shared memory one block may use (with the opt-in dynamic limit)."""
        if self.kind != "cuda":
            return 1 << 62
        return _SMEM_LIMIT.get(self.sm, 48 * 1024)

    @property
    def num_sms(self) -> int:
        """Streaming multiprocessors of the device this target runs on: the current device's count when
        one of this architecture is present, else the architecture's flagship (H100/H200: 132;
        A100: 108).  Only persistent grids use it, and only for speed: their blocks stride by gridDim."""
        if self.kind != "cuda":
            return 1
        if cuda_available() and current_cuda_arch().rstrip("a") == self.arch.rstrip("a"):
            import torch
            return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        return _NUM_SMS.get(self.sm, 108)

    def has(self, feature: str) -> bool:
        if self.kind != "cuda":
            return False
        return {
            "mma_sync": self.sm >= 80, "cp_async": self.sm >= 80, "ldmatrix": self.sm >= 75,
            "mma_fp8": self.sm >= 89,   # mma.sync m16n8k32 .e4m3/.e5m2 (Ada, Hopper, ...)
            # wgmma is sm_90a's alone (Blackwell's tensor cores are driven by tcgen05, which tilecraft has no
            # path for yet: sm_100a / sm_120 take the portable mma.sync path, and get_plan() says so)
            "wgmma": self.arch == "sm_90a", "tma": self.sm >= 90,
        }.get(feature, False)

    def pass_config_defaults(self, configs: dict) -> dict:
        """The options this target turns on unless the program says otherwise.  On sm_90a that is
        the Hopper path: wgmma gemms (`tc.use_wgmma`), one wgmma group kept in flight across a
        pipelined loop (`tc.wgmma_async`), TMA tile loads (`tc.use_tma`) and a producer warpgroup
        feeding them (`tc.warp_specialize`: "auto" decides per loop, see plan_pipelines._ws_pays;
        True splits wherever it applies).  TileLang's switches turn the same things off:
        `tl.disable_wgmma`, `tl.disable_tma_lower`, `tl.disable_warp_specialized`."""
        if not self.has("wgmma"):
            return {}
        wgmma = bool(configs.get("tc.use_wgmma", not configs.get("tl.disable_wgmma", False)))
        tma = wgmma and not configs.get("tl.disable_tma_lower", False)
        return {"tc.use_wgmma": wgmma, "tc.wgmma_async": wgmma, "tc.use_tma": tma,
                "tc.warp_specialize": tma and not configs.get("tl.disable_warp_specialized", False) and "auto"}

    def __str__(self) -> str:
        return self.kind if self.kind == "cpu" else f"cuda -arch={self.arch}"

    @staticmethod
    def resolve(spec=None) -> "Target":
        if isinstance(spec, Target):
            return spec
        target = Target._resolve(spec)
        if target.kind == "cuda" and _cpu_mode():
            return Target("cpu")
        return target

    @staticmethod
    def _resolve(spec) -> "Target":
        if spec is None or spec == "auto":
            pinned = _DEFAULT.get()
            if pinned is not None:
                return pinned
            return Target("cuda", current_cuda_arch()) if cuda_available() else Target("cpu")
        if isinstance(spec, dict):
            kind = spec.get("kind", "cuda")
            if kind == "cuda":
                return Target("cuda", _check_arch(spec.get("arch") or current_cuda_arch(default="sm_80")))
            return Target.resolve(kind)
        if isinstance(spec, str):
            s = spec.strip()
            if s in ("cpu", "c", "llvm") or s.startswith("llvm") or s.startswith("c "):
                return Target("cpu")
            if s.startswith("cuda"):
                arch = None
                for part in s.split():
                    if part.startswith("-arch="):
                        arch = part.split("=", 1)[1]
                return Target("cuda", _check_arch(arch or current_cuda_arch(default="sm_80")))
            if s.startswith("sm_"):
                return Target("cuda", _check_arch(s))
            if s in ("hip", "rocm"):
                raise ValueError("the HIP (AMD) target is not implemented yet; use target='cuda' or 'cpu'")
        raise ValueError(f"unknown target {spec!r}; expected 'auto', 'cpu', 'cuda', or "
                         f"{{'kind': 'cuda', 'arch': 'sm_90a'}}")


def _check_arch(arch: str) -> str:
    if arch not in ARCHS:
        raise ValueError(f"unsupported CUDA arch {arch!r}; expected one of {ARCHS}")
    return arch


def _cpu_mode() -> bool:
    from .compat.cpu_mode import active
    return active()


def cuda_available() -> bool:
    """A CUDA device tilecraft can launch on (False in CPU mode, where torch.cuda.is_available() is
    True for the program's sake)."""
    if _cpu_mode():
        return False
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no torch CUDA means no GPU for us
        return False


def current_cuda_arch(default: str | None = None) -> str:
    if cuda_available():
        import torch
        major, minor = torch.cuda.get_device_capability()
        sm = major * 10 + minor
        return "sm_90a" if sm == 90 else f"sm_{sm}"
    if default is None:
        raise RuntimeError("no CUDA device is available to pick an arch from")
    return default


_DEFAULT: contextvars.ContextVar = contextvars.ContextVar("tilecraft_default_target", default=None)


@contextmanager
def default_target(spec):
    """Within the block "auto" means `spec`: kernels whose factories say target="auto" (the
    library's, the user's) compile for it.  `tilecraft demo --target cpu` and `tilecraft bench
    --cpu` run the CPU target this way on a machine that has a GPU."""
    token = _DEFAULT.set(Target.resolve(spec))
    try:
        yield
    finally:
        _DEFAULT.reset(token)


def default_target_key():
    """What "auto" resolves to when a default target is pinned or CPU mode is on (for kernel caches:
    a kernel compiled before either is not the one asked for now), else None."""
    pinned = _DEFAULT.get()
    if _cpu_mode():
        from .compat.cpu_mode import also_compile_arch
        return f"cpu mode{'+' + also_compile_arch() if also_compile_arch() else ''}:{pinned or 'cpu'}"
    return None if pinned is None else str(pinned)
