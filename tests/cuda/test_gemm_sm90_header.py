"""Compile-only tests of tilecraft/gemm_sm90.h (no GPU): tc::gemm_ss_sm90 for f16 and bf16, both
B orientations, A transposed where the layout allows, several (M, N, K, WG), compiled for sm_90a
with NVRTC and nvcc; the SASS must hold exactly the expected HGMMA instructions (shape, type,
tnspA/tnspB), one WARPGROUP.ARRIVE / DEPBAR per call, and no local memory.  tilecraft.h must still
compile for sm_80/sm_86/sm_89/sm_90 (and gemm_ss_sm90 must refuse those with a clear message).
Plus a pure-Python model: the sm90 shared layout is a bank-conflict-free permutation equal to
tc::swizzle_offset where they overlap, and every address the tensor core reads through the
descriptors gemm_ss_sm90 builds (PTX canonical layouts + swizzle) is the element the layout put
there; the C++ descriptor constants are checked against the model by static_assert."""
from __future__ import annotations

import functools
import os
import re
import sys
from collections import Counter

import pytest

from tilecraft.compiler import (CudaCompileError, compile_cuda_nvcc, compile_cuda_nvrtc, disassemble,
                                find_cuda_tool, find_nvcc, resource_usage)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_header_src import need_nvrtc  # noqa: E402
from gemm_sm90_src import (Desc, Sm90Case, all_cases, hw_address, issued_instructions,  # noqa: E402
                           layout_ok, module_source, operand_desc, operand_offset, swizzle_offset,
                           swizzle_offset_sm90)

CASES = all_cases()


def _need_nvrtc():
    need_nvrtc("sm_90a")


COMPILERS = {"nvrtc": compile_cuda_nvrtc, "nvcc": compile_cuda_nvcc}


@functools.lru_cache(maxsize=None)
def _compile_all(compiler: str):
    if compiler == "nvcc":
        if find_nvcc() is None:
            pytest.skip("nvcc not installed")
    else:
        _need_nvrtc()
    return COMPILERS[compiler](module_source(CASES), "sm_90a")


@functools.lru_cache(maxsize=None)
def _sass(compiler: str) -> dict[str, str]:
    try:
        sass = disassemble(_compile_all(compiler).cubin)
    except RuntimeError as e:
        pytest.skip(f"cannot disassemble: {e}")
    parts = re.split(r"Function\s*:\s*(\w+)", sass)
    return dict(zip(parts[1::2], parts[2::2]))


_INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)([^;]*);")


