"""A T.Pipelined copy at a position the loop body names (`pos = k * 64`, transform/inline_copy_lets.py): the
loop is pipelined like one that writes the expression in the copy (before, the Let made the copy depend on
something computed inside the loop, and the loop ran loads and compute in turn).  A name whose value reads
memory keeps the loop unpipelined.  Checked: the plan for sm_80 and sm_90a, the copy issued ahead with the
name's expression in the generated code, and the program's result on the CPU target (the reference
semantics).  The GPU run is tests/gpu/test_new_kernels_gpu.py's MLA decode (its KV position is such a name)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilecraft as tilelang  # noqa: E402
import tilecraft.language as T  # noqa: E402


def row_sums(N, rows, read_offsets=False, stages=2):
    """Out[r] = sum over the row r of X (N columns), in 64-column tiles at `pos` (or at Offsets[k])."""
    @T.prim_func
    def main(X: T.Tensor((rows, N), "float32"), Offsets: T.Tensor((N // 64,), "int32"), Out: T.Tensor((rows,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            X_s = T.alloc_shared((rows, 64), "float32")
            acc = T.alloc_fragment((rows, 64), "float32")
            s = T.alloc_fragment((rows,), "float32")
            T.clear(acc)
            for k in T.Pipelined(N // 64, num_stages=stages):
                pos = Offsets[k] if read_offsets else k * 64
                end = pos + 64
                T.copy(X[0:rows, pos:end], X_s)
                for i, j in T.Parallel(rows, 64):
                    acc[i, j] += X_s[i, j]
            T.reduce_sum(acc, s, dim=1)
            T.copy(s, Out)
    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_named_position_is_pipelined(arch):
    k = tilelang.compile(row_sums(512, 16), out_idx=[-1], target={"kind": "cuda", "arch": arch})
    notes = [line for line in k.get_plan().splitlines() if "T.Pipelined" in line]
    assert notes and "2 stages" in notes[0], k.get_plan()


def test_a_position_read_from_memory_stays_unpipelined():
    k = tilelang.compile(row_sums(512, 16, read_offsets=True), out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    assert "T.Pipelined" not in k.get_plan(), k.get_plan()


@pytest.mark.parametrize("read_offsets", [False, True])
def test_the_cpu_result_is_the_row_sums(read_offsets):
    x = torch.randn(16, 512)
    offsets = torch.arange(0, 512, 64, dtype=torch.int32)
    out = tilelang.compile(row_sums(512, 16, read_offsets), out_idx=[-1], target="cpu")(x, offsets)
    torch.testing.assert_close(out, x.sum(1), rtol=1e-5, atol=1e-4)
