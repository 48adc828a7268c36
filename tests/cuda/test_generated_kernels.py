"""Compile-only tier for *generated* CUDA (no GPU needed): the reference kernels are generated and
compiled for sm_80 and sm_90a, and their SASS must use the fast instructions the lowering meant:
tensor-core MMAs fed by ldmatrix and cp.async for pipelined GEMM and FlashAttention, 16-byte
global accesses for softmax, and no local-memory spills."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

import tilecraft as tilelang
from tilecraft.kernels import attention, gemm, norm

ARCHS = ["sm_80", "sm_90a"]
# sm_90a compiles to the Hopper path by default (Target.pass_config_defaults); tests of the mma.sync
# / cp.async path run on sm_80 and on sm_90a with it asked for explicitly.
MMA_SYNC = {"tc.use_wgmma": False}


needs_sass = pytest.mark.sass   # cuobjdump and nvdisasm (tests/conftest.py)


def build(func, arch, configs=None):
    """`func` for `arch`; on sm_90a on the mma.sync path unless `configs` say otherwise."""
    if configs is None:
        configs = MMA_SYNC if arch == "sm_90a" else {}
    return tilelang.compile(func, out_idx=[-1], target={"kind": "cuda", "arch": arch}, pass_configs=configs)


def opcodes(kernel) -> set:
    return set(re.findall(r"\b([A-Z][A-Z0-9]+)(?:\.[A-Z0-9.]+)?\b", kernel.get_sass()))


@needs_sass
@pytest.mark.parametrize("arch", ARCHS)
def test_pipelined_gemm_uses_tensor_cores_ldmatrix_and_cp_async(arch):
    k = build(gemm.matmul.fn(1024, 1024, 1024, block_M=128, block_N=128, block_K=32, num_stages=3), arch)
    sass = k.get_sass()
    assert "HMMA.16816.F32" in sass
    assert "LDSM" in sass
    assert "LDGSTS" in sass
    assert "LDGDEPBAR" in sass or "DEPBAR" in sass, "cp.async groups are committed and waited on"
    from tilecraft.compiler.sass import resource_usage
    usage = next(iter(resource_usage(k.artifact.binary).values()))
    assert usage["local_bytes"] == 0, f"accumulators spilled to local memory: {usage}"


@needs_sass
@pytest.mark.parametrize("arch", ARCHS)
def test_flash_attention_keeps_p_in_registers(arch):
    k = build(attention.flash_attention.fn(1, 2, 512, 64, block_M=64, block_N=64, num_stages=2), arch)
    sass = k.get_sass()
    assert sass.count("HMMA.16816.F32") >= 2, "both gemms on tensor cores"
    assert "LDGSTS" in sass
    assert "SHFL.BFLY" in sass, "row max/sum reduced with warp shuffles"


@needs_sass
@pytest.mark.parametrize("arch", ARCHS)
def test_softmax_uses_16_byte_accesses_and_no_barrier(arch):
    k = build(norm.softmax.fn(4096, 1024, block_M=4, threads=128), arch)
    ops = k.get_sass()
    assert "LDG.E.128" in ops and "STG.E.128" in ops
    assert "BAR.SYNC" not in ops, "rows live inside one warp: no shared-memory exchange"


@pytest.mark.nvcc
def test_kernel_source_compiles_standalone_with_nvcc(tmp_path):
    k = build(gemm.matmul.fn(512, 512, 512, block_M=64, block_N=64, block_K=32, num_stages=2), "sm_80")
    src = tmp_path / "kernel.cu"
    src.write_text(k.get_kernel_source())
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    proc = subprocess.run([nvcc, "-cubin", "-arch=sm_80", "-std=c++17", "-I", tilelang.include_dir(),
                           str(src), "-o", str(tmp_path / "kernel.cubin")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_ptx_of_a_generated_gemm_uses_mma_sync():
    k = build(gemm.matmul.fn(256, 256, 256, block_M=64, block_N=64, block_K=32, num_stages=2), "sm_80")
    ptx = k.get_ptx()
    assert "mma.sync.aligned.m16n8k16" in ptx and "ldmatrix" in ptx and "cp.async" in ptx
    with pytest.raises(RuntimeError, match="only for CUDA"):
        tilelang.compile(gemm.matmul.fn(64, 64, 64, block_M=64, block_N=64), target="cpu").get_ptx()


@needs_sass
@pytest.mark.parametrize("cfg", [dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256),
                                 dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
                                 dict(block_M=64, block_N=128, block_K=32, num_stages=2, threads=128)])
def test_opt_in_wgmma_gemm_uses_hgmma_without_spills(cfg):
    """`pass_configs={"tc.use_wgmma": True}` on sm_90a: the generated GEMM runs on wgmma (HGMMA), its
    operand tiles are 1024-byte aligned, and nothing spills. (Numerics: tests/gpu/test_wgmma_gpu.py.)"""
    k = tilelang.compile(gemm.matmul.fn(1024, 1024, 1024, **cfg), out_idx=[-1],
                         target={"kind": "cuda", "arch": "sm_90a"}, pass_configs={"tc.use_wgmma": True})
    sass = k.get_sass()
    assert "HGMMA.64x" in sass and "HMMA" not in sass
    assert "__align__(1024)" in k.get_kernel_source()
    from tilecraft.compiler.sass import resource_usage
    assert next(iter(resource_usage(k.artifact.binary).values()))["local_bytes"] == 0


@needs_sass
@pytest.mark.parametrize("cfg", [dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256),
                                 dict(block_M=64, block_N=128, block_K=32, num_stages=2, threads=128)])
def test_async_wgmma_main_loop_keeps_one_group_in_flight(cfg):
    """`tc.wgmma_async`: the loop waits with wait_group 1 (WARPGROUP.DEPBAR.LE gsb0, 0x1), one
    wait_group 0 drains after it, and ptxas does not serialise the wgmmas (no C7514/C7515 note)."""
    from tilecraft.compiler import compile_cuda_nvrtc
    k = tilelang.compile(gemm.matmul.fn(1000, 776, 520, **cfg), out_idx=[-1],
                         target={"kind": "cuda", "arch": "sm_90a"},
                         pass_configs={"tc.use_wgmma": True, "tc.wgmma_async": True, "tc.use_tma": False})
    src = k.get_kernel_source()
    assert "tc::wgmma_drain<" in src and re.search(r"gemm_ss_sm90<[^>]*, 1, \d+, \d+>\(", src), src
    log = compile_cuda_nvrtc(src, "sm_90a", include_dirs=[tilelang.include_dir()]).log
    assert "serialized" not in log, log
    sass = k.get_sass()
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass and "WARPGROUP.DEPBAR.LE gsb0, 0x0" in sass


def test_wgmma_is_the_default_on_sm90a_and_never_on_sm80():
    src = build(gemm.matmul.fn(512, 512, 512, block_M=128, block_N=128, block_K=64, threads=256), "sm_90a", {})
    assert "gemm_ss_sm90" in src.get_kernel_source()
    off = build(gemm.matmul.fn(512, 512, 512, block_M=128, block_N=128, block_K=64, threads=256), "sm_90a",
                {"tl.disable_wgmma": True})
    assert "gemm_ss_sm90" not in off.get_kernel_source()
    k = tilelang.compile(gemm.matmul.fn(512, 512, 512, block_M=128, block_N=128, block_K=64, threads=256),
                         out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"}, pass_configs={"tc.use_wgmma": True})
    assert "gemm_ss_sm90" not in k.get_kernel_source()


def test_pipelined_gemm_barrier_runs_inside_the_gemm():
    """A main loop that is copies + one mma.sync gemm: the wait + barrier move into tc::gemm_ss
    (before its last k16 step), one wait + barrier precedes the loop, none is left at its top."""
    k = build(gemm.matmul.fn(512, 512, 512, 128, 128, 64, num_stages=3, threads=128), "sm_90a")
    src = k.get_kernel_source()
    loop = src[src.index("for (int ko"):]
    body = loop[:loop.index("tc::cp_async_wait_all")]
    assert "tc::PipelineBarrier<1>()" in body and "__syncthreads" not in body
    assert "tc::cp_async_wait<1>();\n  __syncthreads();" in src[:src.index("for (int ko")]


def test_pipelined_loop_with_more_than_a_gemm_keeps_its_barrier():
    k = build(gemm.matmul_bias_gelu.fn(512, 512, 512, 128, 128, 32, num_stages=3, threads=128), "sm_90a")
    src = k.get_kernel_source()
    assert "PipelineBarrier" in src  # bias + GELU come after the loop: still a plain main loop
    fa = build(attention.flash_attention.fn(1, 2, 256, 64, False, 64, 64, 2, 128), "sm_90a").get_kernel_source()
    assert "PipelineBarrier" not in fa


@needs_sass
@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_epilogue_is_staged_through_shared_memory(arch):
    """C leaves through a padded shared tile: 16-byte global stores (STG.E.128), no 4-byte ones."""
    k = build(gemm.matmul.fn(1024, 1024, 1024, block_M=128, block_N=128, block_K=32, num_stages=3), arch)
    src, sass = k.get_kernel_source(), k.get_sass()
    assert "C_local_stage" in src and k.artifact.meta["smem_bytes"] == 3 * 2 * 128 * 32 * 2, \
        "the staging tile reuses the main loop's bytes"
    stores = re.findall(r"\bSTG\.E(\.\d+)?\b", sass)
    assert stores and all(s == ".128" for s in stores), f"global stores: {sorted(set(stores))}"


def test_epilogue_staging_can_be_turned_off_and_respects_the_budget():
    f = gemm.matmul.fn(1024, 1024, 1024, block_M=128, block_N=128, block_K=32, num_stages=3)
    off = tilelang.compile(f, out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"},
                           pass_configs={"tc.stage_epilogue": False})
    assert "_stage" not in off.get_kernel_source()
    # 128x256x64 in 4 stages: 192 KB of tiles; + a 66 KB staging tile would not fit 227 KB if
    # counted without reuse, so the pass leaves the store alone
    big = build(gemm.matmul.fn(1024, 1024, 1024, 128, 256, 64, num_stages=4, threads=256), "sm_90a")
    assert "_stage" not in big.get_kernel_source()


@needs_sass
def test_mbarrier_pipeline_when_asked_for():
    """tc.mbarrier_pipeline: the main loop synchronises with per-stage mbarriers (cp.async
    arrivals, SYNCS phase checks on sm_90a) and has no block barrier inside; by default the
    block-barrier form."""
    f = gemm.matmul.fn(1024, 1024, 1024, 128, 256, 64, num_stages=3, threads=256)
    k = tilelang.compile(f, out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"},
                         pass_configs={"tc.mbarrier_pipeline": True, **MMA_SYNC})
    src, sass = k.get_kernel_source(), k.get_sass()
    loop = src[src.index("for (int ko"):src.index("tc::cp_async_wait_all")]
    assert "tc::pipe_wait<3>" in loop and "tc::PipeRelease<3>" in loop and "__syncthreads" not in loop
    assert "ARRIVES.LDGSTSBAR" in sass and "SYNCS.PHASECHK" in sass
    off = build(f, "sm_90a")
    assert "pipe_bar" not in off.get_kernel_source() and "PipelineBarrier" in off.get_kernel_source()
    from tilecraft.compiler.sass import resource_usage
    usage = next(iter(resource_usage(k.artifact.binary).values()))
    assert usage["local_bytes"] == 0 and usage["stack_bytes"] == 0, usage


def test_pass_configs_from_the_environment(monkeypatch):
    """TILECRAFT_PASS_CONFIGS sets pass_configs for every compile (here: the wgmma GEMM on sm_90a); a
    kernel's own pass_configs win; a bad value is an error naming the variable."""
    fn = gemm.matmul.fn(256, 256, 256, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256)
    sm90 = {"kind": "cuda", "arch": "sm_90a"}
    monkeypatch.setenv("TILECRAFT_PASS_CONFIGS", '{"tc.use_wgmma": false}')
    assert "tc::gemm_ss<" in tilelang.compile(fn, out_idx=[-1], target=sm90).get_kernel_source()
    own = tilelang.compile(fn, out_idx=[-1], target=sm90, pass_configs={"tc.use_wgmma": True})
    assert "gemm_ss_sm90" in own.get_kernel_source()
    monkeypatch.setenv("TILECRAFT_PASS_CONFIGS", '{"tc.use_wgmmma": true}')
    with pytest.raises(ValueError, match=r"TILECRAFT_PASS_CONFIGS: unknown key\(s\) \['tc.use_wgmmma'\]"):
        tilelang.compile(fn, out_idx=[-1], target=sm90)
    monkeypatch.setenv("TILECRAFT_PASS_CONFIGS", "tc.use_wgmma=1")
    with pytest.raises(ValueError, match="TILECRAFT_PASS_CONFIGS.*expected a JSON object"):
        tilelang.compile(fn, out_idx=[-1], target=sm90)
    monkeypatch.delenv("TILECRAFT_PASS_CONFIGS")
    assert "gemm_ss_sm90" in tilelang.compile(fn, out_idx=[-1], target=sm90).get_kernel_source()


