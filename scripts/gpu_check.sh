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
#   SHARDS=8                             # the test files over 8 pytest processes at once (one log each)
#   PYTEST_K="fp8 or int64"              # a pytest -k selection within TESTS (scripts/gpu_fp8_check.sh uses it)
#   FUZZ=10000 [FUZZ_SEED=1]             # also the differential fuzzer on every CUDA path (table in $OUT)
#   COMPAT=1 [COMPAT_JOBS=8]             # also TileLang's corpus (cp -r ../shared/tilelang-examples compat_corpus;
#                                        #   run with carry=["compat_corpus"]); table + logs tarball in $OUT
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
  if [ -n "${SHARDS:-}" ]; then  # SHARDS=N: the test files dealt round-robin to N pytest processes at once
    # shellcheck disable=SC2086
    mapfile -t files < <(find $TESTS -name 'test_*.py' | sort)
    pids=()
    for ((s = 0; s < SHARDS; s++)); do
      mine=(); for ((i = s; i < ${#files[@]}; i += SHARDS)); do mine+=("${files[i]}"); done
      [ ${#mine[@]} -gt 0 ] || continue
      timeout -k 10 "${TEST_TIMEOUT:-1800}" "$PY" -m pytest "${mine[@]}" ${PYTEST_K:+-k "$PYTEST_K"} -q -rs \
        -p no:cacheprovider > "$OUT/gpu_tests.shard$s.log" 2>&1 &
      pids+=($!)
    done
    test_rc=0
    for p in "${pids[@]}"; do wait "$p" || test_rc=$?; done
    cat "$OUT"/gpu_tests.shard*.log > "$OUT/gpu_tests.log"
    "$PY" - "$OUT"/gpu_tests.shard*.log <<'PYEOF' | tee -a "$OUT/gpu_tests.log"
import re, sys
tot = {}
for f in sys.argv[1:]:
    last = [l for l in open(f, errors="replace") if re.search(r"\d+ (passed|failed|error|skipped)", l)]
    for n, k in re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)", last[-1] if last else ""):
        tot[k] = tot.get(k, 0) + int(n)
    if not last:
        print(f"{f}: no summary line (cut short?)")
print("all shards: " + ", ".join(f"{v} {k}" for k, v in tot.items()))
PYEOF
  else
    # shellcheck disable=SC2086  # TESTS is a list of paths
    timeout -k 10 "${TEST_TIMEOUT:-1800}" "$PY" -m pytest $TESTS ${PYTEST_K:+-k "$PYTEST_K"} -q -rs -p no:cacheprovider 2>&1 \
      | tee "$OUT/gpu_tests.log"
    test_rc=${PIPESTATUS[0]}
  fi
fi

bench_rc=skipped
if [ -z "${SKIP_BENCH:-}" ]; then
  echo "=== benchmark ==="
  timeout -k 10 "${BENCH_TIMEOUT:-1800}" "$PY" benchmarks/bench.py "$@" 2>&1 | tee "$OUT/bench.log"
  bench_rc=${PIPESTATUS[0]}
fi

fuzz_rc=skipped
if [ -n "${FUZZ:-}" ]; then  # FUZZ=N: N fuzzed programs on every CUDA path (~6 min for 10,000 on an H200)
  echo "=== fuzz: $FUZZ programs, seed ${FUZZ_SEED:-1} ==="
  timeout -k 10 "${FUZZ_TIMEOUT:-600}" "$PY" -m tilecraft.testing.fuzz --count "$FUZZ" --seed "${FUZZ_SEED:-1}" \
    --target cuda --jobs "$(nproc)" --no-shrink --max-failures 200 --table "$OUT/fuzz_table.md" > "$OUT/fuzz.log" 2>&1
  fuzz_rc=$?
fi

compat_rc=skipped
if [ -n "${COMPAT:-}" ]; then  # COMPAT=1: TileLang's corpus (copy ../shared/tilelang-examples to compat_corpus/ first)
  echo "=== TileLang corpus ==="
  PYTHON=$(command -v "$PY") JOBS="${COMPAT_JOBS:-8}" EX_TIMEOUT="${EX_TIMEOUT:-150}" RESULTS_DIR="$OUT" LOGDIR="$OUT/compat_logs" \
    timeout -k 10 "${COMPAT_TIMEOUT:-400}" scripts/compat_check.sh "${COMPAT_CORPUS:-compat_corpus}" > "$OUT/compat.log" 2>&1
  compat_rc=$?
  if ! ls "$OUT"/*_compat_*.md >/dev/null 2>&1; then  # cut short: the table of the programs that finished
    "$PY" scripts/compat_table.py "$OUT"/compat_logs/examples_* --out "$OUT/compat_partial.md" --title "corpus (cut short)" >/dev/null 2>&1
  fi
  tar czf "$OUT/compat_logs.tgz" -C "$OUT" compat_logs && rm -rf "$OUT/compat_logs"  # one file comes back, not 82 folders
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
if [ "$fuzz_rc" != skipped ]; then
  echo "fuzz: exit $fuzz_rc"; tail -n 1 "$OUT/fuzz.log"
fi
if [ "$compat_rc" != skipped ]; then
  echo "corpus: exit $compat_rc"; grep -h " pass (" "$OUT"/*compat*.md 2>/dev/null
fi
[ "$test_rc" = 0 ] || [ "$test_rc" = skipped ] || exit 1
[ "$bench_rc" = 0 ] || [ "$bench_rc" = skipped ] || exit 1
exit 0
