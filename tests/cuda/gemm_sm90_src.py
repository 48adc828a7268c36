"""CUDA sources of small driver kernels for tilecraft/gemm_sm90.h (tc::gemm_ss_sm90), shared by the
compile-only test (tests/cuda/test_gemm_sm90_header.py) and the GPU test
(tests/gpu/test_gemm_sm90_header_gpu.py), plus a pure-Python model of the sm90 shared layout, the
wgmma matrix descriptors built from it and the addresses the hardware reads through them.

Each kernel runs one thread block of 128*WG threads: it copies A and B, stored in global memory
exactly as the gemm expects them in shared memory (A: [M][K] or, transposed, [K][M]; B: [K][N]
or, transposed, [N][K]; row-major, contiguous), into __align__(1024) shared arrays through
tc::swizzle_offset_sm90, runs tc::fence_proxy_async_shared + __syncthreads, loads the accumulator
from C ([M][N] f32) through the documented register-slot mapping, calls the gemm REPS times and
writes C back through the same mapping; so C_out = C_in + REPS * op(A) @ op(B).  info[0..1] get
the shared addresses of A and B modulo 1024 (the layout needs both 0).
"""
from __future__ import annotations

from dataclasses import dataclass

from gemm_header_src import swizzle_offset  # noqa: F401  (one model of tc::swizzle_offset)

CTYPE = {"f16": "tc::half_t", "bf16": "tc::bfloat16_t"}


@dataclass(frozen=True)
class Sm90Case:
    M: int
    N: int
    K: int
    WG: int
    trans_a: bool = False
    trans_b: bool = False
    dtype: str = "f16"
    reps: int = 1

    @property
    def name(self) -> str:
        return (f"gemm_sm90_{self.M}x{self.N}x{self.K}_wg{self.WG}_"
                f"{'T' if self.trans_a else 'N'}{'T' if self.trans_b else 'N'}_{self.dtype}"
                + (f"_r{self.reps}" if self.reps != 1 else ""))

    @property
    def threads(self) -> int:
        return 128 * self.WG

    @property
    def a_stored(self) -> tuple[int, int]:
        return (self.K, self.M) if self.trans_a else (self.M, self.K)

    @property
    def b_stored(self) -> tuple[int, int]:
        return (self.N, self.K) if self.trans_b else (self.K, self.N)

    @property
    def MI(self) -> int:
        return self.M // self.WG // 64

    @property
    def n_acc(self) -> int:  # accumulator floats per thread
        return self.MI * self.N // 2

    @property
    def n_pieces(self) -> list[int]:  # wgmma n of each instruction along N
        return [min(256, self.N - n0) for n0 in range(0, self.N, 256)]


def kernel_source(case: Sm90Case) -> str:
    """One extern "C" __global__ kernel case.name(const T* A, const T* B, float* C, int* info)."""
    c = case
    T = CTYPE[c.dtype]
    ar, ac = c.a_stored
    br, bc = c.b_stored
    nt = c.threads
    return f"""extern "C" __global__ void __launch_bounds__({nt}) {c.name}(const {T}* __restrict__ gA,
    const {T}* __restrict__ gB, float* __restrict__ gC, int* __restrict__ info) {{
  __shared__ __align__(1024) {T} As[{ar * ac}];
  __shared__ __align__(1024) {T} Bs[{br * bc}];
  for (int i = threadIdx.x; i < {ar * ac}; i += {nt})
    As[tc::swizzle_offset_sm90<{ac}, 2, {ar}>(i / {ac}, i % {ac})] = gA[i];
  for (int i = threadIdx.x; i < {br * bc}; i += {nt})
    Bs[tc::swizzle_offset_sm90<{bc}, 2, {br}>(i / {bc}, i % {bc})] = gB[i];
  tc::fence_proxy_async_shared();
  __syncthreads();
  if (threadIdx.x == 0) {{
    info[0] = static_cast<int>(tc::smem_addr(As) % 1024u);
    info[1] = static_cast<int>(tc::smem_addr(Bs) % 1024u);
  }}
  const int lane = threadIdx.x % 32, w = (threadIdx.x / 32) % 4, g = threadIdx.x / 128;
  float acc[{c.n_acc}];
#pragma unroll
  for (int mi = 0; mi < {c.MI}; ++mi)
#pragma unroll
  for (int ni = 0; ni < {c.N // 8}; ++ni)
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
  for (int e = 0; e < 2; ++e) {{
    const int row = g * {c.M // c.WG} + 64 * mi + 16 * w + 8 * h + lane / 4;
    const int col = 8 * ni + 2 * (lane % 4) + e;
    acc[e + 2 * h + 4 * (ni + {c.N // 8} * mi)] = gC[row * {c.N} + col];
  }}
#pragma unroll 1
  for (int rep = 0; rep < {c.reps}; ++rep)
    tc::gemm_ss_sm90<{c.M}, {c.N}, {c.K}, {c.WG}, {str(c.trans_a).lower()}, {str(c.trans_b).lower()}, {T}>(As, Bs, acc);
#pragma unroll
  for (int mi = 0; mi < {c.MI}; ++mi)
#pragma unroll
  for (int ni = 0; ni < {c.N // 8}; ++ni)
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
  for (int e = 0; e < 2; ++e) {{
    const int row = g * {c.M // c.WG} + 64 * mi + 16 * w + 8 * h + lane / 4;
    const int col = 8 * ni + 2 * (lane % 4) + e;
    gC[row * {c.N} + col] = acc[e + 2 * h + 4 * (ni + {c.N // 8} * mi)];
  }}
}}
"""


