"""Pass configs as one typed, frozen options object.

`pass_configs={...}` (TileLang's `tl.*` / `tir.*` / `cuda.*` keys and tilecraft's own `tc.*` keys)
becomes an `Options`: one field per key, each with its owner (the code that reads it), its meaning
and what tilecraft does with it.  Every key TileLang defines is accepted; an unknown key is an
error naming it.  A key set to a value other than its default is

- honoured where tilecraft implements it (the field is read by its owner);
- *satisfied* where it turns off something tilecraft never does (`tl.disable_rdc`): nothing to do;
- otherwise warned about once per process, naming the key and the reason ("ignored: ..." or
  "not applicable on the cpu target") -- never silently dropped.

`Options` is hashable (`cache_token()` goes into the kernel cache key) and keeps the mapping that
was given, so a dict-style read `opts.get("tc.x", default)` means what it meant for a dict; passes
read the typed fields from their context (`ctx.options.wgmma`, transform/pipeline.py), where a
TileLang veto and the option it vetoes are resolved once (`wgmma`, `tma`, `warp_specialization`).
"""
from __future__ import annotations

import enum
import shlex
import warnings
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Literal, Union

# A three-way switch: on, off, or decided by its owner per program or per loop.
TriState = Union[bool, Literal["auto"]]


class PassConfigKey(str, enum.Enum):
    """TileLang's pass-config keys (`tilelang.PassConfigKey`); the values are the config strings."""
    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_DYNAMIC_ALIGNMENT = "tl.dynamic_alignment"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_AUTO_SCHEDULE = "tl.enable_auto_schedule"
    TL_ENABLE_AUTO_WARP_SPECIALIZATION = "tl.enable_auto_warp_specialization"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_FP32X2_REDUCTION = "tl.enable_fp32x2_reduction"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_DISABLE_CP_ASYNC = "tl.disable_cp_async"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DISABLE_RDC = "tl.disable_rdc"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tir.disable_cse_tir"
    TIR_SIMPLIFY = "tir.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tir.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tir.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tir.use_async_copy"
    TIR_ENABLE_DEBUG = "tir.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tir.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tir.add_lower_pass"
    TIR_NOALIAS = "tir.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    # tilecraft's own keys
    TC_USE_WGMMA = "tc.use_wgmma"
    TC_WGMMA_ASYNC = "tc.wgmma_async"
    TC_USE_TMA = "tc.use_tma"
    TC_WARP_SPECIALIZE = "tc.warp_specialize"
    TC_MBARRIER_PIPELINE = "tc.mbarrier_pipeline"
    TC_REMAPPED_FRAGMENT_READS = "tc.remapped_fragment_reads"
    TC_STAGE_EPILOGUE = "tc.stage_epilogue"
    TC_OVERLAP_GEMMS = "tc.overlap_gemms"
    TC_OVERLAP_PINGPONG = "tc.overlap_pingpong"
    TC_OVERLAP_INDEPENDENT_GEMMS = "tc.overlap_independent_gemms"
    TC_WIDEN_K_TILES = "tc.widen_k_tiles"
    TC_PERSISTENT_TILES = "tc.persistent_tiles"
    TC_CPU_THREADS = "tc.cpu_threads"
    TC_BULK_REDUCE = "tc.bulk_reduce"
    TC_TMA_REDUCE = "tc.tma_reduce"

    def __str__(self):
        return self.value


# What happens to a non-default value.  A callable status gets the target kind and returns None
# (honoured) or the reason it does not apply.
HONOURED = "honoured"
SATISFIED = "satisfied"


def _cuda_only(kind):
    return None if kind in (None, "cuda") else f"not applicable on the {kind} target (CUDA compilers only)"


def _cpu_only(kind):
    return None if kind in (None, "cpu") else f"not applicable on the {kind} target (the CPU target only)"