def test_jit_factory_sees_a_changed_pass_configs_variable(monkeypatch):
    """A @jit factory's kernel cache is keyed by TILECRAFT_PASS_CONFIGS too: the same arguments under
    another value build another kernel, and the first one comes back when the value does."""
    factory = tilelang.jit(out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"})(gemm.matmul.fn)
    args = (256, 256, 256, 128, 128, 64)
    plain = factory(*args, num_stages=3, threads=256)
    monkeypatch.setenv("TILECRAFT_PASS_CONFIGS", '{"tc.use_wgmma": false}')
    sm80_path = factory(*args, num_stages=3, threads=256)
    assert "gemm_ss_sm90" not in sm80_path.get_kernel_source() and "gemm_ss_sm90" in plain.get_kernel_source()
    monkeypatch.delenv("TILECRAFT_PASS_CONFIGS")
    assert factory(*args, num_stages=3, threads=256) is plain


def _main_loop(src: str) -> str:
    return src[src.index("for (int ko"):src.index("tc::cp_async_wait_all")]


@pytest.mark.parametrize("k_dim, guarded", [(4096, False), (200, True), (4096 + 32, True)])
def test_look_ahead_copies_are_guarded_exactly_when_k_is_ragged(k_dim, guarded):
    """Inside `if (ko + S-1 < n)` the look-ahead tile's rows/cols are proven in bounds when K is a
    multiple of block_K (no predicate computed per copy); a ragged K keeps the zero-fill guard.
    (Numerics of the ragged case on the GPU: tests/cpu/test_ragged.py.)"""
    k = tilelang.compile(gemm.matmul.fn(256, 256, k_dim, block_M=128, block_N=128, block_K=64, num_stages=3,
                                        threads=128), out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"},
                         pass_configs=MMA_SYNC)
    loop = _main_loop(k.get_kernel_source())
    assert ("< " + str(k_dim) + "))" in loop) == guarded, loop


def test_staged_tiles_are_addressed_as_stage_offset_plus_swizzle():
    """A multi-buffered swizzled tile (8-row multiple per stage) is addressed as
    `stage * elements + swizzle(row in stage, col)`, so the swizzled part is loop-invariant."""
    k = tilelang.compile(gemm.matmul.fn(512, 512, 512, block_M=128, block_N=128, block_K=64, num_stages=3,
                                        threads=128), out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"},
                         pass_configs=MMA_SYNC)
    loop = _main_loop(k.get_kernel_source())
    # the stage index may be a const hoisted before the copy's unrolled loop (hoist_invariants)
    stage = re.search(r"\((\w+) \* 8192\) \+ tc::swizzle_offset<64, 2>\(", loop)
    assert stage or re.search(r"\(\(\(ko \+ 2\) % 3\) \* 8192\) \+ tc::swizzle_offset<64, 2>\(", loop), loop
    if stage:
        assert re.search(rf"const int {stage.group(1)} = \(\(ko \+ 2\) % 3\);", loop), loop
    assert "tc::swizzle_offset<64, 2>(((((ko + 2) % 3) * 128)" not in loop


TMA_CONFIGS = {"tc.use_wgmma": True, "tc.wgmma_async": True, "tc.use_tma": True}


@needs_sass
@pytest.mark.parametrize("cfg", [dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256),
                                 dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
                                 dict(block_M=64, block_N=128, block_K=32, num_stages=2, threads=128)])