def _insns(body: str) -> list[tuple[str, str]]:
    return _INSN.findall(body)


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_gemm_sm90_compiles_cleanly(compiler):
    binary = _compile_all(compiler)
    assert binary.cubin[:4] == b"\x7fELF"
    # also catches ptxas' "wgmma ... serialized" performance warnings
    assert "warning" not in binary.log.lower(), binary.log


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_gemm_sm90_sass_has_expected_hgmma(compiler):
    by_kernel = _sass(compiler)
    for c in CASES:
        insns = _insns(by_kernel[c.name])
        hg = [(op, args) for op, args in insns if op.startswith("HGMMA")]
        suffix = ".F32.BF16" if c.dtype == "bf16" else ".F32"
        got = Counter(op for op, _ in hg)
        want = Counter()
        for np_ in c.n_pieces:
            want[f"HGMMA.64x{np_}x16{suffix}"] += (c.K // 16) * c.MI
        # reps > 1 keeps a rolled loop around one unrolled gemm
        assert got == want, (c.name, got, want)
        for _, args in hg:
            assert ("tnspA" in args) == c.trans_a, (c.name, args)
            assert ("tnspB" in args) == (not c.trans_b), (c.name, args)  # B [K][N] is N-major
            assert "gdesc[UR" in args, (c.name, args)  # A from shared memory too
        ops = [op for op, _ in insns]
        assert ops.count("WARPGROUP.ARRIVE") == 1, (c.name, Counter(ops))
        assert sum(op.startswith("WARPGROUP.DEPBAR") for op in ops) == 1, (c.name, Counter(ops))
        assert not any(op.startswith(("LDL", "STL")) for op in ops), c.name
        assert not any(op.startswith("HMMA") for op in ops), c.name


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_gemm_sm90_kernels_do_not_spill(compiler):
    if find_cuda_tool("cuobjdump") is None:
        pytest.skip("cuobjdump not installed")
    usage = resource_usage(_compile_all(compiler).cubin)
    for c in CASES:
        assert usage[c.name]["local_bytes"] == 0, (c.name, usage[c.name])


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90"])
def test_tilecraft_h_still_compiles_without_sm90a(arch):
    """gemm_sm90.h is included everywhere; the layout and fence helpers work on every arch."""
    _need_nvrtc()
    src = ("#include <tilecraft/tilecraft.h>\n"
           'extern "C" __global__ void k(const tc::half_t* g, tc::half_t* out) {\n'
           "  __shared__ __align__(1024) tc::half_t s[64 * 128];\n"
           "  for (int i = threadIdx.x; i < 64 * 128; i += blockDim.x)\n"
           "    s[tc::swizzle_offset_sm90<128, 2, 64>(i / 128, i % 128)] = g[i];\n"
           "  tc::fence_proxy_async_shared();\n"
           "  __syncthreads();\n"
           "  out[threadIdx.x] = s[threadIdx.x];\n}\n")
    binary = compile_cuda_nvrtc(src, arch)
    assert "warning" not in binary.log.lower(), binary.log
    ops = [op for op, _ in _insns(disassemble(binary.cubin))] if find_cuda_tool("cuobjdump") else []
    assert not any(op.startswith("HGMMA") for op in ops)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_gemm_ss_sm90_refuses_non_sm90a(arch):
    _need_nvrtc()
    src = ("#include <tilecraft/tilecraft.h>\n"
           'extern "C" __global__ void k(float* out) {\n'
           "  __shared__ __align__(1024) tc::half_t s[64 * 64];\n"
           "  float acc[32] = {};\n"
           "  tc::gemm_ss_sm90<64, 64, 64, 1, false, true, tc::half_t>(s, s, acc);\n"
           "  out[threadIdx.x] = acc[0];\n}\n")
    with pytest.raises(CudaCompileError, match="needs sm_90a"):
        compile_cuda_nvrtc(src, arch)


@pytest.mark.parametrize("bad, message", [
    ("<96, 64, 64, 1, false, true, tc::half_t>", "M must be a multiple of 64\\*WG"),
    ("<128, 64, 64, 4, false, true, tc::half_t>", "M must be a multiple of 64\\*WG"),
    ("<64, 20, 64, 1, false, true, tc::half_t>", "N must be a multiple of 8"),
    ("<64, 64, 24, 1, false, true, tc::half_t>", "K must be a multiple of 16"),
    ("<64, 64, 48, 1, false, true, tc::half_t>", "A's stored row"),        # A [64][48]: 96-byte rows
    ("<64, 64, 96, 1, false, false, tc::half_t>", "A's stored row"),       # A [64][96]: 192 bytes
    ("<64, 96, 64, 1, false, false, tc::half_t>", "B's stored row"),       # B [64][96]: 192 bytes
    ("<64, 96, 32, 1, true, false, tc::half_t>", "B's stored row"),        # A [32][64] fine, B not
    ("<64, 40, 32, 1, false, false, tc::half_t>", "B's stored row"),       # B [32][40]: 80 bytes
    ("<64, 64, 32, 1, false, true, float>", "T must be tc::half_t or tc::bfloat16_t"),
])
def test_static_assert_messages(bad, message):
    _need_nvrtc()
    elem = "float" if "float>" in bad else "tc::half_t"
    src = ("#include <tilecraft/tilecraft.h>\n"
           'extern "C" __global__ void k(float* out) {\n'
           f"  __shared__ __align__(1024) {elem} s[64 * 128];\n"
           "  float acc[128] = {};\n"
           f"  tc::gemm_ss_sm90{bad}(s, s, acc);\n"
           "  out[threadIdx.x] = acc[0];\n}\n")
    with pytest.raises(CudaCompileError, match=message):
        compile_cuda_nvrtc(src, "sm_90a")


def test_swizzle_offset_sm90_rejects_other_row_lengths():
    _need_nvrtc()
    src = ("#include <tilecraft/tilecraft.h>\n"
           'extern "C" __global__ void k(int* out) { out[0] = tc::swizzle_offset_sm90<96, 2>(1, 2); }\n')
    with pytest.raises(CudaCompileError, match="a row must be 16, 32, 64 or a multiple of 128 bytes"):
        compile_cuda_nvrtc(src, "sm_80")


def test_generated_wgmma_header_is_current():
    from tilecraft.device import gen_wgmma
    with open(gen_wgmma.HEADER) as f:
        assert f.read() == gen_wgmma.render(), "run: python -m tilecraft.device.gen_wgmma"


# ---- model of the layout and the descriptors ---------------------------------------------------

ROW_LENGTHS = [8, 16, 32, 64, 128, 192, 256, 320, 512]


@pytest.mark.parametrize("L", ROW_LENGTHS)
def test_sm90_layout_is_a_conflict_free_permutation(L):
    eb, epc, rows = 2, 8, 32
    offs = sorted(swizzle_offset_sm90(L, eb, r, c, rows) for r in range(rows) for c in range(L))
    assert offs == list(range(rows * L))
    for r in range(rows):
        for c in range(0, L, epc):  # 16-byte chunks stay whole
            base = swizzle_offset_sm90(L, eb, r, c, rows)
            assert base % epc == 0
            assert [swizzle_offset_sm90(L, eb, r, c + i, rows) for i in range(epc)] == list(range(base, base + epc))
    if L * eb <= 128:
        assert all(swizzle_offset_sm90(L, eb, r, c, rows) == swizzle_offset(L, eb, r, c)
                   for r in range(rows) for c in range(L))
    if L * eb >= 128:  # 8 rows of one chunk, and 8 chunks of one row: 8 distinct bank groups
        for r0 in range(0, rows, 8):
            for c in range(0, L, epc):
                assert len({swizzle_offset_sm90(L, eb, r0 + i, c, rows) // epc % 8 for i in range(8)}) == 8
        for r in range(rows):
            for c0 in range(0, L, 8 * epc):
                assert len({swizzle_offset_sm90(L, eb, r, c0 + j * epc, rows) // epc % 8 for j in range(8)}) == 8


def test_layout_ok_row_lengths():
    assert [L for L in range(8, 600, 8) if layout_ok(L, 2)] == [8, 16, 32] + list(range(64, 600, 64))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_descriptors_address_exactly_the_stored_elements(case):
    """Every (row, col) element each wgmma reads through its descriptors, per the PTX canonical
    layouts, is stored at that address by swizzle_offset_sm90 (tiles at address 0)."""
    c, eb = case, 2
    La, Lb = (c.M if c.trans_a else c.K), (c.K if c.trans_b else c.N)
    WM = c.M // c.WG
    a_seen, b_seen = set(), set()
    for g, kk, mi, n0, np_, da, db in issued_instructions(c):
        for mm in range(64):
            for kx in range(16):
                m, k = g * WM + 64 * mi + mm, 16 * kk + kx
                r, col = (k, m) if c.trans_a else (m, k)
                want = eb * swizzle_offset_sm90(La, eb, r, col, c.a_stored[0])
                assert hw_address(da, not c.trans_a, mm, kx) == want, (g, kk, mi, mm, kx)
                a_seen.add((m, k))
        for nn in range(np_):
            for kx in range(16):
                n, k = n0 + nn, 16 * kk + kx
                r, col = (n, k) if c.trans_b else (k, n)
                want = eb * swizzle_offset_sm90(Lb, eb, r, col, c.b_stored[0])
                assert hw_address(db, c.trans_b, nn, kx) == want, (kk, n0, nn, kx)
                b_seen.add((n, k))
    assert len(a_seen) == c.M * c.K and len(b_seen) == c.N * c.K


def test_plain_swizzle_offset_rows_over_128_bytes_are_not_describable():
    """Why the panels: with tc::swizzle_offset's 256-byte rows, the SWIZZLE_128B descriptor (the
    only mode whose XOR group matches) reads other elements than the ones stored."""
    L, eb = 128, 2  # B [16][128] N-major as gemm_sm80 stores it
    d = Desc(1, 1024, 8 * L * eb)  # best guess: SBO = 8 rows of 256 bytes
    mismatches = sum(hw_address(d.bits(0), False, n, k) != eb * swizzle_offset(L, eb, k, n)
                     for n in range(128) for k in range(16))
    assert mismatches > 0


def _cxx_descriptor_checks() -> str:
    lines = []
    for L in [8, 16, 32, 64, 128, 192, 256, 320, 512]:
        for km in (True, False):
            if km and L < 16:
                continue
            rows = 96   # the tile's row count: the column panels' height when L * 2 > 128
            d = operand_desc(L, 2, km, rows)
            op = f"tc::detail::Sm90Operand<{L}, 2, {str(km).lower()}, {rows}>"
            lines.append(f"static_assert({op}::FIELDS == {d.fields()}ull, \"fields {L} {km}\");")
            W = 64 if L > 64 else L
            for mn0, k0 in ([(0, 0), (8, 16), (64, 0), (72, 48)] if km else
                            [(0, 0), (0, 8), (0, 16), (W, 16), (2 * W, 32)]):
                if (not km and mn0 >= L) or (km and k0 >= L):
                    continue
                lines.append(f"static_assert({op}::offset({mn0}, {k0}) == "
                             f"{operand_offset(L, 2, km, mn0, k0, rows)}, \"offset {L} {km} {mn0} {k0}\");")
    return "\n".join(lines)


def test_cxx_descriptor_constants_match_the_model():
    _need_nvrtc()
    src = ("#include <tilecraft/tilecraft.h>\n" + _cxx_descriptor_checks()
           + '\nextern "C" __global__ void k() {}\n')
    compile_cuda_nvrtc(src, "sm_90a")


def test_cxx_layout_function_matches_the_model_at_compile_time():
    """swizzle_offset_sm90 is TC_DEVICE (not constexpr); compare it on the device side instead:
    compile a kernel whose every table entry is checked against the model and folds to nothing
    when all match (no STG of an error flag survives)."""
    _need_nvrtc()
    checks = []
    for L in (16, 32, 64, 128, 192):
        for r in (0, 1, 5, 7, 8, 13):
            for col in (0, 7, 8, 9, 63, L - 1):
                if col < L:
                    checks.append(f"bad |= tc::swizzle_offset_sm90<{L}, 2, 16>({r}, {col}) != "
                                  f"{swizzle_offset_sm90(L, 2, r, col, 16)};")
    src = ("#include <tilecraft/tilecraft.h>\n"
           'extern "C" __global__ void k(int* out) {\n  bool bad = false;\n  '
           + "\n  ".join(checks) + "\n  if (bad) out[0] = 1;\n}\n")
    binary = compile_cuda_nvrtc(src, "sm_80")
    if find_cuda_tool("cuobjdump") is None:
        pytest.skip("cuobjdump not installed")
    ops = [op for op, _ in _insns(disassemble(binary.cubin))]
    assert not any(op.startswith("STG") for op in ops), ops


def test_tc_no_wgmma_skips_the_wrappers_and_gemm_says_so():
    _need_nvrtc()
    body = ('extern "C" __global__ void k(float* out) {\n'
            "  __shared__ __align__(1024) tc::half_t s[64 * 64];\n"
            "  float acc[32] = {};\n"
            "  tc::gemm_ss_sm90<64, 64, 64, 1, false, true, tc::half_t>(s, s, acc);\n"
            "  out[threadIdx.x] = acc[0];\n}\n")
    with pytest.raises(CudaCompileError, match="without TC_NO_WGMMA"):
        compile_cuda_nvrtc("#define TC_NO_WGMMA\n#include <tilecraft/tilecraft.h>\n" + body, "sm_90a")
    compile_cuda_nvrtc("#define TC_NO_WGMMA\n#include <tilecraft/tilecraft.h>\n"
                       'extern "C" __global__ void k(float* o) { o[0] = 1.f; }\n', "sm_90a")
