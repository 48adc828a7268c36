"""plan_shared_memory: dead buffers' bytes are reused, barriers separate the reuse, and the
per-block budget error lists every buffer (CUDA target, compile only)."""
import pytest

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.kernels import norm

SM90 = {"kind": "cuda", "arch": "sm_90a"}


def test_reduction_scratch_is_reused_between_reductions():
    k = tilelang.compile(norm.softmax.fn(64, 8192, block_M=1, threads=512), out_idx=[-1], target=SM90)
    # two cross-warp reductions (max, sum), each with a 512-float scratch: one scratch's worth
    assert k.artifact.meta["smem_bytes"] == 512 * 4


def two_phase(n=256):
    @T.prim_func
    def main(X: T.Tensor((n, n), "float32"), Y: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S1 = T.alloc_shared((n, 64), "float32")
            S2 = T.alloc_shared((n, 64), "float32")
            T.copy(X[0, 0], S1)
            T.copy(S1, Y[0, 0])
            T.copy(X[0, 64], S2)
            T.copy(S2, Y[0, 64])
    return main


def test_buffers_with_disjoint_lifetimes_share_bytes_and_get_a_barrier():
    k = tilelang.compile(two_phase(), target=SM90)
    assert k.artifact.meta["smem_bytes"] == 256 * 64 * 4, "S2 reuses S1's bytes"
    src = k.get_kernel_source()
    # S2's first write must come after a barrier that follows S1's last read
    last_s1 = src.rindex("S1[")
    first_s2_write = src.index("S2[")
    assert "__syncthreads" in src[last_s1:first_s2_write]


def test_budget_error_lists_buffers():
    @T.prim_func
    def big(X: T.Tensor((1024, 1024), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((256, 256), "float32")
            T.copy(X[0, 0], S)
            T.copy(S, X[0, 0])
    with pytest.raises(tilelang.TilecraftError) as e:
        tilelang.compile(big, target=SM90)
    msg = str(e.value)
    assert "262144 bytes" in msg and "S (256, 256) float32" in msg and "test_shared_memory_plan.py" in msg


def test_cross_warp_reduction_barriers_come_from_insert_syncs():
    """softmax over 8 warps: each scratch store is followed by a barrier before the loads that read
    it, the second reduction's store (same bytes) waits for the first one's readers, and nothing
    more: 3 barriers (the lowering used to add its own, 7 in all)."""
    k = tilelang.compile(norm.softmax.fn(64, 8192, block_M=1, threads=256), out_idx=[-1], target=SM90)
    src = k.get_kernel_source()
    assert src.count("__syncthreads") == 3
    for scratch in ("red_smemr3", "red_smemr6"):
        store = src.index(f"{scratch}[tc_tid] =")
        first_load = src.index(f"{scratch}[(", store)
        assert "__syncthreads" in src[store:first_load], f"{scratch}: loads race with the stores"
    assert "__syncthreads" in src[src.rindex("red_smemr3["):src.index("red_smemr6[tc_tid] =")]
