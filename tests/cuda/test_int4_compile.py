"""int4 on CUDA, compiled with NVRTC for sm_80 and sm_90a (no GPU needed): global -> shared copies of
whole bytes by cp.async (16 bytes = 32 elements), element stores into shared or global memory by
atomic nibble updates (another thread may write the byte's other element), the int4 gemm on the
per-register dot-product path with int32 accumulation.  The CPU target runs the same programs
against torch (tests/cpu/test_int4.py); the GPU runs them in tests/gpu/test_int4_gpu.py."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_int4 import _gemm, _pack_kernel, _unpack_kernel  # noqa: E402

pytestmark = pytest.mark.cuda_compile
ARCHS = ["sm_80", "sm_90a"]


def _src(func, arch):
    return tilelang.compile(func, out_idx=-1, target={"kind": "cuda", "arch": arch}).get_kernel_source()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("trans_b", [True, False])
def test_int4_gemm_compiles_with_byte_copies(arch, trans_b):
    body = _src(_gemm(48, 40, 160, 32, 32, 64, trans_b), arch).split("__global__")[1]
    assert "tc::int8_t* __restrict__ A" in body           # the packed int8 tensor
    # A and B, prologue and loop; A's rows of 160 take 16 bytes (32 nibbles) a copy, B's rows of 40 (not
    # transposed) 4 bytes, the widest that divides them
    assert body.count("tc::cp_async_pipelined_zfill<") == 4
    assert body.count("tc::cp_async_pipelined_zfill<16>((A_s") == 2
    assert body.count(f"tc::cp_async_pipelined_zfill<{16 if trans_b else 4}>((B_s") == 2
    if trans_b:   # both K-major: mma.sync m16n8k64 .s4 on the shared tiles' bytes
        assert "tc::gemm_ss_s4<32, 32, 64, 2, 2>((A_s + " in body and "s4_get" not in body
    else:         # B [K][N]: each thread's dot products, element by element
        assert "tc::s4_get(A_s" in body and "tc::s4_get(B_s" in body and "gemm_ss_s4" not in body
    assert "s4_set" not in body                            # nothing stored nibble by nibble


@pytest.mark.sass
def test_int4_gemm_issues_the_s4_tensor_core_instruction():
    """sm_80: IMMA.16864.S4.S4 (mma.sync m16n8k64 .s4), 32 a k64 step for a 128x128 tile on 4 warps, fed by
    ldmatrix; sm_90a has no int4 tensor cores and ptxas lowers the same PTX onto its int8 IMMA."""
    import re
    k = tilelang.compile(_gemm(128, 128, 256, 128, 128, 64, True), out_idx=-1, target={"kind": "cuda", "arch": "sm_80"})
    sass = k.get_sass()
    assert len(re.findall(r"IMMA\.16864\.S4\.S4", sass)) % 32 == 0 and "IMMA.16864.S4.S4" in sass
    assert "LDSM.16.M88.4" in sass
    k90 = tilelang.compile(_gemm(128, 128, 256, 128, 128, 64, True), out_idx=-1,
                           target={"kind": "cuda", "arch": "sm_90a"})
    assert "IMMA" in k90.get_sass()


@pytest.mark.parametrize("arch", ARCHS)
def test_unaligned_copies_store_nibbles_atomically(arch):
    """A copy from an odd column cannot move whole bytes: each element goes alone, into shared memory
    by an atomic nibble update; registers and thread-local arrays by a plain one."""
    body = _src(_unpack_kernel(40, 32, 16, 18, 3), arch).split("__global__")[1]
    assert "cp_async" not in body
    assert "tc::s4_set_atomic(A_s," in body
    assert "tc::s4_set(A_f," in body and "tc::s4_set(A_l," in body
    assert "tc::int8_t A_f[2];" in body                    # 4 registers of int4 in 2 bytes


@pytest.mark.parametrize("arch", ARCHS)
def test_int4_stores_into_global_are_atomic(arch):
    body = _src(_pack_kernel(5, 12, 3), arch).split("__global__")[1]
    assert "tc::s4_set_atomic(Y," in body and "tc::to_s4(" in body


@pytest.mark.parametrize("arch", ARCHS)
def test_aligned_int4_tiles_go_to_global_as_whole_bytes(arch):
    """Tiles of 8 columns at even offsets into rows of 12: 4 elements (2 bytes) a vector store, no nibble
    shared with another thread."""
    body = _src(_pack_kernel(5, 12, 8), arch).split("__global__")[1]
    assert "tc::vec_store<tc::int8_t, tc::int8_t, 2>((Y + (" in body
    assert "s4_set_atomic(Y," not in body
