#!/usr/bin/env bash
# The sanitizer tier: compute-sanitizer's memcheck, racecheck, synccheck and initcheck over the
# sanitizer set (tests/gpu/test_sanitizer_set_gpu.py: one small launch of a representative kernel
# per lowering path, and 64 of the GPU tier's fuzzed programs on every CUDA variant), then one
# table (last) with the errors / hazards each tool reported per kernel.  Runs from this checkout
# through PYTHONPATH; installs nothing.  Budget on an H200: about 3-5 minutes in all (estimated,
# not yet measured).
#
# Steps: (1) the selection once without a sanitizer (the fuzzed programs aside): it must pass,
# and it fills the kernel cache so the sanitized runs do not compile again; (2) the four tools at
# once (PARALLEL=0: one after another), each under TOOL_TIMEOUT seconds (default 230: with the
# warm-up, about 5 minutes at most).  Logs under $OUT/sanitize (default ./gpu_out/sanitize): <tool>.log (the sanitizer's report), <tool>.pytest.txt (the tests' output), kernels_<tool>.txt
# (every kernel the tests loaded), warm.pytest.txt, table.md.
#
#   scripts/sanitize.sh                                  # every tool over the sanitizer set
#   scripts/sanitize.sh tests/gpu/test_kernels_gpu.py    # arguments replace the pytest selection
#   TOOLS="memcheck synccheck" scripts/sanitize.sh       # a subset of the tools
#   TILECRAFT_SANITIZE_FUZZ=16 scripts/sanitize.sh       # fewer fuzzed programs (default 64)
#   PARALLEL=0 TOOL_TIMEOUT=1200 scripts/sanitize.sh     # one tool at a time, seconds per tool
#
# Noise filtered: driver API probe errors from cuda-bindings (expected cuGetProcAddress misses:
# --report-api-errors no), torch's own attention kernels (--kernel-name-exclude kns=fmha), and child
# processes (g++ / nvcc are not checked: --target-processes application-only).  Exit status 1 when
# any tool reported an error or hazard, or a test run failed.
set -uo pipefail

cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
OUT="${OUT:-$PWD/gpu_out}"
LOGS="$OUT/sanitize"
PY="${PY:-python3}"
SAN="${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}"
TOOLS="${TOOLS:-memcheck racecheck synccheck initcheck}"
TOOL_TIMEOUT="${TOOL_TIMEOUT:-230}"
PARALLEL="${PARALLEL:-1}"
mkdir -p "$LOGS"
if [ ! -x "$SAN" ]; then
  echo "compute-sanitizer not found at $SAN (set COMPUTE_SANITIZER)"; exit 2
fi
# the warm-up leaves out the fuzzed programs (built afresh in every run: nothing to warm)
if [ $# -gt 0 ]; then SELECTION=("$@"); WARM=("$@"); else
  SELECTION=(tests/gpu/test_sanitizer_set_gpu.py); WARM=(tests/gpu/test_sanitizer_set_gpu.py -k "not fuzzed"); fi
T0=$(date +%s)

echo "=== warm-up (no sanitizer): ${WARM[*]} ==="
"$PY" -m pytest -q -p no:cacheprovider "${WARM[@]}" > "$LOGS/warm.pytest.txt" 2>&1
warm=$?
echo "warm-up: exit $warm in $(( $(date +%s) - T0 )) s ($(tail -n 1 "$LOGS/warm.pytest.txt"))"

run_tool() {
  local tool=$1 extra=() start rc
  case "$tool" in
    memcheck) extra=(--leak-check no) ;;
    racecheck) extra=(--racecheck-report hazard) ;;
  esac
  start=$(date +%s)
  TILECRAFT_SANITIZE_KERNELS="$LOGS/kernels_$tool.txt" timeout -k 10 "$TOOL_TIMEOUT" \
    "$SAN" --tool "$tool" --report-api-errors no --kernel-name-exclude kns=fmha --print-limit 200 \
    --target-processes application-only --error-exitcode 86 --log-file "$LOGS/$tool.log" "${extra[@]}" \
    "$PY" -m pytest -q -p no:cacheprovider -p sanitize_plugin "${SELECTION[@]}" > "$LOGS/$tool.pytest.txt" 2>&1
  rc=$?
  echo "$rc" > "$LOGS/$tool.rc"
  echo "$tool: tests exit $rc in $(( $(date +%s) - start )) s ($(tail -n 1 "$LOGS/$tool.pytest.txt"))"
}

echo "=== $TOOLS ($([ "$PARALLEL" = 1 ] && echo "at once" || echo "one at a time"), ${TOOL_TIMEOUT} s each) ==="
for tool in $TOOLS; do
  if [ "$PARALLEL" = 1 ]; then run_tool "$tool" & else run_tool "$tool"; fi
done
wait

status=0
[ "$warm" -ne 0 ] && status=1
for tool in $TOOLS; do [ "$(cat "$LOGS/$tool.rc" 2>/dev/null)" != 0 ] && status=1; done
"$PY" scripts/sanitize_report.py "$LOGS" $TOOLS | tee "$LOGS/table.md"
[ "${PIPESTATUS[0]}" -ne 0 ] && status=1
echo "sanitizer tier: $(( $(date +%s) - T0 )) s in all; warm-up exit $warm"
exit $status
