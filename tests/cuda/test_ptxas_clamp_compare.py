"""ptxas 13.0 (nvcc 13.0, NVRTC 13.0) miscompiles, for sm_90, a 32-bit clamp `max(0, min(x, C))` whose value is
used and compared with its bound: it fuses the two into `VIMNMX.RELU R, P, ...` and selects on P, which holds the
opposite of `== C` (on the H200, session 25: TileLang's grouped GEMM example with `if actual_rows == block_M`
wrote a group's last tile over the next group's rows).  codegen/cuda.py prints an int max with 0 on sm_90+ as
tc::relu_s32 (bit operations in PTX), which ptxas does not fuse.  nvcc 13.0 is on the CI machine, so the SASS
check sees the bug where the old spelling would reach it; the branch itself runs on the CPU target and, in
tests/gpu, on the GPU."""
from __future__ import annotations

import re

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import env


def clamp_branch(G: int, nblocks: int, block_M: int = 64):
    @T.prim_func
    def main(sizes: T.Tensor((G,), "int32"), padded: T.Tensor((G,), "int32"), D: T.Tensor((nblocks, 3), "int32")):
        with T.Kernel(nblocks, threads=128) as bx:
            idx = T.alloc_var("int32")
            m0 = bx * block_M
            idx = 0
            for i in range(G):
                idx = T.if_then_else(m0 >= padded[i], i, idx)
            actual_rows = T.max(0, T.min(block_M, sizes[idx] + padded[idx] - m0))
            if T.get_thread_binding() == 0:
                D[bx, 0] = actual_rows
                if actual_rows == block_M:
                    D[bx, 1] = 1
                else:
                    D[bx, 1] = 2
                D[bx, 2] = T.max(-5, T.min(block_M, sizes[idx] - m0))   # not a max with 0: printed as before
    return main


SIZES = [500, 300, 700, 120]


def _inputs():
    padded = [0]
    for s in SIZES[:-1]:
        padded.append(padded[-1] + -(-s // 64) * 64)
    return torch.tensor(SIZES, dtype=torch.int32), torch.tensor(padded, dtype=torch.int32), sum(-(-s // 64) for s in SIZES)


def _expected(sizes, padded, nb):
    want = []
    for bx in range(nb):
        idx = max(i for i in range(len(SIZES)) if bx * 64 >= int(padded[i]))
        rows = max(0, min(64, int(sizes[idx]) + int(padded[idx]) - bx * 64))
        want.append([rows, 1 if rows == 64 else 2, max(-5, min(64, int(sizes[idx]) - bx * 64))])
    return want


@pytest.mark.cxx
def test_the_clamp_branch_on_the_cpu_target():
    sizes, padded, nb = _inputs()
    D = torch.zeros(nb, 3, dtype=torch.int32)
    tilecraft.compile(clamp_branch(len(SIZES), nb), target="cpu")(sizes, padded, D)
    assert D.tolist() == _expected(sizes, padded, nb)


@pytest.mark.nvcc
@pytest.mark.sass
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_ptxas_gets_no_fusable_relu_clamp(arch):
    from tilecraft.compiler.sass import disassemble
    _, _, nb = _inputs()
    with env.override(cuda_compiler="nvcc"):
        k = tilecraft.compile(clamp_branch(len(SIZES), nb), target={"kind": "cuda", "arch": arch})
    src = k.get_kernel_source()
    sass = disassemble(k.artifact.binary)
    if arch == "sm_90a":
        assert "tc::relu_s32(tc::min(64, " in src and "tc::max(-5, " in src, src
    else:
        assert "relu_s32" not in src   # sm_80 has no VIMNMX: the plain spelling stays
    assert not re.search(r"VIMNMX\.RELU\s+R\d+,\s*P\d", sass), sass


@pytest.mark.gpu
def test_the_clamp_branch_on_the_gpu():
    sizes, padded, nb = _inputs()
    D = torch.zeros(nb, 3, dtype=torch.int32, device="cuda")
    tilecraft.compile(clamp_branch(len(SIZES), nb), target="auto")(sizes.cuda(), padded.cuda(), D)
    assert D.cpu().tolist() == _expected(sizes, padded, nb)
