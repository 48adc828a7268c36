"""Pass configs as one typed options object: every TileLang key accepted, unknown keys and bad
values rejected by name, each non-default value honoured or warned once with its reason, and the
jit options (compile_flags, debug_root_path, execution_backend) never dropped silently."""
from __future__ import annotations

import sys
import warnings

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.compiler.cuda import cuda_options
from tilecraft.jit import jit_options
from tilecraft.options import Options, PassConfigKey, UnhonouredOptionWarning, _WARNED

SIMPLIFY_SUBKEYS = {k for k in PassConfigKey if not any(k.value.startswith(p) for p in ("tl.", "tir.", "cuda.", "tc."))}


def test_every_tilelang_key_is_accepted_with_its_string_value():
    for key in PassConfigKey:
        if key in SIMPLIFY_SUBKEYS:
            continue
        assert key.value == str(key) and tilelang.PassConfigKey[key.name] is key
        opts = Options.make({key: _a_value(key)}, warn=False)
        assert key.value in opts and opts.get(key) is not None
    # the keys TileLang's examples use
    for name in ("TL_ENABLE_FAST_MATH", "TL_DISABLE_TMA_LOWER", "TL_DISABLE_WARP_SPECIALIZED",
                 "TL_PTXAS_REGISTER_USAGE_LEVEL", "TIR_DISABLE_VECTORIZE", "TL_DISABLE_THREAD_STORAGE_SYNC"):
        assert name in PassConfigKey.__members__


def _a_value(key):
    from tilecraft.options import _BY_KEY
    f = _BY_KEY[key.value]
    kind = f.metadata["kind"]
    return {bool: not f.default, int: 4 if "register" in key.value else 64 if "bitwidth" in key.value else 8,
            str: "/tmp/x", "flags": ["-DX=1"], "choice": "auto"}.get(kind, {"a": 1})


def test_unknown_keys_and_bad_values_are_errors_naming_the_key():
    with pytest.raises(ValueError, match=r"unknown pass_configs key 'tl.enable_fastmath' \(did you mean 'tl.enable_fast_math'"):
        Options.make({"tl.enable_fastmath": True})
    with pytest.raises(ValueError, match="'tl.disable_tma_lower' must be True or False"):
        Options.make({"tl.disable_tma_lower": "yes please"})
    with pytest.raises(ValueError, match="'tl.ptxas_register_usage_level' must be in 0..10"):
        Options.make({PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL: 11})
    with pytest.raises(ValueError, match="unknown pass_configs key 'transitively_prove_inequalities'"):
        Options.make({"transitively_prove_inequalities": True})  # a tl.Simplify sub-key, not a config


def test_options_are_hashable_typed_and_read_like_the_old_dict():
    a = Options.make({"tc.use_wgmma": True, "tl.Simplify": {"enable_simplify_let_inline": False}}, warn=False)
    b = Options.make({PassConfigKey.TC_USE_WGMMA: 1, "tl.Simplify": {"enable_simplify_let_inline": False}}, warn=False)
    assert a == b and hash(a) == hash(b) and a.cache_token() == b.cache_token()
    assert a.use_wgmma is True and a.wgmma and not a.use_tma and a.stage_epilogue
    assert a.get("tc.use_wgmma") is True and a.get("tc.stage_epilogue", "dflt") == "dflt"
    assert Options.make().cache_token() != a.cache_token()
    assert not Options.make({"tc.use_wgmma": True, "tl.disable_wgmma": True}, warn=False).wgmma
    assert Options.make({"tirx.disable_vectorize": True}, warn=False).tir_disable_vectorize  # later spelling


def test_three_way_switches_are_typed_and_take_only_their_three_values():
    import typing
    from dataclasses import fields
    from tilecraft.options import TriState
    hints = typing.get_type_hints(Options)
    choice = {f.name for f in fields(Options) if f.metadata.get("kind") == "choice"}
    assert choice == {"warp_specialize", "persistent_tiles", "cpu_threads"}
    assert {name: hints[name] for name in choice} == dict.fromkeys(choice, TriState)
    assert hints["ptxas_register_usage_level"] == typing.Optional[int]
    for f in fields(Options):
        if f.name in choice:
            key = f.metadata["key"]
            for v in (True, False, "auto"):
                assert getattr(Options.make({key: v}, warn=False), f.name) == v
            with pytest.raises(ValueError, match=f"'{key}' must be one of"):
                Options.make({key: "sometimes"}, warn=False)