def _opt(key, default, kind, owner, meaning, status=HONOURED, check=None):
    """A field of `Options`: `kind` is bool/int/str/"flags"/"any"; `status` HONOURED, SATISFIED,
    a callable (target kind -> reason or None), or a string: the reason it is ignored."""
    return field(default=default, metadata=dict(key=key, kind=kind, owner=owner, meaning=meaning,
                                                 status=status, check=check))


def _ignored(why):
    return f"ignored: {why}"


_NO_TVM = "tilecraft has its own IR and passes (no TVM); this TVM pass has no counterpart"


def _level(v):
    if not 0 <= v <= 10:
        raise ValueError("must be in 0..10")


def _choice(v, allowed):
    if v not in allowed or (isinstance(v, int) and not isinstance(v, bool) and v not in (0, 1)):
        raise ValueError(f"must be one of {allowed}")


def _bitwidth(v):
    if v not in (32, 64):
        raise ValueError("must be 32 or 64")


@dataclass(frozen=True)
class Options:
    """One field per pass-config key; see the module docstring.  Build with `Options.make`."""
    # ---- tilecraft's own (owners: transform/*) ----
    use_wgmma: bool = _opt("tc.use_wgmma", False, bool, "transform/infer_layouts.py",
                           "Hopper wgmma GEMMs on sm_90a (the four tc.* Hopper switches default on for sm_90a: "
                           "Target.pass_config_defaults)")
    wgmma_async: bool = _opt("tc.wgmma_async", False, bool, "transform/plan_pipelines.py",
                             "keep one wgmma group in flight across a pipelined loop (with tc.use_wgmma)")
    use_tma: bool = _opt("tc.use_tma", False, bool, "transform/plan_pipelines.py",
                         "load the tiles of that loop with TMA (with tc.wgmma_async)")
    warp_specialize: TriState = _opt("tc.warp_specialize", False, "choice", "transform/plan_pipelines.py",
                                     "a producer warpgroup issues the TMA loads: True, False or \"auto\" (decided per "
                                     "loop; the sm_90a default)", check=lambda v: _choice(v, (True, False, "auto")))
    mbarrier_pipeline: bool = _opt("tc.mbarrier_pipeline", False, bool, "transform/plan_pipelines.py",
                                   "per-stage mbarriers instead of a block barrier in GEMM main loops")
    remapped_fragment_reads: bool = _opt(
        "tc.remapped_fragment_reads", True, bool, "transform/lower_cuda.py",
        "accept T.Parallel reads of a fragment laid out another way (each thread reads its own copy) or in "
        "column windows; False refuses them (the layout error)")
    overlap_gemms: bool = _opt("tc.overlap_gemms", True, bool, "transform/plan_pipelines.py",
                               "a warp-specialized loop of two gemms (FlashAttention's) overlaps its softmax with "
                               "the previous iteration's second gemm (two rings of stages, or one with 3+ stages)")
    overlap_pingpong: bool = _opt("tc.overlap_pingpong", True, bool, "transform/plan_pipelines.py",
                                  "in that loop, consumer warpgroups issue their gemms in turns (ping-pong)")
    overlap_independent_gemms: bool = _opt(
        "tc.overlap_independent_gemms", True, bool, "transform/overlap_independent_gemms.py",
        "sm_90a: two independent wgmma gemms in a row issue back to back, the first one's result used while the "
        "second runs (the same instructions; only the waits move)", status=_cuda_only)
    widen_k_tiles: bool = _opt("tc.widen_k_tiles", True, bool, "transform/widen_k_tiles.py",
                               "a TMA + wgmma main loop of k-tiles under 128 bytes (block_K=32 halves) runs with "
                               "128-byte ones (fewer, deeper stages; the same sums in the same order)")
    persistent_tiles: TriState = _opt("tc.persistent_tiles", "auto", "choice", "transform/plan_pipelines.py",
                                      "sm_90a: a GEMM kernel's TMA main loop runs in one block per SM that walks the "
                                      "grid's tiles, the next tile's first k-tiles loading during this tile's "
                                      "epilogue: True, False or \"auto\" (short main loops over many waves, where it "
                                      "measured faster)", check=lambda v: _choice(v, (True, False, "auto")))
    stage_epilogue: bool = _opt("tc.stage_epilogue", True, bool, "transform/stage_epilogue.py",
                                "gemm accumulators leave through a padded shared tile")
    bulk_reduce: bool = _opt("tc.bulk_reduce", True, bool, "transform/cuda_ops/misc.py",
                             "sm_90+: T.atomic_add of a shared tile into global memory is one TMA bulk reduce-add "
                             "per row (cp.reduce.async.bulk) instead of one atomic per element (tl.disable_tma_lower "
                             "turns it off too)")
    tma_reduce: bool = _opt("tc.tma_reduce", True, bool, "transform/cuda_ops/tma_reduce.py",
                            "sm_90+: a shared tile that only stages a gemm accumulator for T.atomic_add into a "
                            "kernel's tensor is laid out in the 128-byte swizzle (bank-conflict-free stores) and "
                            "added by TMA tensor reduces, one per 128-byte column panel")
    cpu_threads: TriState = _opt("tc.cpu_threads", "auto", "choice", "transform/cpu_threads.py",
                                 "CPU target: blocks run with their CUDA threads emulated (one fiber per thread, the "
                                 "CUDA lowering's per-thread code): \"auto\" where the program needs it (thread "
                                 "indices, warp shuffles, warp groups waiting on each other), True for every kernel "
                                 "(checks the thread-level lowering without a GPU), False never (such programs are "
                                 "refused)", status=_cpu_only, check=lambda v: _choice(v, (True, False, "auto")))
    # ---- TileLang keys tilecraft honours ----
    disable_wgmma: bool = _opt("tl.disable_wgmma", False, bool, "transform/infer_layouts.py",
                               "never use wgmma (wins over tc.use_wgmma)")
    disable_tma_lower: bool = _opt("tl.disable_tma_lower", False, bool, "transform/plan_pipelines.py",
                                   "never lower copies to TMA (wins over tc.use_tma)")
    disable_warp_specialized: bool = _opt("tl.disable_warp_specialized", False, bool,
                                          "transform/plan_pipelines.py",
                                          "no producer/consumer warp specialization")
    # fast math permits approximate exp/division, it does not demand them: the CPU target, exact,
    # satisfies it (no warning there, so one kernel can carry it to every target)
    enable_fast_math: bool = _opt("tl.enable_fast_math", False, bool, "compiler/cuda.py",
                                  "--use_fast_math for the CUDA compiler (the CPU target stays exact)")
    disable_fast_math: bool = _opt("tl.disable_fast_math", False, bool, "compiler/cuda.py",
                                   "no fast math (wins over tl.enable_fast_math)")
    ptxas_register_usage_level: int | None = _opt("tl.ptxas_register_usage_level", None, int, "compiler/cuda.py",
                                                  "-Xptxas --register-usage-level=N", _cuda_only, _level)
    enable_ptxas_verbose_output: bool = _opt("tl.enable_ptxas_verbose_output", False, bool,
                                             "compiler/cuda.py", "ptxas -v, printed after the compile",
                                             _cuda_only)
    device_compile_flags: tuple = _opt("tl.device_compile_flags", (), "flags", "compiler/cuda.py",
                                       "extra flags for NVRTC / nvcc (also jit(compile_flags=))", _cuda_only)
    kernels_output_dir: str = _opt("cuda.kernels_output_dir", "", str, "compiler/build.py",
                                   "write each generated kernel source into this folder")
    # ---- TileLang keys that ask not to do what tilecraft never does ----
    disable_dynamic_tail_split: bool = _opt("tl.disable_dynamic_tail_split", False, bool, "-",
                                            "tilecraft guards ragged tails, it never splits them", SATISFIED)
    disable_rdc: bool = _opt("tl.disable_rdc", False, bool, "-", "no relocatable device code is ever made",
                             SATISFIED)
    disable_shuffle_elect: bool = _opt("tl.disable_shuffle_elect", False, bool, "-",
                                       "tilecraft elects threads by index, not by shuffle", SATISFIED)
    disable_vectorize_256: bool = _opt("tl.disable_vectorize_256", False, bool, "-",
                                       "tilecraft's widest access is 128 bits", SATISFIED)
    disable_data_race_check: bool = _opt("tl.disable_data_race_check", True, bool, "-",
                                         "tilecraft has no data-race checker", SATISFIED)
    disable_buffer_init_check: bool = _opt("tl.disable_buffer_init_check", False, bool, "-",
                                           "tilecraft has no buffer-initialization checker", SATISFIED)
    disable_out_of_bound_warning: bool = _opt("tl.disable_out_of_bound_warning", True, bool, "-",
                                              "tilecraft prints no run-time out-of-bound warnings", SATISFIED)
    enable_fp32x2_reduction: bool = _opt("tl.enable_fp32x2_reduction", True, bool, "-",
                                         "packed fp32x2 sums exist on sm_100+ only; tilecraft never emits them",
                                         SATISFIED)
    # ---- TileLang keys tilecraft accepts and ignores, with the reason ----
    simplify: Any = _opt("tl.Simplify", None, "any", "-", "TVM simplifier options", _ignored(_NO_TVM))
    dynamic_alignment: int = _opt("tl.dynamic_alignment", 16, int, "-", "assumed alignment of dynamic shapes",
                                  _ignored("tilecraft checks each argument at call time and vectorizes only "
                                           "what it can prove aligned"))
    disable_prelower_semantic_check: bool = _opt(
        "tl.disable_prelower_semantic_check", False, bool, "-", "skip front-end checks",
        _ignored("tilecraft's front-end checks reject programs that would compute wrong results"))
    enable_auto_schedule: bool = _opt("tl.enable_auto_schedule", True, bool, "-", "Ascend auto scheduling",
                                      _ignored("an Ascend option; tilecraft has no Ascend target"))
    enable_auto_warp_specialization: Any = _opt("tl.enable_auto_warp_specialization", None, "any", "-",
                                                "automatic warp-specialization scheduler",
                                                _ignored("tilecraft has no automatic warp specialization"))
    emit_line_directives: bool = _opt("tl.emit_line_directives", False, bool, "-", "#line directives",
                                      _ignored("tilecraft echoes each tile op as a comment with its "
                                               "source line instead"))
    config_index_bitwidth: int = _opt("tl.config_index_bitwidth", 32, int, "-", "index bit width",
                                      _ignored("tilecraft picks index types per expression"), _bitwidth)
    enable_reducer_plan_verbose: bool = _opt("tl.enable_reducer_plan_verbose", False, bool, "-", "log",
                                             _ignored("use `tilecraft show --what lowered`"))
    layout_cost_model: Any = _opt("tl.layout_cost_model", None, "any", "-", "layout ranking",
                                  _ignored("tilecraft's layout inference has no cost model to choose"))
    reducer_force_baseline: bool = _opt("tl.reducer_force_baseline", False, bool, "-", "reducer plans",
                                        _ignored("tilecraft has one reduction lowering"))
    disable_safe_memory_legalize: bool = _opt(
        "tl.disable_safe_memory_legalize", False, bool, "-", "drop bounds guards",
        _ignored("tilecraft always guards out-of-bounds accesses (SPEC: ragged edges are correct)"))
    enable_async_copy: bool = _opt("tl.enable_async_copy", True, bool, "-", "cp.async lowering",
                                   _ignored("pipelined loops on sm_80+ always load with cp.async"))
    disable_cp_async: bool = _opt("tl.disable_cp_async", False, bool, "-", "no cp.async",
                                  _ignored("pipelined loops on sm_80+ always load with cp.async"))
    enable_lower_ldgstg: bool = _opt("tl.enable_lower_ldgstg", False, bool, "-", "ldg/stg intrinsics",
                                     _ignored("tilecraft emits plain vector loads and stores"))
    enable_lower_ldgstg_predicated: bool = _opt("tl.enable_lower_ldgstg_predicated", False, bool, "-",
                                                "predicated ldg/stg", _ignored("tilecraft emits plain guarded "
                                                                               "loads and stores"))
    enable_vectorize_planner_verbose: bool = _opt("tl.enable_vectorize_planner_verbose", False, bool, "-",
                                                  "log", _ignored("use `tilecraft show --what lowered`"))
    debug_merge_shared_memory_allocations: bool = _opt(
        "tl.debug_merge_shared_memory_allocations", False, bool, "-", "log",
        _ignored("the shared-memory plan is shown by `tilecraft show --what lowered`"))
    enable_aggressive_shared_memory_merge: bool = _opt(
        "tl.enable_aggressive_shared_memory_merge", False, bool, "-", "smem merge",
        _ignored("tilecraft's shared-memory planner has one policy"))
    disable_shared_memory_reuse: bool = _opt("tl.disable_shared_memory_reuse", False, bool, "-", "smem reuse",
                                             _ignored("tilecraft's shared-memory planner has one policy"))
    disable_loop_unswitching: bool = _opt("tl.disable_loop_unswitching", False, bool, "-", "unswitching",
                                          _ignored(_NO_TVM))
    loop_unswitching_allow_non_trivial_else: bool = _opt("tl.loop_unswitching_allow_non_trivial_else", False,
                                                         bool, "-", "unswitching", _ignored(_NO_TVM))
    if_stmt_binding_inline_replayable_binds: bool = _opt("tl.if_stmt_binding_inline_replayable_binds", True,
                                                         bool, "-", "if distribution", _ignored(_NO_TVM))
    disable_thread_storage_sync: bool = _opt(
        "tl.disable_thread_storage_sync", False, bool, "-", "no automatic barriers",
        _ignored("tilecraft inserts the barriers its lowering needs; removing them would race"))
    force_let_inline: bool = _opt("tl.force_let_inline", False, bool, "-", "let inlining", _ignored(_NO_TVM))
    ast_print_enable: bool = _opt("tl.ast_print_enable", False, bool, "-", "debug print",
                                  _ignored("use `tilecraft show --what ir`"))
    layout_visualization_enable: bool = _opt("tl.layout_visualization_enable", False, bool, "-", "plots",
                                             _ignored("tilecraft draws no layout plots"))
    layout_visualization_formats: Any = _opt("tl.layout_visualization_formats", None, "any", "-", "plots",
                                             _ignored("tilecraft draws no layout plots"))
    storage_rewrite_detect_inplace: bool = _opt("tl.storage_rewrite_detect_inplace", False, bool, "-",
                                                "storage rewrite", _ignored(_NO_TVM))
    enable_dump_ir: bool = _opt("tl.enable_dump_ir", False, bool, "-", "dump IR per pass",
                                _ignored("use `tilecraft show --what ir|lowered`"))
    dump_ir_path: Any = _opt("tl.dump_ir_path", None, "any", "-", "dump folder",
                             _ignored("use `tilecraft show --what ir|lowered`"))
    pass_profile: bool = _opt("tl.pass_profile", False, bool, "-", "pass timing",
                              _ignored("TILECRAFT_VERBOSE prints the compile time"))
    pass_profile_threshold_ms: Any = _opt("tl.pass_profile_threshold_ms", 0, "any", "-", "pass timing",
                                          _ignored("TILECRAFT_VERBOSE prints the compile time"))
    tir_enable_equiv_terms_in_cse: bool = _opt("tir.enable_equiv_terms_in_cse_tir", True, bool, "-", "CSE",
                                               _ignored(_NO_TVM))
    tir_disable_cse: bool = _opt("tir.disable_cse_tir", False, bool, "-", "CSE", _ignored(_NO_TVM))
    tir_simplify: Any = _opt("tir.Simplify", None, "any", "-", "TVM simplifier", _ignored(_NO_TVM))
    tir_disable_storage_rewrite: bool = _opt("tir.disable_storage_rewrite", False, bool, "-", "storage rewrite",
                                             _ignored(_NO_TVM))
    tir_disable_vectorize: bool = _opt("tir.disable_vectorize", False, bool, "-", "no vectorization",
                                       _ignored("tilecraft always vectorizes T.Parallel loops it can prove "
                                                "aligned; results do not change"))
    tir_use_async_copy: bool = _opt("tir.use_async_copy", True, bool, "-", "cp.async",
                                    _ignored("pipelined loops on sm_80+ always load with cp.async"))
    tir_enable_debug: bool = _opt("tir.enable_debug", False, bool, "-", "debug info",
                                  _ignored("kernels always carry -lineinfo"))
    tir_merge_static_smem: bool = _opt("tir.merge_static_smem", True, bool, "-", "smem merge",
                                       _ignored("tilecraft's shared-memory planner has one policy"))
    tir_add_lower_pass: Any = _opt("tir.add_lower_pass", None, "any", "-", "user TVM passes", _ignored(_NO_TVM))
    tir_noalias: bool = _opt("tir.noalias", True, bool, "-", "restrict pointers",
                             _ignored("tilecraft's kernel parameters are always non-aliasing"))

    # the mapping as given (explicit keys only): old-style `.get(key, default)` reads keep their meaning
    given: tuple = field(default=(), compare=False, repr=False)

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def make(cls, configs=None, target_kind=None, *, warn=True) -> "Options":
        """Validate `configs` (a dict; keys as strings or `PassConfigKey`) into `Options`.
        Unknown keys and badly typed values raise `ValueError` naming the key."""
        if isinstance(configs, Options):
            configs = dict(configs.given)
        values, given = {}, []
        for raw_key, value in (configs or {}).items():
            key = raw_key.value if isinstance(raw_key, PassConfigKey) else str(raw_key)
            key = _ALIASES.get(key, key)
            f = _BY_KEY.get(key)
            if f is None:
                import difflib
                close = difflib.get_close_matches(key, list(_BY_KEY), 1)
                raise ValueError(f"unknown pass_configs key {key!r}" +
                                 (f" (did you mean {close[0]!r}?)" if close else "") +
                                 f"; known keys: {', '.join(sorted(_BY_KEY))}")
            value = _coerce(key, f.metadata, value)
            values[f.name] = value
            given.append((key, _frozen(value)))
        opts = cls(**values, given=tuple(sorted(given, key=lambda kv: kv[0])))
        if warn:
            opts.warn_unhonoured(target_kind)
        return opts

    # ---- reading ------------------------------------------------------------------------------
    def get(self, key, default=None):
        """dict-style read of an explicitly given key (the meaning `pass_configs.get` always had)."""
        key = key.value if isinstance(key, PassConfigKey) else key
        for k, v in self.given:
            if k == key:
                return v
        return default

    def __contains__(self, key):
        return self.get(key, _MISSING) is not _MISSING

    def items(self):
        return list(self.given)

    def keys(self):
        return [k for k, _ in self.given]

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self.given)

    def __getitem__(self, key):
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return v

    @property
    def wgmma(self) -> bool:
        """wgmma GEMMs asked for and not vetoed by tl.disable_wgmma."""
        return self.use_wgmma and not self.disable_wgmma

    @property
    def tma(self) -> bool:
        """TMA tile loads asked for and not vetoed by tl.disable_tma_lower."""
        return self.use_tma and not self.disable_tma_lower

    @property
    def warp_specialization(self) -> TriState:
        """tc.warp_specialize (True, False or "auto") unless tl.disable_warp_specialized vetoes it."""
        return False if self.disable_warp_specialized else self.warp_specialize

    @property
    def fast_math(self) -> bool:
        return self.enable_fast_math and not self.disable_fast_math

    def cache_token(self) -> tuple:
        """Every field's value (defaults included): a change in any option is a new kernel."""
        return tuple((f.metadata["key"], _frozen(getattr(self, f.name))) for f in fields(self)
                     if "key" in f.metadata)

    def status(self, key, target_kind=None):
        """(state, reason): state is "honoured", "satisfied" or "ignored" for `key` on this target."""
        f = _BY_KEY[_ALIASES.get(key, key)]
        st = f.metadata["status"]
        if callable(st):
            reason = st(target_kind)
            return ("honoured", None) if reason is None else ("ignored", reason)
        if st in (HONOURED, SATISFIED):
            return st, None
        return "ignored", st

    def warn_unhonoured(self, target_kind=None) -> None:
        """One `UserWarning` per (key, reason) per process for each given non-default value that
        tilecraft does not act on."""
        for key, _ in self.given:
            f = _BY_KEY[key]
            if getattr(self, f.name) == f.default:
                continue
            state, reason = self.status(key, target_kind)
            if state == "ignored" and (key, reason) not in _WARNED:
                _WARNED.add((key, reason))
                warnings.warn(f"pass_configs {key}={getattr(self, f.name)!r}: {reason}",
                              UnhonouredOptionWarning, stacklevel=4)


