"""On sm_90+ `T.atomic_add` of a shared tile into global memory is one TMA bulk reduce-add per row
(tc::bulk_reduce_add, cp.reduce.async.bulk ... .add; SASS UBLKRED) after a proxy fence and a barrier,
closed by a bulk-group wait before the tile is written again: until the rows are read, or, where the
kernel reads the destination itself, until the adds are done.  sm_80, rows that are not 16-byte
multiples, and tc.bulk_reduce=False keep one atomic per element.  Programs: tests/cpu/test_bulk_reduce.py
(run there against torch; on the GPU in tests/gpu/test_bulk_reduce_gpu.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_bulk_reduce import scatter_add  # noqa: E402

pytestmark = pytest.mark.cuda_compile


def _kernel(arch, configs=None, **kw):
    args = dict(B=6, R=120, N=64, bm=32, step=20, iters=3)
    args.update(kw)
    return tilelang.compile(scatter_add(**args), target={"kind": "cuda", "arch": arch}, pass_configs=configs or {})


def _body(k):
    return k.get_kernel_source().split("__global__")[1]


@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
@pytest.mark.parametrize("dtype,row_bytes", [("float32", 256), ("float16", 128), ("bfloat16", 128)])
def test_a_shared_tile_is_added_by_rows_through_the_tma_unit(arch, dtype, row_bytes):
    body = _body(_kernel(arch, dtype=dtype, strided=True))
    assert f"tc::bulk_reduce_add<{row_bytes}>(" in body, body
    assert "tc::atomic_add(" not in body and "bulk_reduce_add_n" not in body
    fence, issue, commit = (body.index(s) for s in ("tc::fence_proxy_async_shared()", "tc::bulk_reduce_add<",
                                                    "tc::bulk_commit()"))
    assert fence < body.index("__syncthreads()", fence) < issue < commit
    assert "< 120" in body[fence:commit], "rows past the tensor's end are not added"
    _deferred_wait(body)


@pytest.mark.parametrize("dtype,row_bytes", [("float32", 256), ("float16", 128)])
def test_a_tile_contiguous_in_both_memories_is_one_instruction(dtype, row_bytes):
    body = _body(_kernel("sm_90a", dtype=dtype))
    assert "tc::bulk_reduce_add<" not in body and "tc::atomic_add(" not in body
    assert body.count("tc::bulk_reduce_add_n(") == 1, body
    call = body[body.index("tc::bulk_reduce_add_n("):]
    call = call[:call.index(";")]
    # its bytes: the tile's rows inside the 120-row tensor (none when it starts past the end), row_bytes each
    assert "120 -" in call and "32" in call and str(row_bytes) in call, call
    _deferred_wait(body)


def _deferred_wait(body):
    fence = body.index("tc::fence_proxy_async_shared()")
    # deferred: the wait for the rows' shared reads comes before the tile is written again (the next
    # iteration's store, placed ahead of it in the loop body) and before the block exits
    loop = body.index("for (int it")
    wait = body.index("tc::bulk_wait_read()", loop)
    store = body.index("&s[", wait)
    assert wait < body.index("__syncthreads()", wait) < store < fence
    assert body.rstrip().endswith("tc::bulk_wait_read();\n}"), body[-200:]


def test_a_kernel_that_reads_the_destination_waits_for_the_adds():
    body = _body(_kernel("sm_90a", read_back=True))
    assert "tc::bulk_commit_wait<false>()" in body and "tc::bulk_commit_wait<true>()" not in body


@pytest.mark.parametrize("arch,configs,kw", [("sm_80", None, {}),
                                             ("sm_90a", {"tc.bulk_reduce": False}, {}),
                                             ("sm_90a", {"tl.disable_tma_lower": True}, {}),
                                             ("sm_90a", None, {"N": 6})])   # 24-byte rows
def test_element_atomics_where_the_bulk_reduce_does_not_apply(arch, configs, kw):
    body = _body(_kernel(arch, configs, **kw))
    assert "bulk_reduce_add" not in body and "tc::atomic_add(" in body


@pytest.mark.sass
def test_the_sass_has_the_bulk_reduce():
    sass = _kernel("sm_90a").get_sass()
    assert "UBLKRED" in sass and "ADD.F32" in sass


def test_a_tile_added_in_a_loop_frees_its_bytes_for_later_buffers():
    """The wait after the loop ends the tile's life there: a larger tile after the loop reuses its bytes
    (112 KB + 128 KB would not fit sm_90a's 227 KB side by side; TileLang's gqa_bwd_tma_reduce has this
    shape: dQ added in the loop, dK / dV after it)."""
    import tilecraft.language as T

    @T.prim_func
    def main(X: T.Tensor((4, 128, 224), "float32"), W: T.Tensor((4, 128, 256), "float32"),
             Y: T.Tensor((512, 224), "float32"), Z: T.Tensor((512, 256), "float32")):
        with T.Kernel(4, threads=256) as b:
            s = T.alloc_shared((128, 224), "float32")
            t = T.alloc_shared((128, 256), "float32")
            for it in T.serial(2):
                T.copy(X[b, :, :], s)
                T.atomic_add(Y[b * 128 + it:b * 128 + it + 128, :], s)
            T.copy(W[b, :, :], t)
            T.atomic_add(Z[b * 128:(b + 1) * 128, :], t)

    body = _body(tilelang.compile(main, target={"kind": "cuda", "arch": "sm_90a"}))
    assert body.count("tc::bulk_reduce_add_n(") == 2
    loop_end = body.index("tc::bulk_commit()")
    assert body.index("tc::bulk_wait_read()", loop_end) < body.index("&t[", loop_end)


# ---- cuda_ops/tma_reduce.py: a tile that stages a gemm accumulator for the reduce takes the 128-byte swizzle ----

def dq_like(M=64, N=128, K=64, R=100, blocks=4, dtype="float16", threads=128, read_tile=False):
    """FlashAttention backward's dQ path in small: block b adds A_b @ B into Y[16 b:16 b + M, :] through
    a shared fp32 tile (blocks overlap, the last ones run past R).  read_tile: the tile is also read
    back into Z (a use that must not see another layout: left plain)."""
    import tilecraft.language as T

    @T.prim_func
    def main(A: T.Tensor((blocks, M, K), dtype), B: T.Tensor((K, N), dtype), Y: T.Tensor((R, N), "float32"),
             Z: T.Tensor((M, N), "float32")):
        with T.Kernel(blocks, threads=threads) as b:
            a_s = T.alloc_shared((M, K), dtype)
            b_s = T.alloc_shared((K, N), dtype)
            acc = T.alloc_fragment((M, N), "float32")
            s = T.alloc_shared((M, N), "float32")
            T.copy(A[b, :, :], a_s)
            T.copy(B[:, :], b_s)
            T.clear(acc)
            T.gemm(a_s, b_s, acc)
            T.copy(acc, s)
            T.atomic_add(Y[b * 16:b * 16 + M, :], s)
            if read_tile:
                T.copy(s, Z[:, :])
    return main


def test_an_accumulator_staged_for_a_reduce_is_added_by_tma_tensor_reduces():
    k = tilelang.compile(dq_like(), target={"kind": "cuda", "arch": "sm_90a"})
    body = _body(k)
    # the tile in the wgmma operands' 128-byte swizzle: four 32-float column panels, one tensor reduce each,
    # issued by one thread after the fence and the barrier; rows past Y's end are dropped by the TMA unit
    assert body.count("tc::tma_reduce_add_tile(") == 4 and "bulk_reduce_add" not in body, body
    assert "tc::vec_store<float, float, 2>((&s[tc::swizzle_offset_sm90<128, 4, 64>(" in body, body
    fence, issue = body.index("tc::fence_proxy_async_shared()"), body.index("tc::tma_reduce_add_tile(")
    assert fence < body.index("__syncthreads()", fence) < body.index("tc_tid == 0", fence) < issue
    assert "(b * 16)" in body[issue:issue + 200], body[issue:issue + 200]
    # Y's tensor map (parameter 2): 64-row x 32-float boxes in the 128-byte swizzle
    assert k.artifact.meta["tma"] == [{"param": 2, "box": [64, 32], "swizzle": 128, "reduce": True}], \
        k.artifact.meta["tma"]
    assert body.rstrip().endswith("tc::bulk_wait_read();\n}"), body[-200:]   # the shared reads end before exit


@pytest.mark.parametrize("arch,kw", [("sm_90a", {"read_tile": True}),    # another reader sees the layout
                                     ("sm_90a", {"configs": {"tc.tma_reduce": False}}),
                                     ("sm_80", {}),                       # no bulk reduce: element atomics
                                     ("sm_90a", {"N": 24})])              # 96-byte rows: no swizzle atom
def test_a_tile_stays_plain_where_the_tensor_reduce_does_not_apply(arch, kw):
    configs = kw.pop("configs", {})
    body = _body(tilelang.compile(dq_like(**kw), target={"kind": "cuda", "arch": arch}, pass_configs=configs))
    assert "tma_reduce_add_tile" not in body and "&s[tc::swizzle" not in body, body


@pytest.mark.parametrize("which", ["wgmma", "mma"])
def test_the_padding_takes_a_warps_accumulator_store_to_the_fewest_wavefronts(which):
    """Why the layout: a warp's first 8-byte store of a 64x128 fp32 accumulator (each lane two adjacent
    columns of 8 rows) hits each bank 8 times in a row-major tile of 512-byte rows, twice (the minimum for
    256 bytes) in the 128-byte swizzle of tc::swizzle_offset_sm90 (gemm_sm90.h's formula)."""
    from tilecraft.ir.layout.fragment import _element, mma_accumulator_layout, wgmma_accumulator_layout
    lay = (wgmma_accumulator_layout((64, 128), 256, wg_n=2) if which == "wgmma"
           else mma_accumulator_layout((64, 128), 128, 4, 1))

    def plain(r, c):
        return r * 128 + c

    def swizzled(r, c, rows=64, w=32, epc=4):
        return (c // w) * rows * w + r * w + (((c % w) // epc) ^ (r % 8)) * epc + c % epc

    def wavefronts(offset):
        banks = {}
        for lane in range(32):
            (r0, c0), (r1, c1) = _element(lay, lane, 0), _element(lay, lane, 1)
            assert (r1, c1) == (r0, c0 + 1)         # one 8-byte vector store
            for r, c in ((r0, c0), (r1, c1)):
                word = offset(r, c)
                banks.setdefault(word % 32, set()).add(word)
        return max(len(w) for w in banks.values())
    assert wavefronts(plain) == 8
    assert wavefronts(swizzled) == 2


def test_element_atomics_of_a_shared_tile_beside_a_gemm_still_compile():
    """T.atomic_add with a scalar value (an element of a shared tile, as DeepSeek's sparse MLA backward adds
    dKV by T.atomic_addx4) in a kernel with gemms: the tensor-reduce planning looks only at tile-valued adds
    (a scalar value once crashed it: 'Load' object has no attribute 'covers_whole')."""
    import tilecraft.language as T

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as b:
            a_s = T.alloc_shared((64, 64), "float16")
            b_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            s = T.alloc_shared((64, 64), "float32")
            T.copy(A[:, :], a_s)
            T.copy(B[:, :], b_s)
            T.clear(acc)
            T.gemm(a_s, b_s, acc)
            T.copy(acc, s)
            for i, j in T.Parallel(64, 64):
                T.atomic_add(Y[i, j], s[i, j])

    body = _body(tilelang.compile(main, target={"kind": "cuda", "arch": "sm_90a"}))
    assert "tc::atomic_add(" in body and "tma_reduce_add_tile" not in body
