"""The `T.*` language surface (use as `import tilecraft.language as T`)."""
from ..ir.dtype import DType
from .types import (Tensor, Buffer, StridedTensor, TensorSpec, dynamic, symbolic, GemmWarpPolicy,
                    float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2, int8, int16,
                    int32, int64, uint8, uint16, uint32, uint64, boolean)
from .parser import prim_func, macro
from .eager import const, empty
from .kernel import (Kernel, Parallel, parallel, Persistent, Pipelined, serial, unroll, vectorized, grid, alloc_shared,
                     alloc_fragment, alloc_global, alloc_local, alloc_var, get_thread_binding,
                     get_thread_bindings, get_block_binding, get_block_bindings, sync_threads, sync_grid)
from .tileops import (copy, async_copy, transpose, gemm, fill, clear, reduce, reduce_max, reduce_min,
                      reduce_sum, reduce_abssum, reduce_absmax, reduce_bitand, reduce_bitor, reduce_bitxor, atomic_add, atomic_max, atomic_min,
                      atomic_load, atomic_store,
                      cumsum, print)
from .math import (exp, exp2, exp10, log, log2, log10, log1p, sqrt, rsqrt, tanh, sigmoid, erf,
                   floor, ceil, round, trunc, sin, cos, tan, isnan, isinf, isfinite, abs, pow, fmod, atan2,
                   max, min, ceildiv, floordiv, floormod, truncdiv, truncmod, if_then_else, Select, reinterpret,
                   cast, infinity, max_value, min_value, And, Or, Not, bitwise_and, bitwise_or,
                   bitwise_xor, shift_left, shift_right, sinh, cosh, asin, acos, atan, asinh, acosh, atanh,
                   nearbyint, hypot, copysign, nextafter, clz, popcount)
from .conv import c2d_im2col  # noqa: E402
from .views import view, make_tensor  # noqa: E402
from .math import __exp, __exp10, __log, __log2, __log10, __tan, __cos, __sin  # noqa: F401
from .annotations import (use_swizzle, annotate_layout, make_swizzled_layout, annotate_l2_hit_ratio,
                          annotate_safe_value, annotate_padding, no_set_max_nreg)

bool = boolean  # noqa: A001 - T.bool as in TileLang
float = float32  # noqa: A001
from .dtypes import (short, long, uint, double, int4, tfloat32, float8_e4m3, float8_e8m0fnu,  # noqa: E402
                     float4_e2m1fn, float4_e2m1_unpacked, float6_e2m3fn, float6_e3m2fn)
from . import dtypes  # noqa: E402,F401
int = int32  # noqa: A001 - T.int as in TileLang (int32)
from .compat import (dtype, Cast, clamp, SharedBuffer, FragmentBuffer, LocalBuffer, attr,
                     annotate_restrict_buffers, pdl_trigger, pdl_sync,
                     index_to_coordinates, atomic_addx2, atomic_addx4, any_of, all_of, assume)
from .sparse import gemm_sp, gemm_sp_v2
from .hopper import (alloc_barrier, barrier_arrive, barrier_wait, mbarrier_arrive, mbarrier_wait_parity, ws,
                     cp_async_barrier_noinc,
                     set_max_nreg, disable_warp_group_reg_alloc, annotate_producer_reg_dealloc,
                     annotate_consumer_reg_alloc, tma_copy, tma_store_arrive, tma_store_wait, wgmma_gemm,
                     wait_wgmma)

half = float16
Serial, Unroll, Vectorized = serial, unroll, vectorized  # newer TileLang's spellings
gemm_v1 = gemm_v2 = gemm   # TileLang's two gemm lowerings; tilecraft has one (it picks the instructions)
reshape = view             # T.reshape(buf, shape): a view of the same elements
from .random import rng_init, rng_rand  # noqa: E402
from .lowlevel import (thread_binding, import_source, call_extern, call_pure_extern, access_ptr, evaluate,  # noqa: E402
                       comm_reducer, tvm_thread_allreduce, address_of, dp4a, loop_break, device_assert)
from .lowlevel import __ldg  # noqa: E402,F401
from .warp import (get_lane_idx, get_warp_idx, get_warp_idx_sync, get_warp_group_idx, shfl_xor, shfl_down,  # noqa: E402
                   shfl_up, shfl_sync, sync_warp, warp_reduce_sum, warp_reduce_max, warp_reduce_min,
                   warp_reduce_bitand, warp_reduce_bitor, warp_reduce_bitxor)
from .layout import Layout, Fragment  # noqa: E402
from .ptx import (ptx_cp_async, ptx_commit_group, ptx_wait_group, fence_proxy_async,  # noqa: E402
                  mbarrier_arrive_expect_tx, named_barrier_arrive, any_sync, all_sync, ballot_sync, ballot)
from .blackwell import *  # noqa: E402,F401,F403 - sm_100 / sm_120 constructs, refused by name
from .cluster import ClusterKernel, block_rank_in_cluster, alloc_cluster_barrier  # noqa: E402
from .reducer import alloc_reducer, reducer_init, reducer_update, finalize_reducer  # noqa: E402
from .misc import Var, Ramp, Broadcast, align_up  # noqa: E402
im2col = c2d_im2col  # TileLang's newer name, same arguments
ptr = int64  # T.ptr: a tensor of addresses (`tensor.data_ptr()` values, a torch int64 tensor); see T.make_tensor
from .tile_schedule import PersistentTileScheduler  # noqa: E402
from .ws_schedule import (WSID, WSRole, WSPipeline, WSSync, WSScope, WSSchedule, annotate_ws_schedule,  # noqa: E402
                          ws_op)