class UnhonouredOptionWarning(UserWarning):
    """A TileLang option or pass-config key that tilecraft accepts but does not act on here."""


_MISSING = object()
_WARNED: set = set()
_BY_KEY = {f.metadata["key"]: f for f in fields(Options) if "key" in f.metadata}
# later TileLang releases spell the TVM keys "tirx.*"
_ALIASES = {k.replace("tir.", "tirx.", 1): k for k in _BY_KEY if k.startswith("tir.")}


def _frozen(v):
    if isinstance(v, dict):
        return tuple(sorted((str(k), _frozen(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(x) for x in v)
    return v


def _coerce(key, meta, value):
    kind = meta["kind"]
    if kind is bool:
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
            value = value.lower() in ("true", "1")
        if not isinstance(value, (bool, int)) or value not in (0, 1):
            raise ValueError(f"pass_configs {key!r} must be True or False, got {value!r}")
        value = bool(value)
    elif kind is int:
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).lstrip("-").isdigit():
                raise ValueError(f"pass_configs {key!r} must be an integer, got {value!r}")
            value = int(value)
    elif kind is str:
        if not isinstance(value, str):
            raise ValueError(f"pass_configs {key!r} must be a string (a folder), got {value!r}")
    elif kind == "flags":
        if value is None:
            value = ()
        elif isinstance(value, str):
            value = tuple(shlex.split(value))
        elif isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
            value = tuple(value)
        else:
            raise ValueError(f"pass_configs {key!r} must be a string or a list of strings, got {value!r}")
    else:
        value = _frozen(value)
    check: Callable | None = meta["check"]
    if check is not None and value is not None:
        try:
            check(value)
        except ValueError as e:
            raise ValueError(f"pass_configs {key!r} {e}, got {value!r}") from None
    return value


def as_options(configs) -> Options:
    return configs if isinstance(configs, Options) else Options.make(configs, warn=False)


def table() -> str:
    """A markdown table of every key: what tilecraft does with it (for the docs and the tests)."""
    rows = ["| key | default | tilecraft | owner / reason |", "| --- | --- | --- | --- |"]
    for key, f in sorted(_BY_KEY.items()):
        st = f.metadata["status"]
        what = ("honoured (CUDA)" if callable(st) else "honoured" if st == HONOURED else
                "nothing to do" if st == SATISFIED else "warned")
        why = f.metadata["owner"] if st == HONOURED or callable(st) else f.metadata["meaning"] \
            if st == SATISFIED else st
        rows.append(f"| `{key}` | {f.default!r} | {what} | {why} |")
    return "\n".join(rows)
