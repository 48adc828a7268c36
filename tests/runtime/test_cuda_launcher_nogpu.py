"""`CudaLauncher` without a GPU: metadata checks, grid expressions and their validation.
(The launches themselves are tested in tests/gpu/test_cuda_launch.py.)"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tilecraft.compiler.build import Artifact
from tilecraft.runtime.cuda_driver import CudaError
from tilecraft.runtime.cuda_launch import CudaLauncher
from tilecraft.target import Target


def _launcher(source, kernel_name, nparams, symbols, grid, block, smem=0, kinds=None, grid_exprs=None):
    meta = {"kernel_name": kernel_name, "grid": grid, "block": block, "smem_bytes": smem}
    if grid_exprs is not None:
        meta["grid_exprs"] = grid_exprs
    if kinds is not None:
        meta["param_kinds"] = kinds
    artifact = Artifact(Target("cuda", "sm_90a"), source, meta, binary=b"")
    params = [SimpleNamespace(name=f"p{i}") for i in range(nparams)]
    return CudaLauncher(artifact, SimpleNamespace(name=f"tc_{kernel_name}"), params, symbols)


def test_grid_expressions_and_validation():
    la = _launcher("", "vadd", 3, ["m", "n"], ["(n + 255) // 256", "(m + 3) // 4", 2], [256, 1, 1],
                   kinds=["ptr", "ptr", "ptr", "int32", "int32"],
                   grid_exprs=[["//", ["+", "n", 255], 256], ["//", ["+", "m", 3], 4], 2])
    assert la._grid is None
    assert la.grid_for({"m": 9, "n": 1000}) == (4, 3, 2)
    with pytest.raises(CudaError, match="tc_vadd.*grid of \\(0, 3, 2\\)"):
        la.grid_for({"m": 9, "n": 0})
    with pytest.raises(CudaError, match="tc_vadd"):
        la.grid_for({"m": 4 * 70000, "n": 10})  # gridDim.y > 65535
    with pytest.raises(CudaError, match="tc_vadd.*no value for symbol 'm'"):
        la.grid_for({"n": 10})
    with pytest.raises(CudaError, match="no grid_exprs"):   # the text is for people, never evaluated
        _launcher("", "vadd", 1, ["n"], ["(n + 255) // 256", 1, 1], [256, 1, 1], kinds=["ptr", "int32"])
    with pytest.raises(CudaError, match="cluster launch"):
        _launcher("", "k", 1, [], [1, 1, 1], [32, 1, 1], kinds=["ptr"]).__class__(
            Artifact(Target("cuda", "sm_90a"), "", {"grid": [1, 1, 1], "cluster": [2, 1, 1]}, binary=b""),
            SimpleNamespace(name="k"), [SimpleNamespace(name="p")], [])


def test_static_grid_and_default_kinds():
    la = _launcher("", "k", 2, [], [7, 1, 1], [128, 1, 1])
    assert la._grid == (7, 1, 1) and la.param_kinds == ("ptr", "ptr")
    bad = _launcher("", "k", 2, [], [0, 1, 1], [128, 1, 1])
    assert bad._grid is None
    with pytest.raises(CudaError, match="tc_k"):
        bad.grid_for({})


def test_bad_metadata_is_reported():
    with pytest.raises(CudaError, match="param_kinds"):
        _launcher("", "k", 2, ["n"], [1, 1, 1], [32, 1, 1], kinds=["ptr", "int32"])
    with pytest.raises(CudaError, match="three"):
        _launcher("", "k", 1, [], [1, 1], [32, 1, 1])
    with pytest.raises(CudaError, match="three"):
        _launcher("", "k", 1, ["n"], ["n", 1, 1], [32, 1, 1], kinds=["ptr", "int32"], grid_exprs=["n", 1])


def _tma_launcher(**spec):
    meta = {"kernel_name": "mm", "grid": [4, 4, 1], "block": [256, 1, 1], "smem_bytes": 0,
            "param_kinds": ["ptr", "ptr", "ptr", "tma_desc"],
            "tma": [{"param": 1, "box": [8, 64], "swizzle": 128, **spec}]}
    artifact = Artifact(Target("cuda", "sm_90a"), "", meta, binary=b"")
    params = [SimpleNamespace(name=n) for n in ("A", "B", "C")]
    return CudaLauncher(artifact, SimpleNamespace(name="matmul"), params, [])


def test_tensor_map_parameters_are_checked_and_explained():
    """A TMA kernel takes its tensor maps after the symbols; a tensor TMA cannot load (here: an
    address off 16 bytes, as a sliced view would have) fails naming the kernel and the parameter."""
    la = _tma_launcher()
    assert la.param_kinds[-1] == "tma_desc"
    view = SimpleNamespace(data_ptr=lambda: 0x1008, shape=(64, 128), dtype="torch.float16", element_size=lambda: 2,
                           dim=lambda: 2, stride=lambda *d: (128, 1)[d[0]] if d else (128, 1))
    with pytest.raises(CudaError, match=r"kernel 'matmul': parameter B cannot be loaded by TMA: .*16-byte aligned"
                                        r".*tc.use_tma: False"):
        la._tma_args([None, view, None])
    # the map of a T.atomic_add's destination (transform/cuda_ops/tma_reduce.py) names its own switch
    with pytest.raises(CudaError, match=r"parameter B cannot be added into by TMA reduces: .*16-byte aligned"
                                        r".*tc.tma_reduce: False"):
        _tma_launcher(reduce=True)._tma_args([None, view, None])
    with pytest.raises(CudaError, match="do not match 3 tensor parameter"):  # a map with no 'tma' entry
        _launcher("", "mm", 3, [], [1, 1, 1], [32, 1, 1], kinds=["ptr", "ptr", "ptr", "tma_desc"])


def test_symbol_parameters_are_range_checked_by_their_width():
    """A T.symbolic(..., "int64") size is an int64 kernel parameter (values past 2^31 pass); an int
    symbol's value must fit int32, and the error says how to declare a wider one."""
    from tilecraft.runtime.cuda_driver import ArgPacker
    la = _launcher("", "k", 1, ["n", "m"], [1, 1, 1], [32, 1, 1], kinds=["ptr", "int64", "int32"])
    assert la._symbol_args({"n": 2 ** 31 + 5, "m": 7}) == (2 ** 31 + 5, 7)
    assert la._symbol_args({"n": 2 ** 63 - 1, "m": -2 ** 31}) == (2 ** 63 - 1, -2 ** 31)
    with pytest.raises(CudaError, match="value 2147483648 does not fit the kernel's int32 parameter.*'int64'"):
        la._symbol_args({"n": 1, "m": 2 ** 31})
    with pytest.raises(CudaError, match="does not fit the kernel's int64 parameter"):
        la._symbol_args({"n": 2 ** 63, "m": 1})
    with pytest.raises(CudaError, match="must be int32 or int64"):
        _launcher("", "k", 1, ["n"], [1, 1, 1], [32, 1, 1], kinds=["ptr", "float32"])
    # the general packer lays an int64 out in 8 bytes at an 8-byte offset
    p = ArgPacker(("ptr", "int32", "int64"))
    p.pack([1, 7, 2 ** 31 + 5])
    raw = p.raw()
    assert int.from_bytes(raw[8:12], "little") == 7 and int.from_bytes(raw[16:24], "little") == 2 ** 31 + 5
