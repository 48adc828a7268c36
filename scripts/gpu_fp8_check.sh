#!/usr/bin/env bash
# Issue 25's FP8 tensor-core path and int64 kernel parameters on a GPU machine, in one command (< 4 min
# on an H200): the fp8 and index-width GPU tests (with their sm_90a compile/SASS twins), then
# `benchmarks/bench.py --only fp8_gemm` (per-tensor 128x128 and 128x256, block-scaled, against
# torch._scaled_mm at 4096^3 and 8192^3).  Logs and the benchmark's .md/.json go to $OUT (default ./gpu_out).
#
#   scripts/gpu_fp8_check.sh                 # tests + benchmark
#   SKIP_BENCH=1 scripts/gpu_fp8_check.sh    # tests only;  SKIP_TESTS=1: benchmark only
set -uo pipefail  # no -e: a failing test run must still reach the benchmark

cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export OUT="${OUT:-$PWD/gpu_out}"
PY="${PY:-python3}"
mkdir -p "$OUT"

test_rc=skipped
if [ -z "${SKIP_TESTS:-}" ]; then
  echo "=== fp8 + int64 tests ==="
  timeout -k 10 "${TEST_TIMEOUT:-150}" "$PY" -m pytest -q -rs -p no:cacheprovider \
    tests/gpu/test_new_kernels_gpu.py tests/gpu/test_index_width_gpu.py \
    tests/cuda/test_new_kernels_sm90.py tests/cuda/test_index_width_compile.py \
    -k "fp8 or 2_31 or int64" 2>&1 | tee "$OUT/fp8_tests.log"
  test_rc=${PIPESTATUS[0]}
fi

bench_rc=skipped
if [ -z "${SKIP_BENCH:-}" ]; then
  echo "=== benchmark: fp8_gemm ==="
  timeout -k 10 "${BENCH_TIMEOUT:-150}" "$PY" benchmarks/bench.py --only fp8_gemm 2>&1 | tee "$OUT/fp8_bench.log"
  bench_rc=${PIPESTATUS[0]}
fi

echo "=== summary ==="
[ -f "$OUT/fp8_tests.log" ] && tail -n 3 "$OUT/fp8_tests.log"
[ -f "$OUT/fp8_bench.log" ] && grep -E "fp8|^\|" "$OUT/fp8_bench.log" | tail -n 12
echo "tests rc=$test_rc bench rc=$bench_rc"
[ "$test_rc" = 0 ] || [ "$test_rc" = skipped ] || exit 1
[ "$bench_rc" = 0 ] || [ "$bench_rc" = skipped ] || exit 1
