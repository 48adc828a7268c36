"""CUDA sources of small driver kernels for tilecraft/gemm_sm80.h (tc::gemm_ss / tc::gemm_rs),
shared by the compile-only test (tests/cuda/test_gemm_header.py) and the GPU test
(tests/gpu/test_gemm_header_gpu.py).

Each kernel runs one thread block of WM*WN warps: it copies the A and B tiles, stored in global
memory exactly as the gemm expects them in shared memory (A: [M][K] or, transposed, [K][M];
B: [K][N] or, transposed, [N][K]; row-major, contiguous), into shared memory (through
tc::swizzle_offset when SWZ=1), zeroes the accumulator, calls the gemm and writes C ([M][N] f32)
back through the documented register-slot mapping.  gemm_rs kernels load A ([M][K] in global)
straight into registers in the documented A_regs layout.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

CTYPE = {"f16": "tc::half_t", "bf16": "tc::bfloat16_t"}


@dataclass(frozen=True)
class GemmCase:
    M: int
    N: int
    K: int
    WM: int
    WN: int
    trans_a: bool = False
    trans_b: bool = False
    swz_a: int = 0
    swz_b: int = 0
    dtype: str = "f16"
    rs: bool = False  # A from registers (gemm_rs)

    @property
    def name(self) -> str:
        kind = "rs" if self.rs else "ss"
        ta = "" if self.rs else ("T" if self.trans_a else "N")
        return (f"gemm_{kind}_{self.M}x{self.N}x{self.K}_w{self.WM}x{self.WN}_{ta}{'T' if self.trans_b else 'N'}"
                f"_s{'' if self.rs else self.swz_a}{self.swz_b}_{self.dtype}")

    @property
    def threads(self) -> int:
        return 32 * self.WM * self.WN

    @property
    def a_stored(self) -> tuple[int, int]:
        return (self.K, self.M) if self.trans_a and not self.rs else (self.M, self.K)

    @property
    def b_stored(self) -> tuple[int, int]:
        return (self.N, self.K) if self.trans_b else (self.K, self.N)


def _copy(dst: str, src: str, rows: int, cols: int, swz: int, nt: int) -> str:
    idx = f"tc::swizzle_offset<{cols}, 2>(r, c)" if swz else "i"
    return (f"  for (int i = threadIdx.x; i < {rows * cols}; i += {nt}) {{\n"
            f"    const int r = i / {cols}, c = i % {cols};\n"
            f"    (void)r; (void)c;\n"
            f"    {dst}[{idx}] = {src}[i];\n"
            f"  }}\n")


def kernel_source(case: GemmCase) -> str:
    """One extern "C" __global__ kernel named case.name(const T* A, const T* B, float* C)."""
    c = case
    T = CTYPE[c.dtype]
    MI, NI = c.M // c.WM // 16, c.N // c.WN // 8
    nt = c.threads
    ar, ac = c.a_stored
    br, bc = c.b_stored
    body = [f'extern "C" __global__ void __launch_bounds__({nt}) {c.name}(const {T}* __restrict__ gA, '
            f"const {T}* __restrict__ gB, float* __restrict__ gC) {{\n"]
    body.append(f"  __shared__ __align__(128) {T} Bs[{br * bc}];\n")
    if not c.rs:
        body.append(f"  __shared__ __align__(128) {T} As[{ar * ac}];\n")
        body.append(_copy("As", "gA", ar, ac, c.swz_a, nt))
    body.append(_copy("Bs", "gB", br, bc, c.swz_b, nt))
    body.append("  __syncthreads();\n")
    body.append("  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n"
                f"  const int wm = warp % {c.WM}, wn = warp / {c.WM};\n")
    body.append(f"  float acc[{MI * NI * 4}];\n"
                f"#pragma unroll\n  for (int i = 0; i < {MI * NI * 4}; ++i) acc[i] = 0.f;\n")
    if c.rs:
        NK = c.K // 8
        body.append(f"  {T} areg[{MI * NK * 4}];\n"
                    f"#pragma unroll\n  for (int mi = 0; mi < {MI}; ++mi)\n"
                    f"#pragma unroll\n  for (int nk = 0; nk < {NK}; ++nk)\n"
                    f"#pragma unroll\n  for (int h = 0; h < 2; ++h)\n"
                    f"#pragma unroll\n  for (int e = 0; e < 2; ++e) {{\n"
                    f"    const int row = wm * {c.M // c.WM} + 16 * mi + 8 * h + lane / 4;\n"
                    f"    const int k = 8 * nk + 2 * (lane % 4) + e;\n"
                    f"    areg[e + 2 * h + 4 * (nk + {NK} * mi)] = gA[row * {c.K} + k];\n"
                    f"  }}\n")
        body.append(f"  tc::gemm_rs<{c.M}, {c.N}, {c.K}, {c.WM}, {c.WN}, {str(c.trans_b).lower()}, "
                    f"{c.swz_b}, {T}>(areg, Bs, acc);\n")
    else:
        body.append(f"  tc::gemm_ss<{c.M}, {c.N}, {c.K}, {c.WM}, {c.WN}, {str(c.trans_a).lower()}, "
                    f"{str(c.trans_b).lower()}, {c.swz_a}, {c.swz_b}, {T}>(As, Bs, acc);\n")
    body.append(f"#pragma unroll\n  for (int mi = 0; mi < {MI}; ++mi)\n"
                f"#pragma unroll\n  for (int ni = 0; ni < {NI}; ++ni)\n"
                f"#pragma unroll\n  for (int h = 0; h < 2; ++h)\n"
                f"#pragma unroll\n  for (int e = 0; e < 2; ++e) {{\n"
                f"    const int row = wm * {c.M // c.WM} + 16 * mi + 8 * h + lane / 4;\n"
                f"    const int col = wn * {c.N // c.WN} + 8 * ni + 2 * (lane % 4) + e;\n"
                f"    gC[row * {c.N} + col] = acc[e + 2 * h + 4 * (ni + {NI} * mi)];\n"
                f"  }}\n}}\n")
    return "".join(body)


def module_source(cases) -> str:
    return "#include <tilecraft/tilecraft.h>\n\n" + "\n".join(kernel_source(c) for c in cases)


# (M, N, K, WM, WN) of the gemm_ss cases.  The last two exercise an odd number of n8 tiles per
# warp (ldmatrix x2 leftover), warp chunk offsets that are not a multiple of the swizzle group
# (the slow addressing path) and the C % 4 / C % 2 swizzle groups (rows of 48 and 96 elements).
SS_SHAPES = [(128, 128, 32, 2, 2), (64, 64, 64, 4, 1), (128, 256, 32, 2, 4), (64, 128, 16, 4, 1),
             (32, 24, 32, 2, 1), (64, 48, 96, 2, 2)]
RS_SHAPES = [(64, 64, 64, 4, 1), (64, 128, 16, 4, 1), (128, 64, 32, 4, 1), (32, 24, 48, 2, 1)]


def ss_cases(dtype: str, shapes=SS_SHAPES):
    return [GemmCase(*s, trans_a=ta, trans_b=tb, swz_a=sw, swz_b=sw, dtype=dtype)
            for s in shapes for ta in (False, True) for tb in (False, True) for sw in (0, 1)]


def rs_cases(dtype: str, shapes=RS_SHAPES):
    return [GemmCase(*s, trans_b=tb, swz_b=sw, dtype=dtype, rs=True)
            for s in shapes for tb in (False, True) for sw in (0, 1)]


def all_cases():
    return [c for dt in ("f16", "bf16") for c in ss_cases(dt) + rs_cases(dt)]


# ---- pure-Python model of the swizzle (documented in gemm_sm80.h) --------------------------------

def swizzle_offset(L: int, elem_bytes: int, row: int, col: int) -> int:
    C = L * elem_bytes // 16
    epc = 16 // elem_bytes
    chunk = col // epc
    if C % 8 == 0:
        phys = (chunk & ~7) | ((chunk & 7) ^ (row & 7))
    elif C % 4 == 0:
        phys = (chunk & ~3) | ((chunk & 3) ^ ((row >> 1) & 3))
    elif C % 2 == 0:
        phys = (chunk & ~1) | ((chunk & 1) ^ ((row >> 2) & 1))
    else:
        phys = chunk
    return row * L + phys * epc + col % epc


# ---- NVRTC availability, shared by the header test modules -------------------------------------

@functools.lru_cache(maxsize=None)
def nvrtc_problem(arch: str = "sm_80") -> str | None:
    """Why NVRTC cannot compile for `arch` here (None when it can)."""
    from tilecraft.compiler import CudaCompileError, compile_cuda_nvrtc
    try:
        compile_cuda_nvrtc('extern "C" __global__ void k() {}', arch)
        return None
    except CudaCompileError as e:
        return str(e)


def need_nvrtc(arch: str = "sm_80"):
    import pytest
    problem = nvrtc_problem(arch)
    if problem:
        pytest.skip(f"nvrtc unavailable: {problem}")
