#!/usr/bin/env bash
# One command for the GPU machine: environment, the GPU + CUDA test tiers, then the benchmark,
# ending with a short summary (test counts + the benchmark table).  Installs nothing: the package
# runs from this checkout through PYTHONPATH.  Logs go to $OUT (default ./gpu_out):
#   gpu_tests.log, bench.log, plus the benchmark's own .md/.json results.
#
#   scripts/gpu_check.sh                 # everything
#   scripts/gpu_check.sh --quick         # arguments go to benchmarks/bench.py (--quick, --only gemm)
#   TESTS="tests/gpu/test_cuda_launch.py" scripts/gpu_check.sh --only launch   (default: the whole GPU tier, ~5.5 min on an H200)
#   SKIP_TESTS=1 / SKIP_BENCH=1          # run only one half
#   TEST_TIMEOUT=1800 BENCH_TIMEOUT=1800  # seconds per half (a hung kernel must not eat the call)
#   TILECRAFT_PASS_CONFIGS='{"tc.use_wgmma": true, "tc.wgmma_async": true}' TESTS="tests/gpu tests/cpu" \
#     scripts/gpu_check.sh --only gemm,flash_attention   # every program with the Hopper GEMM switched on
set -uo pipefail  # no -e: a failing test run must still reach the benchmark

cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export OUT="${OUT:-$PWD/gpu_out}"
PY="${PY:-python3}"
TESTS="${TESTS:-tests/gpu tests/cuda tests/cpu tests/runtime tests/tools}"  # tests/cpu: every CPU-tier program on CUDA too
mkdir -p "$OUT"

echo "=== environment ==="
nvidia-smi || echo "(nvidia-smi failed)"
"$PY" - <<'EOF' 2>&1 | tee "$OUT/env.log"
import sys, platform
print("python", sys.version.split()[0], platform.machine())
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
    if torch.cuda.is_available():
        print("device", torch.cuda.get_device_name(), torch.cuda.get_device_capability())
except Exception as e:
    print("torch import failed:", e)
try:
    from cuda.bindings import nvrtc
    print("nvrtc", nvrtc.nvrtcVersion()[1:])
except Exception as e:
    print("nvrtc unavailable:", e)
import tilecraft.env as env
print("tilecraft cuda compiler:", env.cuda_compiler())
EOF
command -v nvcc >/dev/null && nvcc --version | tail -n 2

test_rc=skipped
if [ -z "${SKIP_TESTS:-}" ]; then
  echo "=== tests: $TESTS ==="
  # shellcheck disable=SC2086  # TESTS is a list of paths
  timeout -k 10 "${TEST_TIMEOUT:-1800}" "$PY" -m pytest $TESTS -q -rs -p no:cacheprovider 2>&1 \
    | tee "$OUT/gpu_tests.log"
  test_rc=${PIPESTATUS[0]}
fi

bench_rc=skipped
if [ -z "${SKIP_BENCH:-}" ]; then
  echo "=== benchmark ==="
  timeout -k 10 "${BENCH_TIMEOUT:-1800}" "$PY" benchmarks/bench.py "$@" 2>&1 | tee "$OUT/bench.log"
  bench_rc=${PIPESTATUS[0]}
fi

echo
echo "================================ summary ================================"
if [ -f "$OUT/gpu_tests.log" ] && [ "$test_rc" != skipped ]; then
  echo "tests ($TESTS): exit $test_rc$([ "$test_rc" = 124 ] && echo ' (timed out)')"
  grep -E '^(FAILED|ERROR) ' "$OUT/gpu_tests.log" | head -n 40
  grep -E '[0-9]+ (passed|failed|error|skipped)' "$OUT/gpu_tests.log" | tail -n 1
fi
if [ -f "$OUT/bench.log" ] && [ "$bench_rc" != skipped ]; then
  echo "benchmark: exit $bench_rc$([ "$bench_rc" = 124 ] && echo ' (timed out)')"
  sed -n '/^tilecraft bench /,$p' "$OUT/bench.log"
fi
[ "$test_rc" = 0 ] || [ "$test_rc" = skipped ] || exit 1
[ "$bench_rc" = 0 ] || [ "$bench_rc" = skipped ] || exit 1
exit 0
