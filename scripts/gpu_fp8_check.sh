#!/usr/bin/env bash
# Issue 25's FP8 tensor-core path and int64 kernel parameters on a GPU machine, in one command (< 4 min
# on an H200): the fp8 and index-width GPU tests (with their sm_90a compile/SASS twins), then
# `benchmarks/bench.py --only fp8_gemm` (per-tensor 128x128 and 128x256, block-scaled, against
# torch._scaled_mm at 4096^3 and 8192^3) -- scripts/gpu_check.sh with that selection.  Logs and the
# benchmark's .md/.json go to $OUT (default ./gpu_out).
#
#   scripts/gpu_fp8_check.sh                 # tests + benchmark
#   SKIP_BENCH=1 scripts/gpu_fp8_check.sh    # tests only;  SKIP_TESTS=1: benchmark only
cd "$(dirname "$0")/.."
TESTS="tests/gpu/test_new_kernels_gpu.py tests/gpu/test_index_width_gpu.py tests/cuda/test_new_kernels_sm90.py tests/cuda/test_index_width_compile.py" \
PYTEST_K="fp8 or 2_31 or int64" TEST_TIMEOUT="${TEST_TIMEOUT:-150}" BENCH_TIMEOUT="${BENCH_TIMEOUT:-150}" \
  exec scripts/gpu_check.sh --only fp8_gemm "$@"
