"""A tiling recommendation for one GEMM, with TileLang's field names: `block` (block_M, block_N),
`warp` (the tile one warp computes: block / warp is the warp grid), `rstep` (block_K,),
`pipeline_stage`, `rasterization_plan`, `use_tc`."""
from __future__ import annotations

from dataclasses import dataclass, field

from .rasterization import NoRasterization


@dataclass
class Hint:
    block: list
    warp: list
    rstep: list
    pipeline_stage: int = 1
    rasterization_plan: object = field(default_factory=NoRasterization)
    use_tc: bool = True

    @property
    def threads(self) -> int:
        return (self.block[0] // self.warp[0]) * (self.block[1] // self.warp[1]) * 32

    def to_dict(self) -> dict:
        return {"block_M": self.block[0], "block_N": self.block[1], "block_K": self.rstep[0],
                "num_stages": self.pipeline_stage, "threads": self.threads}
