"""The TMA test kernel (shared by tests/cuda/test_tma_header.py, compile-only, and
tests/gpu/test_tma_gpu.py): each block TMA-loads one box of a 2-D tensor into shared memory, then
writes the in-bounds elements back out in logical order (undoing the swizzle with
tc::swizzle_offset, which must equal the TMA's pattern when a box row spans the swizzle) and counts
the out-of-bounds ones that are not zero (the TMA must zero-fill them)."""
from __future__ import annotations

C_TYPES = {"float16": "tc::half_t", "bfloat16": "tc::bfloat16_t", "float32": "float"}
ELEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}

# (dtype, box_rows, box_cols, swizzle bytes): every swizzle mode with a box row spanning it, no swizzle
CASES = [
    ("float16", 64, 64, 128), ("bfloat16", 128, 64, 128), ("float32", 32, 32, 128),
    ("float16", 32, 32, 64), ("float16", 16, 16, 32), ("float16", 64, 64, 0), ("float16", 8, 8, 0),
]


def case_id(case) -> str:
    dtype, br, bc, sw = case
    return f"{dtype}-{br}x{bc}-sw{sw}"


def smem_bytes(case) -> int:
    dtype, br, bc, _ = case
    return br * bc * ELEM_BYTES[dtype] + 16  # the tile, then the mbarrier


def kernel_source(case) -> str:
    dtype, br, bc, sw = case
    t, esize = C_TYPES[dtype], ELEM_BYTES[dtype]
    offset = f"tc::swizzle_offset<{bc}, {esize}>(r, c)" if sw else f"r * {bc} + c"
    return f"""#include <tilecraft/tilecraft.h>
extern "C" __global__ void __launch_bounds__(128) tma_tile(const __grid_constant__ tc::TmaDesc desc,
                                                          {t}* __restrict__ out, int rows, int cols,
                                                          int* __restrict__ bad) {{
  extern __shared__ __align__(1024) unsigned char smem[];
  {t}* tile = reinterpret_cast<{t}*>(smem);
  tc::uint64_t* bar = reinterpret_cast<tc::uint64_t*>(smem + {br * bc * esize});
  const int col0 = blockIdx.x * {bc}, row0 = blockIdx.y * {br};
  if (threadIdx.x == 0) tc::mbar_init(bar, 1);
  __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {{
    tc::tma_prefetch(&desc);
    tc::tma_expect(bar, {br * bc * esize});
    tc::tma_load_2d(tile, &desc, bar, col0, row0);
  }}
#endif
  tc::mbar_wait_parity(bar, 0);
  for (int i = threadIdx.x; i < {br * bc}; i += blockDim.x) {{
    const int r = i / {bc}, c = i % {bc};
    const {t} v = tile[{offset}];
    if (row0 + r < rows && col0 + c < cols) {{
      out[static_cast<long long>(row0 + r) * cols + col0 + c] = v;
    }} else {{
      const unsigned char* b = reinterpret_cast<const unsigned char*>(&v);
      unsigned char nz = 0;
      for (int k = 0; k < {esize}; ++k) nz |= b[k];
      if (nz) atomicAdd(bad, 1);
    }}
  }}
}}
"""


# ---- whole wgmma operand tiles filled by the box plan (ir/layout/tma.py::sm90_tile_boxes) ---------

# (dtype, tile rows, tile cols): one box; 8-row atoms (rows of 256 / 512 bytes)
TILE_CASES = [("float16", 128, 64), ("float16", 64, 128), ("bfloat16", 32, 256), ("float32", 64, 64)]


def tile_case_id(case) -> str:
    dtype, rows, cols = case
    return f"{dtype}-tile{rows}x{cols}"


def tile_smem_bytes(case) -> int:
    dtype, rows, cols = case
    return rows * cols * ELEM_BYTES[dtype] + 16


def tile_fill_source(case) -> str:
    """Each block fills one [rows][cols] tile of the tensor with the plan's boxes, all on one
    mbarrier, and writes it back through tc::swizzle_offset_sm90 (what the wgmma descriptors read)."""
    from tilecraft.ir.layout.tma import sm90_tile_boxes
    dtype, rows, cols = case
    t, esize = C_TYPES[dtype], ELEM_BYTES[dtype]
    _, boxes = sm90_tile_boxes(rows, cols, esize)
    loads = "\n".join(f"    tc::tma_load_2d(tile + {off}, &desc, bar, col0 + {c0}, row0 + {r0});"
                      for off, r0, c0, _, _ in boxes)
    return f"""#include <tilecraft/tilecraft.h>
extern "C" __global__ void __launch_bounds__(128) tma_fill(const __grid_constant__ tc::TmaDesc desc,
                                                          {t}* __restrict__ out, int cols_total) {{
  extern __shared__ __align__(1024) unsigned char smem[];
  {t}* tile = reinterpret_cast<{t}*>(smem);
  tc::uint64_t* bar = reinterpret_cast<tc::uint64_t*>(smem + {rows * cols * esize});
  const int col0 = blockIdx.x * {cols}, row0 = blockIdx.y * {rows};
  if (threadIdx.x == 0) tc::mbar_init(bar, 1);
  __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {{
    tc::tma_expect(bar, {rows * cols * esize});
{loads}
  }}
#endif
  tc::mbar_wait_parity(bar, 0);
  for (int i = threadIdx.x; i < {rows * cols}; i += blockDim.x) {{
    const int r = i / {cols}, c = i % {cols};
    out[static_cast<long long>(row0 + r) * cols_total + col0 + c] = tile[tc::swizzle_offset_sm90<{cols}, {esize}, {rows}>(r, c)];
  }}
}}
"""