def test_ignored_values_warn_once_with_the_reason_defaults_do_not():
    _WARNED.clear()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        Options.make({"tl.disable_safe_memory_legalize": True, "tl.disable_rdc": True,
                      "tl.dynamic_alignment": 16, "tl.enable_fast_math": True}, "cuda")
        Options.make({"tl.disable_safe_memory_legalize": True}, "cuda")
        Options.make({"tl.enable_fast_math": True}, "cpu")   # a permission the exact CPU target meets
        Options.make({"tl.ptxas_register_usage_level": 4}, "cpu")
    msgs = [str(x.message) for x in w if issubclass(x.category, UnhonouredOptionWarning)]
    assert len(msgs) == 2, msgs
    assert "tl.disable_safe_memory_legalize=True: ignored: tilecraft always guards" in msgs[0]
    assert "tl.ptxas_register_usage_level=4: not applicable on the cpu target" in msgs[1]


def test_table_lists_every_key():
    text = tilelang.options.table()
    for key in PassConfigKey:
        if key not in SIMPLIFY_SUBKEYS:
            assert f"`{key.value}`" in text


def test_compile_flags_reach_the_cuda_compiler():
    fast, flags = cuda_options(jit_options(None, compile_flags="-DA=1 -DB=2"), "nvrtc")
    assert flags[-2:] == ["-DA=1", "-DB=2"] and not fast
    fast, flags = cuda_options({PassConfigKey.TL_DEVICE_COMPILE_FLAGS: ["-DC=3"], "tl.enable_fast_math": True}, "nvcc")
    assert flags[-1] == "-DC=3" and fast


def test_compile_flags_change_the_generated_binary():
    """A -D define in compile_flags reaches NVRTC: a kernel whose header would otherwise not compile
    (an #error guarded by the define) compiles with it."""
    from tilecraft.compiler.cuda import compile_cuda
    src = '#ifndef TC_FLAG_SEEN\n#error "compile_flags did not arrive"\n#endif\nextern "C" __global__ void k() {}\n'
    with pytest.raises(Exception, match="compile_flags did not arrive"):
        compile_cuda(src, "sm_80", {})
    assert compile_cuda(src, "sm_80", {"tl.device_compile_flags": "-DTC_FLAG_SEEN=1"})


@tilelang.jit(out_idx=[-1])
def add_one(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                B[i] = A[i] + 1
    return main


def test_debug_root_path_keeps_the_source_and_execution_backend_warns(tmp_path):
    sys.modules["tilecraft.jit"]._WARNED_BACKENDS.clear()
    with pytest.warns(UnhonouredOptionWarning, match="execution_backend='cython' is ignored"):
        factory = tilelang.jit(out_idx=[-1], target="cpu", execution_backend="cython",
                               debug_root_path=str(tmp_path / "dbg"))(add_one.fn)
    a = torch.randn(32)
    torch.testing.assert_close(factory(32)(a), a + 1)
    assert (tmp_path / "dbg" / "main.cpp").read_text().strip()
    with pytest.raises(ValueError, match="execution_backend='tvm' is not one of"):
        tilelang.jit(execution_backend="tvm")(add_one.fn)


def test_disable_wgmma_vetoes_the_hopper_gemm():
    from tilecraft.kernels import gemm
    fn = gemm.matmul.fn(256, 256, 256, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256)
    sm90 = {"kind": "cuda", "arch": "sm_90a"}
    on = tilelang.compile(fn, out_idx=[-1], target=sm90, pass_configs={"tc.use_wgmma": True})
    off = tilelang.compile(fn, out_idx=[-1], target=sm90,
                           pass_configs={"tc.use_wgmma": True, PassConfigKey.TL_DISABLE_WGMMA: True})
    assert "gemm_ss_sm90" in on.get_kernel_source() and "gemm_ss_sm90" not in off.get_kernel_source()
