"""The per-function lowering state: every decision the CUDA passes make, in one typed object.

`PrimFunc.lowering` holds a `LoweringState`; passes read it and return a function with an updated
copy (`func.with_lowering(field=value)`), and the IR printer prints it under the body, so
`tilecraft show ... --what lowered` explains each decision:

- fragment_layouts: the register layout of every fragment (infer_layouts);
- smem_layouts: the swizzle of each shared tile that is not plain row-major (plan_shared_layouts,
  pipeline_copies for the staged copies): `SWIZZLE_SM80` (tc::swizzle_offset, ldmatrix reads) or
  `SWIZZLE_SM90` (tc::swizzle_offset_sm90, the wgmma / TMA modes);
- smem_offsets / smem_bytes: where each shared buffer lives in dynamic shared memory
  (plan_shared_memory);
- tma_descs: the tensor maps the kernel takes as parameters (pipeline_copies' TMA loop);
- plan_notes: one line per T.gemm and T.Pipelined loop at the user's line: the path taken and why
  not another (`kernel.get_plan()`).

A gemm's plan (`GemmPlan`) belongs to its op and lives on it (`Gemm.plan`), so a rewrite that
rebuilds the op carries it along.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Union

SWIZZLE_SM80 = "sm80"  # 16-byte chunks XOR row % 8 (tc::swizzle_offset): ldmatrix without bank conflicts
SWIZZLE_SM90 = "sm90"  # the wgmma/TMA swizzle modes (tc::swizzle_offset_sm90), 1024-byte aligned panels


@dataclass(frozen=True)
class Mma80Plan:
    """mma.sync tensor cores (sm_80+), the block's warps split warps_m x warps_n over the tile."""
    warps_m: int
    warps_n: int

    def describe(self) -> str:
        return f"mma.sync {self.warps_m}x{self.warps_n} warps"


@dataclass(frozen=True)
class WgmmaPlan:
    """wgmma (sm_90a), A and B shared tiles, `warpgroups` warpgroups splitting M, or `wg_n` of them
    splitting N (a tile of 64 rows over two or more warpgroups: gemm_sm90.h's WGN)."""
    warpgroups: int
    wg_n: int = 1

    def describe(self) -> str:
        return f"wgmma {self.warpgroups} warpgroup(s)" + (f", {self.wg_n} along N" if self.wg_n > 1 else "")


@dataclass(frozen=True)
class WgmmaRSPlan:
    """wgmma (sm_90a) with A from registers (in the wgmma accumulator layout), B a shared tile."""
    warpgroups: int

    def describe(self) -> str:
        return f"wgmma, A from registers, {self.warpgroups} warpgroup(s)"


GemmPlan = Union[Mma80Plan, WgmmaPlan, WgmmaRSPlan]
WGMMA_PLANS = (WgmmaPlan, WgmmaRSPlan)


def is_wgmma(plan) -> bool:
    return isinstance(plan, WGMMA_PLANS)


@dataclass(frozen=True)
class TmaDescriptor:
    """One TMA tensor map passed to the kernel: the tensor (a kernel parameter, by position), the
    box it loads and the swizzle mode (runtime/tma.py builds it at each call)."""
    param: int
    box: tuple
    swizzle: int
    tensor: str = ""
    split: int = 0   # the tensor's last dim viewed as [n / split][split] (a plain row over 256 elements)
    reduce: bool = False   # the map of a T.atomic_add's destination (transform/cuda_ops/tma_reduce.py)

    def to_meta(self) -> dict:
        meta = {"param": self.param, "box": list(self.box), "swizzle": self.swizzle}
        if self.split:
            meta["split"] = self.split
        if self.reduce:
            meta["reduce"] = True
        return meta


@dataclass(frozen=True)
class LoweringState:
    fragment_layouts: dict = field(default_factory=dict)   # fragment Buffer -> FragmentLayout
    smem_layouts: dict = field(default_factory=dict)       # shared Buffer -> SWIZZLE_SM80 / SWIZZLE_SM90
    smem_offsets: dict = field(default_factory=dict)       # shared Buffer -> byte offset
    smem_bytes: int = 0
    tma_descs: tuple = ()                                  # TmaDescriptor per tensor-map kernel parameter
    plan_notes: tuple = ()                                 # per gemm / pipelined loop: the path and why
    scratch_smem: frozenset = frozenset()                  # shared Buffers live within one statement (Ctx.scratch)
    cpu_threads: bool = False                              # CPU target: the blocks' threads emulated (cpu_threads.py)

    def update(self, **changes) -> "LoweringState":
        return replace(self, **changes)

    def swizzled(self, kind: str) -> set:
        """The shared buffers laid out with swizzle `kind`."""
        return {b for b, k in self.smem_layouts.items() if k == kind}

    @property
    def hopper(self) -> bool:
        """Whether any shared tile is laid out for wgmma / TMA."""
        return SWIZZLE_SM90 in self.smem_layouts.values()

    def empty(self) -> bool:
        return self == LoweringState()

    def describe(self) -> list:
        """Lines for the IR printer (comments under the function)."""
        out = []
        for b, lay in self.fragment_layouts.items():
            out.append(f"layout {b.name} {tuple(b.shape)}: {lay.describe()}")
        for b, kind in self.smem_layouts.items():
            out.append(f"shared {b.name} {tuple(b.shape)}: swizzle {kind}")
        for b, off in sorted(self.smem_offsets.items(), key=lambda x: (x[1], x[0].name)):
            out.append(f"smem {b.name}: bytes [{off}, {off + b.nbytes})")
        if self.smem_offsets or self.smem_bytes:
            out.append(f"smem total: {self.smem_bytes} bytes")
        for i, d in enumerate(self.tma_descs):
            out.append(f"tma desc {i}: {d.tensor or 'param ' + str(d.param)} box {tuple(d.box)} swizzle {d.swizzle}")
        for n in self.plan_notes:
            out.append(f"plan: {n}")
        return out
