// tilecraft/tilecraft.h — the whole device header library; generated CUDA code includes this.
// Kept light on purpose (no <cuda/std>, no CUTLASS/CuTe, few templates): NVRTC parses all of it
// for every kernel, and cold compile time is a feature.
#pragma once

#include "common.h"
#include "memory.h"
#include "math.h"
#include "mma.h"
#include "ldmatrix.h"
#include "cp_async.h"
#include "pipeline.h"
#include "gemm_sm80.h"
#include "gemm_sm90.h"  // declares tc::gemm_ss_sm90 everywhere; wgmma code only under sm_90a
#include "tma.h"        // TMA tile loads (sm_90+); tc::TmaDesc everywhere
#include "reduce.h"
#include "atomic.h"
#include "print.h"
#include "vector.h"
#include "random.h"
#include "iket.h"       // in-kernel trace events (only under TC_IKET)