def test_tma_main_loop_when_asked_for(cfg):
    """`tc.use_tma` with the async wgmma loop: no cp.async left, one TMA instruction per box
    (A: one box; B [bk][bn] halves: one 8 x 64 box per 1 KB swizzle atom), every thread waits on
    the stage's mbarrier, and the launcher gets one tensor map per operand.  (Numerics:
    tests/gpu/test_wgmma_gpu.py, mode "tma".)"""
    from tilecraft.ir.layout.tma import sm90_tile_boxes
    k = tilelang.compile(gemm.matmul.fn(1024, 1024, 1024, **cfg), out_idx=[-1],
                         target={"kind": "cuda", "arch": "sm_90a"}, pass_configs=TMA_CONFIGS)
    sass, src, meta = k.get_sass(), k.get_kernel_source(), k.artifact.meta
    boxes = (len(sm90_tile_boxes(cfg["block_M"], cfg["block_K"], 2)[1])
             + len(sm90_tile_boxes(cfg["block_K"], cfg["block_N"], 2)[1]))
    assert "LDGSTS" not in sass and "HGMMA.64x" in sass
    n = sass.count("UTMALDG.2D")  # prologue S-1 tiles + the loop's (ptxas may unroll that)
    assert n % boxes == 0 and n >= boxes * cfg["num_stages"], (n, boxes)
    assert "tc::mbar_wait_parity" in _main_loop_tma(src) and "fence_proxy_async" not in _main_loop_tma(src)
    assert meta["param_kinds"][-2:] == ["tma_desc", "tma_desc"] and [t["param"] for t in meta["tma"]] == [0, 1]
    from tilecraft.compiler.sass import resource_usage
    assert next(iter(resource_usage(k.artifact.binary).values()))["local_bytes"] == 0