def module_source(cases) -> str:
    return "#include <tilecraft/tilecraft.h>\n\n" + "\n".join(kernel_source(c) for c in cases)


# (M, N, K, WG, trans_a, trans_b values).  Row lengths cover every descriptor form: K-major
# SW32/SW64/SW128/128-byte panels (K = 16/32/64/128+), MN-major SW32/SW64/SW128/panels and the
# no-swizzle N = 8 B; N pieces (N > 256), odd n8 counts, two m64 tiles per warpgroup (MI = 2),
# WG = 1..4.  Static shared memory stays under 48 KB.
SHAPES = [
    (128, 128, 64, 2, (False,), (False, True)),   # the basic 2-warpgroup tile
    (64, 256, 64, 1, (False,), (False, True)),    # one n256 instruction; B [64][256] in 4 panels
    (128, 64, 64, 1, (False, True), (False, True)),  # MI = 2; A [64][128] M-major in panels
    (64, 64, 128, 1, (False,), (False, True)),    # K = 128: K-major operands in 2 panels
    (64, 32, 192, 1, (False,), (False, True)),    # K = 192: 3 panels; B [192][32] SW64 N-major
    (128, 64, 32, 2, (True,), (False, True)),     # A [32][128] M-major panels, B SW64 K-major
    (64, 128, 64, 1, (True,), (False, True)),     # A [64][64] M-major SW128
    (64, 32, 16, 1, (False,), (False, True)),     # SW32 K-major A; B SW64 N-major / SW32 K-major
    (64, 16, 32, 1, (False,), (False, True)),     # B [32][16] SW32 N-major
    (64, 8, 32, 1, (False,), (False, True)),      # B [32][8] no-swizzle N-major
    (64, 320, 32, 1, (False,), (False, True)),    # N = 256 + 64: two instructions per k step
    (64, 264, 16, 1, (False,), (True,)),          # N = 256 + 8 (K-major B only: 528-byte rows)
    (64, 24, 64, 1, (False,), (True,)),           # n24
    (128, 72, 32, 2, (False,), (True,)),          # n72, 2 warpgroups
    (64, 200, 64, 1, (False,), (True,)),          # n200
    (256, 64, 32, 4, (False,), (False, True)),    # 4 warpgroups
    (192, 64, 32, 3, (False,), (True,)),          # 3 warpgroups
]


def all_cases():
    cases = [Sm90Case(M, N, K, WG, ta, tb, dt)
             for dt in ("f16", "bf16")
             for (M, N, K, WG, tas, tbs) in SHAPES for ta in tas for tb in tbs]
    cases.append(Sm90Case(128, 128, 64, 2, False, False, "f16", reps=2))
    cases.append(Sm90Case(128, 64, 64, 1, True, True, "bf16", reps=3))
    return cases


# ---- pure-Python model -------------------------------------------------------------------------

def layout_ok(L: int, eb: int) -> bool:
    rb = L * eb
    return rb in (16, 32, 64) or (rb > 0 and rb % 128 == 0)


