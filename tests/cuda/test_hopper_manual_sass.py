"""The manual Hopper constructs compiled for sm_90a (and sm_80) without a GPU: what the generated
code and its SASS must contain.  The programs and their CPU / GPU runs against torch are in
tests/cpu/test_hopper_manual.py."""
from __future__ import annotations

import os
import re
import sys
import warnings

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_hopper_manual import gemm_barrier_ring, gemm_roles, gemm_split_n, gemm_two_barriers  # noqa: E402

pytestmark = pytest.mark.cuda_compile
SM90 = {"kind": "cuda", "arch": "sm_90a"}
SM80 = {"kind": "cuda", "arch": "sm_80"}


def _compile(factory, *args, target=SM90):
    kw = factory.compile_kwargs
    return tilelang.compile(factory.fn(*args), out_idx=kw["out_idx"], target=target)


def _branches(src: str) -> list:
    """The text of each `if (tc_tid >= lo && tc_tid < hi) {` branch the T.ws blocks print as."""
    out = []
    for m in re.finditer(r"if \(tc_tid >= (\d+) && tc_tid < (\d+)\) \{", src):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        out.append((int(m.group(1)), int(m.group(2)), src[m.end():i]))
    return out


def test_branches_guard_by_warp_group_and_sync_among_themselves():
    src = _compile(gemm_two_barriers, 256, 256, 256, 128, 128, 64, 0, 1).get_kernel_source()
    branches = _branches(src)
    assert {(lo, hi) for lo, hi, _ in branches} == {(0, 128), (128, 256)}
    for lo, _, body in branches:
        assert "__syncthreads" not in body, "a block barrier inside a branch would hang the other warp group"
        if "named_barrier_sync" in body:
            assert f"tc::named_barrier_sync<{2 + lo // 128}, 128>()" in body
    # a 128-thread wgmma gemm in warp group 1, threads indexed from the branch's first one
    assert "tc::gemm_ss_sm90<128, 128, 64, 1," in src and "(tc_tid - 128)" in src
    assert src.count("tc::mbar_init(") == 2 and src.count("tc::mbar_arrive(") == 2
    assert src.count("tc::mbar_wait_parity(") == 2
    # the producer's generic-proxy writes reach the consumer's wgmma through the async-proxy fence
    producer = next(body for lo, _, body in branches if lo == 0 and "mbar_arrive" in body)
    assert producer.index("tc::fence_proxy_async_shared()") < producer.index("tc::mbar_arrive(")


@pytest.mark.sass
def test_sass_has_mbarrier_wgmma_and_named_barriers():
    ops = set(re.findall(r"\b([A-Z][A-Z0-9]+(?:\.[A-Z0-9]+)*)", _compile(gemm_barrier_ring, 256, 256, 256, 128, 128, 64)
                         .get_sass()))
    # (the gemm reads a stage of a 3-D tile: mma.sync, HMMA; wgmma takes whole tiles only)
    for needed in ("SYNCS.ARRIVE.TRANS64.A1T0", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "HMMA", "BAR.SYNC"):
        assert any(o.startswith(needed) for o in ops), (needed, sorted(ops))


@pytest.mark.sass
def test_set_max_nreg_becomes_setmaxnreg_on_sm90a():
    k = _compile(gemm_roles, 128, 128, 256, 128, 128, 64)   # ptxas warns (an error in tests) if it ignores them
    src = k.get_kernel_source()
    assert "tc::warpgroup_reg_dealloc<40>()" in src and "tc::warpgroup_reg_alloc<232>()" in src
    assert "__launch_bounds__(256, 1)" in src, "one block per SM, so the budgets setmaxnreg moves exist"
    assert "USETMAXREG" in k.get_sass()


def test_set_max_nreg_warns_and_is_dropped_on_sm80():
    from tilecraft.transform import lower_manual_sync_cpu as m
    m._WARNED.clear()
    with pytest.warns(UserWarning, match=r"T.set_max_nreg .* do not apply on sm_80"):
        k = _compile(gemm_roles, 128, 128, 128, 128, 128, 64, target=SM80)
    assert "warpgroup_reg" not in k.get_kernel_source()


def test_automatic_pipelining_leaves_a_hand_specialized_kernel_alone():
    k = _compile(gemm_split_n, 256, 256, 256, 128, 128, 64)
    src = k.get_kernel_source()
    assert "pipe_" not in src and "tma_load" not in src and "warpgroup_reg" not in src
    assert "not pipelined by the compiler" in k.get_plan()
    assert "__launch_bounds__(256)" in src  # no extra producer warp group


def test_fragment_shared_between_branches_is_an_error():
    import tilecraft.language as T
    from tilecraft.errors import TilecraftError

    @T.prim_func
    def main(X: T.Tensor((128, 64), "float32"), Y: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=256) as bx:
            f = T.alloc_fragment((128, 64), "float32")
            with T.ws(0):
                T.copy(X, f)
            with T.ws(1):
                T.copy(f, Y)
    with pytest.raises(TilecraftError, match=r"fragment f is used by T.ws\(0,\) and by T.ws\(1,\)"):
        tilelang.compile(main, out_idx=[1], target=SM90)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = __import__("torch").randn(128, 64)   # the CPU reference has no registers: it runs
        y = tilelang.compile(main, out_idx=[1], target="cpu")(x)
    assert (y == x).all()
