"""IR of TileLang's Blackwell (sm_100) constructs that tilecraft executes: tensor memory and the
tcgen05 MMA's completion arrival.  The meaning every target keeps:

- Tensor memory (`T.alloc_tmem`) is per-block storage that the block's tcgen05 MMAs accumulate into
  and its threads read and write with copies (tcgen05.ld / .st): a `Buffer` of scope "shared" (one
  per block, seen by all its threads) that the front end marks with an `ArchNeed`.
- A tcgen05 gemm (`T.tcgen05_gemm`) is the `Gemm` tile op `C += op(A) @ op(B)`, issued
  asynchronously: its result may be read only after the mbarrier its commit names has completed
  the phase the commit arrives in.
- `MmaCommitArrive(barrier)`: ONE arrival on the mbarrier (whatever the number of threads that run
  the statement), made when every tcgen05 gemm the block issued before it has completed (PTX
  tcgen05.commit.mbarrier::arrive::one).
- `Annotate(AnnotationKey.REQUIRES_ARCH, ArchNeed(...))` at a construct's line: the construct needs a
  CUDA architecture that not every target has; the CPU target executes it, a CUDA target without
  it refuses the program at that line (transform/validate/arch.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from .expr import Ref
from .tileop import TileOp


@dataclass(frozen=True)
class ArchNeed:
    """`construct` (e.g. "T.alloc_tmem") is `what` (a tensor-memory allocation); CUDA has it from
    `sm` (100 for sm_100) on; `cuda_path`: tilecraft's CUDA backend lowers it on those archs (else
    the CPU target is the only one that runs it)."""
    construct: str
    what: str
    sm: int
    cuda_path: bool = False

    @property
    def arch(self) -> str:
        return f"sm_{self.sm}"


@dataclass(frozen=True, eq=False)
class MmaCommitArrive(TileOp):
    """One arrival on `barrier` once the block's earlier tcgen05 gemms have completed."""
    barrier: Ref