def swizzle_offset_sm90(L: int, eb: int, row: int, col: int, rows: int = 0) -> int:
    """tc::swizzle_offset_sm90<L, eb, rows>, elements (see gemm_sm90.h): rows over 128 bytes are
    stored in column panels of `rows` rows each."""
    rb, epc = L * eb, 16 // eb
    assert layout_ok(L, eb), (L, eb)
    if rb <= 128:
        return swizzle_offset(L, eb, row, col)
    assert rows > 0 and rows % 8 == 0 and row < rows, (rows, row)
    W = 128 // eb
    cw = col % W
    return (col // W) * rows * W + row * W + ((cw // epc) ^ (row % 8)) * epc + cw % epc


@dataclass(frozen=True)
class Desc:
    """The fields of a wgmma matrix descriptor (bytes, not yet >> 4) for one operand layout."""
    mode: int  # 0 none, 1 128B, 2 64B, 3 32B
    lbo: int
    sbo: int

    def bits(self, start: int) -> int:
        return ((start & 0x3FFFF) >> 4) | ((self.lbo >> 4) << 16) | ((self.sbo >> 4) << 32) | (self.mode << 62)

    def fields(self) -> int:
        return self.bits(0)


def operand_desc(L: int, eb: int, k_major: bool, rows: int) -> Desc:
    """The descriptor of a [rows][L] operand tile (rows over 128 bytes: column panels)."""
    rb = L * eb
    mode = {16: 0, 32: 3, 64: 2}.get(rb, 1)
    if k_major:
        return Desc(mode, 16, 8 * min(rb, 128))
    if mode == 0:
        return Desc(0, 8 * rb, 16)
    return Desc(mode, rows * 128 if rb > 128 else 16, 8 * min(rb, 128))


def operand_offset(L: int, eb: int, k_major: bool, mn0: int, k0: int, rows: int) -> int:
    """Byte offset of the descriptor start of the sub-matrix at (mn0, k0)."""
    rb = L * eb
    W = 128 // eb if rb > 128 else L
    d = operand_desc(L, eb, k_major, rows)
    if k_major:
        assert mn0 % 8 == 0 and k0 % 16 == 0
        return (mn0 // 8) * d.sbo + (k0 // W) * rows * 128 + (k0 % W) * eb
    assert k0 % 8 == 0 and mn0 % W == 0
    return (k0 // 8) * (d.lbo if d.mode == 0 else d.sbo) + (mn0 // W) * rows * 128


def hw_address(desc_bits: int, k_major: bool, mn: int, k: int, eb: int = 2) -> int:
    """Shared byte address the tensor core reads for element (mn, k) of the sub-matrix described
    by ``desc_bits``: the canonical layouts of the PTX ISA (9.7.15.5.1.2, T = 16/eb elements per
    16 bytes) followed by the Swizzle<b, 4, 3> of the mode on the absolute byte address."""
    start = (desc_bits & 0x3FFF) << 4
    lbo = ((desc_bits >> 16) & 0x3FFF) << 4
    sbo = ((desc_bits >> 32) & 0x3FFF) << 4
    mode = desc_bits >> 62
    T = 16 // eb
    sw_bytes = {0: 16, 1: 128, 2: 64, 3: 32}[mode]
    if k_major:
        assert mode != 0, "K-major no-swizzle is not used"
        # ((8,m),(T,2k)) : ((S/eb, SBO), (1, T)) with rows S = sw_bytes apart
        addr = start + (mn % 8) * sw_bytes + (mn // 8) * sbo + k * eb
    elif mode == 0:
        # ((T,1,m),(8,k)) : ((1,T,SBO),(T,LBO))
        addr = start + (mn % T) * eb + (mn // T) * sbo + (k % 8) * 16 + (k // 8) * lbo
    else:
        # ((T,S/16,m),(8,k)) : ((1,T,LBO),(S/eb,SBO))
        w = sw_bytes // eb
        addr = start + (mn % w) * eb + (mn // w) * lbo + (k % 8) * sw_bytes + (k // 8) * sbo
    bits = {0: 0, 1: 3, 2: 2, 3: 1}[mode]
    if bits:
        addr ^= ((addr >> 7) & ((1 << bits) - 1)) << 4
    return addr


def issued_instructions(c: Sm90Case):
    """(g, kk, mi, n0, np, a_desc, b_desc) of every wgmma the gemm issues, with A and B at shared
    byte address 0 (pattern aligned), as gemm_ss_sm90 computes them."""
    eb = 2
    La, Lb = (c.M if c.trans_a else c.K), (c.K if c.trans_b else c.N)
    Ra, Rb = c.a_stored[0], c.b_stored[0]
    da, db = operand_desc(La, eb, not c.trans_a, Ra), operand_desc(Lb, eb, c.trans_b, Rb)
    WM = c.M // c.WG
    for g in range(c.WG):
        a_base = operand_offset(La, eb, not c.trans_a, WM, 0, Ra) * g
        for kk in range(c.K // 16):
            for mi in range(c.MI):
                a = da.bits(a_base + operand_offset(La, eb, not c.trans_a, 64 * mi, 16 * kk, Ra))
                for n0, np_ in zip(range(0, c.N, 256), c.n_pieces):
                    b = db.bits(operand_offset(Lb, eb, c.trans_b, n0, 16 * kk, Rb))
                    yield g, kk, mi, n0, np_, a, b


# ---- tc::gemm_rs_sm90 (A from registers) -------------------------------------------------------

# (M, N, K, WG, trans_b values): one and two warpgroups, MI = 2, B in panels, N pieces
RS_SHAPES = [
    (128, 128, 64, 2, (False, True)),   # FlashAttention's P @ V shape with block_M = 128, D = 128
    (64, 64, 64, 1, (False, True)),
    (128, 64, 32, 1, (False,)),         # MI = 2
    (64, 256, 16, 1, (False,)),         # B [16][256] in 4 panels
    (64, 320, 32, 1, (True,)),          # two instructions per k step
]


def rs_cases():
    return [Sm90Case(M, N, K, WG, False, tb, dt) for dt in ("f16", "bf16")
            for (M, N, K, WG, tbs) in RS_SHAPES for tb in tbs]


def rs_name(c: Sm90Case) -> str:
    return c.name.replace("gemm_sm90_", "gemm_rs_sm90_")


def rs_kernel_source(case: Sm90Case) -> str:
    """extern "C" rs_name(case)(const T* A [M][K], const T* B (stored), float* C [M][N], int* info):
    A goes to registers in the documented layout, B to swizzled shared memory; C += A @ op(B)."""
    c = case
    T = CTYPE[c.dtype]
    br, bc = c.b_stored
    nt = c.threads
    nk = c.K // 8
    return f"""extern "C" __global__ void __launch_bounds__({nt}) {rs_name(c)}(const {T}* __restrict__ gA,
    const {T}* __restrict__ gB, float* __restrict__ gC, int* __restrict__ info) {{
  __shared__ __align__(1024) {T} Bs[{br * bc}];
  for (int i = threadIdx.x; i < {br * bc}; i += {nt})
    Bs[tc::swizzle_offset_sm90<{bc}, 2, {br}>(i / {bc}, i % {bc})] = gB[i];
  tc::fence_proxy_async_shared();
  __syncthreads();
  if (threadIdx.x == 0) info[0] = info[1] = static_cast<int>(tc::smem_addr(Bs) % 1024u);
  const int lane = threadIdx.x % 32, w = (threadIdx.x / 32) % 4, g = threadIdx.x / 128;
  {T} a[{c.MI * c.K // 2}];
  float acc[{c.n_acc}];
#pragma unroll
  for (int mi = 0; mi < {c.MI}; ++mi)
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
  for (int e = 0; e < 2; ++e) {{
    const int row = g * {c.M // c.WG} + 64 * mi + 16 * w + 8 * h + lane / 4;
#pragma unroll
    for (int k8 = 0; k8 < {nk}; ++k8) a[e + 2 * h + 4 * (k8 + {nk} * mi)] = gA[row * {c.K} + 8 * k8 + 2 * (lane % 4) + e];
#pragma unroll
    for (int ni = 0; ni < {c.N // 8}; ++ni) acc[e + 2 * h + 4 * (ni + {c.N // 8} * mi)] = gC[row * {c.N} + 8 * ni + 2 * (lane % 4) + e];
  }}
  tc::gemm_rs_sm90<{c.M}, {c.N}, {c.K}, {c.WG}, {str(c.trans_b).lower()}, {T}>(a, Bs, acc);
#pragma unroll
  for (int mi = 0; mi < {c.MI}; ++mi)
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
  for (int e = 0; e < 2; ++e) {{
    const int row = g * {c.M // c.WG} + 64 * mi + 16 * w + 8 * h + lane / 4;
#pragma unroll
    for (int ni = 0; ni < {c.N // 8}; ++ni) gC[row * {c.N} + 8 * ni + 2 * (lane % 4) + e] = acc[e + 2 * h + 4 * (ni + {c.N // 8} * mi)];
  }}
}}
"""


def rs_module_source(cases) -> str:
    return "#include <tilecraft/tilecraft.h>\n\n" + "\n".join(rs_kernel_source(c) for c in cases)
