"""TileLang's current module surface through `import tilelang...`: `tilelang.language.dtypes` / `.fp8`,
`tilelang.tileop.base`, `tilelang.cuda.intrinsics.sparse_layout`, `tilelang.transform.PassConfigKey`,
`tilelang.layout.fragment.Fragment` (and a `Fragment` built from one lambda), the bank swizzles,
`tilelang.tools` (`plot_layout`, `Analyzer`, `iket`), `tilelang.jit.diagnostics`,
`tilelang.env.TILELANG_CACHE_DIR`, `tilelang.set_log_level`, and `from tilelang import tvm`."""
from __future__ import annotations

import itertools
import logging

import pytest

import tilecraft
import tilecraft.compat


@pytest.fixture
def alias():
    was = tilecraft.compat.installed()
    tilecraft.compat.install()
    yield
    if not was:
        tilecraft.compat.uninstall()


def test_module_names(alias):
    import tilelang
    import tilelang.language as T
    from tilelang.cuda.intrinsics.sparse_layout import GROUP_CONFIG, get_e_factor, get_e_replicate_factor
    from tilelang.language.fp8 import determine_fp8_type, determine_torch_fp8_type
    from tilelang.tileop.base import GemmWarpPolicy
    from tilelang.transform import PassConfigKey
    assert GemmWarpPolicy is T.GemmWarpPolicy and PassConfigKey is tilelang.PassConfigKey
    assert determine_fp8_type() == "float8_e4m3fn" and str(determine_torch_fp8_type("e5m2")) == "torch.float8_e5m2"
    # 2 bits per kept element's position, 4 per group: an int16 metadata element covers 4 groups of 4
    assert get_e_factor(T.float16, T.int16) == 16 and get_e_factor(T.int8, T.int32) == 32
    assert get_e_factor(T.float32, T.int16) == 8 and GROUP_CONFIG[T.float32] == (1, 2)
    assert get_e_replicate_factor(T.float16) == 2 and get_e_replicate_factor(T.float8_e4m3fn) == 1
    assert tilelang.env.TILELANG_CACHE_DIR == str(tilecraft.env.cache_dir())


def test_fragment_from_one_lambda(alias):
    from tilelang.layout.fragment import Fragment
    f = Fragment([16, 8], forward_fn=lambda i, j: (i * 2 + j // 4, [j % 4]))
    assert f.map_forward_thread([5, 6]) == 11 and f.map_forward_index([5, 6]) == [2]
    g = Fragment([4, 4], lambda i, j, rep: (i * 2 + rep, j), replicate=2)
    assert g.map_forward_thread([1, 3], 1) == 3 and g.map_forward_index([1, 3]) == [3]


@pytest.mark.parametrize("maker,chunks", [("quarter", 2), ("half", 4), ("full", 8)])
def test_bank_swizzles(alias, maker, chunks):
    import tilelang.layout as L
    lay = getattr(L, f"make_{maker}_bank_swizzled_layout")(16, 128, 16)
    outs = [tuple(lay.map_forward_index([i, j])) for i, j in itertools.product(range(16), range(128))]
    assert len(set(outs)) == len(outs)  # a permutation of the tile
    # the 8 rows of one bank group put chunk 0 of an atom in `chunks` distinct 16-byte chunks
    assert len({lay.map_forward_index([i, 0])[1] // 8 for i in range(8)}) == chunks
    assert lay.map_forward_index([0, 37]) == [0, 37]  # row 0 is never permuted
    with pytest.raises(ValueError, match="whole number"):
        getattr(L, f"make_{maker}_bank_swizzled_layout")(8, 4, 16)


def test_plot_layout_writes_the_figures(alias, tmp_path):
    pytest.importorskip("matplotlib")
    import tilelang.language as T
    from tilelang.tools import plot_layout
    plot_layout(T.Layout([2, 4, 2], lambda i, j, k: (k, i * 4 + j)), save_directory=str(tmp_path), name="r")
    plot_layout(T.Fragment([4, 4], forward_thread_fn=lambda i, j: i, forward_index_fn=lambda i, j: j),
                save_directory=str(tmp_path), name="f")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.pdf", "f.png", "f.svg", "r.pdf", "r.png", "r.svg"]


def test_analyzer_counts_gemm_flops_and_global_bytes(alias):
    import tilelang.language as T
    from tilelang.carver.arch import CUDA
    from tilelang.tools import Analyzer
    M, N, K, bm, bn, bk = 256, 128, 512, 64, 64, 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float")
            T.clear(C_f)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])

    r = Analyzer.analysis(main, CUDA("cuda"))
    blocks = (M // bm) * (N // bn)
    assert r.total_flops == 2 * M * N * K
    assert r.total_global_bytes == blocks * (K // bk) * (bm * bk + bk * bn) * 2 + M * N * 2
    assert r.estimated_time > 0 and r.tflops > 0


def test_iket_is_offered(alias):
    from tilelang.tools.cuda import iket
    from tilecraft.language import iket as ours
    assert iket.mark is ours.mark and iket.session is ours.session  # tests/cpu/test_iket.py runs it


def test_jit_diagnostics(alias, caplog, monkeypatch):
    from tilelang.jit.diagnostics import diagnostics_enabled, jit_phase
    monkeypatch.delenv("TILELANG_JIT_DIAGNOSTICS", raising=False)
    assert not diagnostics_enabled() and diagnostics_enabled(verbose=True)
    with caplog.at_level(logging.INFO, logger="tilelang.jit.diagnostics"):
        with jit_phase("lower", verbose=True, kernel="gemm"):
            pass
        with pytest.raises(RuntimeError):
            with jit_phase("compile", enabled=True):
                raise RuntimeError("boom")
    text = caplog.text
    assert "start: lower kernel='gemm'" in text and "done: lower" in text and "failed: compile" in text


def test_set_log_level(alias):
    import tilelang
    tilelang.set_log_level("WARNING")
    assert logging.getLogger("tilecraft").level == logging.WARNING
    with pytest.raises(ValueError):
        tilelang.set_log_level("LOUD")


def test_tvm_is_a_clear_message(alias):
    from tilelang import tvm
    assert tvm.DataType("float16").bits == 16 and tvm.tir.const(3, "int32").value == 3
    assert tvm.tir.IntImm("int64", 5).dtype == "int64"
    with pytest.raises(AttributeError, match="TVM is not part of tilecraft.*`tvm.IRModule`"):
        tvm.IRModule
    with pytest.raises(AttributeError, match="`tvm.tir.transform` has no counterpart"):
        tvm.tir.transform