def _main_loop_tma(src: str) -> str:
    return src[src.index("for (int ko"):src.index("tc::wgmma_drain")]


@pytest.mark.parametrize("k_dim, why", [("dynamic", "a dynamic K has no static tensor map"),
                                         (100, "rows of 200 bytes are not a multiple of 16")])
def test_tma_falls_back_to_cp_async_where_it_cannot_load(k_dim, why):
    import tilecraft.language as T
    K = T.dynamic("k") if k_dim == "dynamic" else k_dim
    k = tilelang.compile(gemm.matmul.fn(256, 256, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256),
                         out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"}, pass_configs=TMA_CONFIGS)
    assert "tma" not in k.artifact.meta and "tc::cp_async" in k.get_kernel_source(), why


@needs_sass
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("cfg", [dict(block_M=128, block_N=128, num_stages=2, threads=256),
                                 dict(block_M=64, block_N=64, num_stages=1, threads=128)])
def test_flash_attention_on_wgmma_when_asked_for(cfg, causal):
    """`tc.use_wgmma`: Q @ K^T becomes tc::gemm_ss_sm90 and P @ V tc::gemm_rs_sm90 (P stays in the S
    accumulator's registers: both gemms share the wgmma accumulator layout); no mma.sync left, no
    spills.  Without the option FlashAttention keeps mma.sync.  (Numerics: tests/gpu/test_wgmma_gpu.py.)"""
    fn = attention.flash_attention.fn(1, 2, 512, 128, is_causal=causal, **cfg)
    k = tilelang.compile(fn, target={"kind": "cuda", "arch": "sm_90a"}, pass_configs={"tc.use_wgmma": True})
    src, sass = k.get_kernel_source(), k.get_sass()
    assert "tc::gemm_ss_sm90<" in src and "tc::gemm_rs_sm90<" in src
    assert "HGMMA.64x" in sass and "HMMA" not in sass
    from tilecraft.compiler.sass import resource_usage
    assert next(iter(resource_usage(k.artifact.binary).values()))["local_bytes"] == 0
    plain = tilelang.compile(fn, target={"kind": "cuda", "arch": "sm_90a"}, pass_configs=MMA_SYNC).get_kernel_source()
    assert "sm90" not in plain and "tc::gemm_rs<" in plain


def test_plan_says_which_path_each_gemm_and_loop_took_and_why_not():
    """kernel.get_plan(): one line per T.gemm and T.Pipelined loop, at the user's file:line, with the
    reason when an option asked for (tc.use_wgmma, tc.use_tma) could not apply."""
    sm90 = {"kind": "cuda", "arch": "sm_90a"}
    hopper = {"tc.use_wgmma": True, "tc.wgmma_async": True, "tc.use_tma": True}
    plain = tilelang.compile(gemm.matmul.fn(512, 512, 512, 128, 128, 64, num_stages=3, threads=256),
                             out_idx=[-1], target=sm90, pass_configs=MMA_SYNC).get_plan()
    assert re.search(r"gemm\.py:\d+: T\.gemm 128x128x64 on mma\.sync, 4x2 warps", plain), plain
    assert "T.Pipelined, 3 stages, cp.async" in plain and "tc.use" not in plain
    tma = tilelang.compile(gemm.matmul.fn(512, 512, 512, 128, 128, 64, num_stages=3, threads=256),
                           out_idx=[-1], target=sm90, pass_configs=hopper).get_plan()
    assert "on wgmma, 2 warpgroup(s)" in tma and "TMA tile loads" in tma
    no_tma = tilelang.compile(gemm.matmul.fn(512, 512, 100, 128, 128, 64, num_stages=3, threads=256),
                              out_idx=[-1], target=sm90, pass_configs=hopper).get_plan()
    # the one condition that failed, not the list of all of them
    assert "tc.use_tma: A is not loaded by TMA: A's rows are 200 bytes, not a multiple of 16" in no_tma, no_tma
    assert "2 to 5" not in no_tma and "type change" not in no_tma, no_tma
    small = tilelang.compile(gemm.matmul.fn(512, 512, 512, 64, 64, 32, num_stages=2, threads=64),
                             out_idx=[-1], target=sm90, pass_configs=hopper).get_plan()
    assert "on mma.sync, 2x1 warps; tc.use_wgmma: needs threads % 128 == 0" in small
    assert "only the asynchronous wgmma loop" in small
    fa = tilelang.compile(attention.flash_attention.fn(1, 2, 256, 64, block_M=64, block_N=64, num_stages=1, threads=128),
                          target=sm90, pass_configs={"tc.use_wgmma": True}).get_plan()
    assert "on wgmma, A from registers" in fa
    cpu = tilelang.compile(gemm.matmul.fn(64, 64, 64, 64, 64, 32, num_stages=2, threads=64), out_idx=[-1],
                           target="cpu").get_plan()
    assert "compiled for cpu" in cpu


@needs_sass
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_readme_gemm_on_sm90a_is_tma_and_wgmma_by_default(dtype):
    """The README's classic GEMM for sm_90a, as written: TMA tile loads (UTMALDG, no cp.async
    LDGSTS), wgmma (HGMMA, no HMMA), no spills, and by default warp-specialized as two blocks per SM:
    a producer warpgroup beyond the program's threads, __launch_bounds__(256, 2) and setmaxnreg
    (USETMAXREG) moving the producer's registers to the one consumer warpgroup.  Unsplit
    (tc.warp_specialize False) the same instructions without USETMAXREG."""
    fn = gemm.matmul.fn(1000, 1000, 1000, 128, 128, 32, num_stages=3, threads=128, dtype=dtype)
    from tilecraft.compiler.sass import resource_usage
    for configs, split in (({}, True), ({"tc.warp_specialize": False}, False)):
        k = build(fn, "sm_90a", configs)
        ops = opcodes(k)
        assert {"UTMALDG", "HGMMA"} <= ops and not {"LDGSTS", "HMMA"} & ops, sorted(ops)
        assert ("USETMAXREG" in ops) == split and k.artifact.meta["block"][0] == (256 if split else 128)
        assert next(iter(resource_usage(k.artifact.binary).values()))["local_bytes"] == 0
        src = k.get_kernel_source()
        assert ("__launch_bounds__(256, 2)" in src and "tc::warpgroup_reg_alloc<232>" in src) == split
        assert ("two blocks per SM" in k.get_plan()) == split
    big = build(gemm.matmul.fn(4096, 4096, 4096, 128, 256, 64, num_stages=3, threads=256, dtype=dtype), "sm_90a",
                {"tc.warp_specialize": True})
    assert "USETMAXREG" in opcodes(big) and big.artifact.meta["block"][0] == 384
    assert "tc::warpgroup_reg_alloc<240>" in big.get_kernel_source()


@needs_sass
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_on_sm90a_loads_k_and_v_by_tma(causal):
    """The reference FlashAttention for sm_90a, as written (D128): K and V tiles of the 4-D
    [batch][seq][heads][dim] tensors by TMA (a 4-D tensor map per tensor, one box per 64-column
    panel; UTMALDG), both gemms on wgmma (HGMMA, no HMMA), no spills."""
    fn = attention.flash_attention.fn(2, 4, 1000, 128, is_causal=causal, block_M=128, block_N=128,
                                      num_stages=2, threads=256)
    k = build(fn, "sm_90a", {})
    ops = opcodes(k)
    assert {"UTMALDG", "HGMMA"} <= ops and "HMMA" not in ops, sorted(ops)
    assert [t["box"] for t in k.artifact.meta["tma"]] == [[1, 128, 1, 64]] * 2
    assert "TMA tile loads" in k.get_plan()
    # alone on its SM (160 KB of tiles): warp-specialized by default, with setmaxnreg
    assert "warp-specialized" in k.get_plan() and "USETMAXREG" in ops and k.artifact.meta["block"][0] == 384
    from tilecraft.compiler.sass import resource_usage
    assert next(iter(resource_usage(k.artifact.binary).values()))["local_bytes"] == 0


@needs_sass
def test_sm80_main_loops_keep_their_instruction_mix():
    """Issue 9, item 6: the sm_80 path stays the mma.sync / cp.async one and gets no slower.  The README
    GEMM and the reference FlashAttention for sm_80 hold the same tensor-core, copy, ldmatrix and barrier
    instructions as when the Hopper work began (commit 6c35fb7, compiled the same way: GEMM 64 HMMA,
    24 LDGSTS, 16 LDSM, 4 BAR; FlashAttention 128 HMMA, 24 LDGSTS, 72 LDSM, 5 BAR), and no more
    instructions in all than today's plus a tenth (hoist_invariants cut the GEMM's from 888 to 592)."""
    def mix(func):
        sass = build(func, "sm_80").get_sass()
        ops = re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P[0-9T] )?([A-Z0-9_]+)", sass, re.M)
        return len(ops), {op: ops.count(op) for op in ("HMMA", "LDGSTS", "LDSM", "BAR")}
    total, counts = mix(gemm.matmul.fn(4096, 4096, 4096, 128, 128, 32, num_stages=3, threads=128))
    assert counts == {"HMMA": 64, "LDGSTS": 24, "LDSM": 16, "BAR": 4} and total <= 650, (total, counts)
    total, counts = mix(attention.flash_attention.fn(4, 16, 4096, 128, is_causal=False))
    assert counts == {"HMMA": 128, "LDGSTS": 24, "LDSM": 72, "BAR": 5} and total <= 2110, (total, counts)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_cross_warp_row_reduction_stores_a_threads_rows_in_one_statement(arch):
    """MLA decode at 16 heads: the score tile's columns are spread over four warps, so the row max and sum
    cross warps through shared scratch.  Each thread's two row values go there as one vector store, with one
    barrier before the reads -- stored one by one, the barrier pass put a second barrier between them."""
    from tilecraft.kernels import decode
    prog = decode.mla_decode_split.get_tir(2, 16, 256, num_split=2, kv_dtype="float8_e4m3fn",
                                           **decode.mla_decode_config(16))
    src = tilelang.compile(prog, out_idx=[-2, -1], target={"kind": "cuda", "arch": arch}).get_kernel_source()
    scratch = set(re.findall(r"\b(red_smem\w+)\[", src))
    assert len(scratch) == 2, scratch     # the max and the sum
    for name in scratch:
        writes = [ln for ln in src.splitlines()
                  if re.match(rf"\s*{name}\[[^\n]*\] = ", ln) or f"(&{name}[" in ln and "vec_store" in ln]
        assert len(writes) == 1 and "tc::vec_store<float, float, 2>" in writes[0], writes
        after = src[src.index(writes[0]) + len(writes[0]):]
        assert after.index("__syncthreads();") < after.index(f"{name}[")   # one barrier, before the reads
