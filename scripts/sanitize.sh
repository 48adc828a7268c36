#!/usr/bin/env bash
# The sanitizer tier: compute-sanitizer's memcheck, racecheck, synccheck and initcheck over the
# GPU tier's kernels, then one table (last) with the errors / hazards each tool reported per kernel.
# Runs from this checkout through PYTHONPATH; installs nothing.  Logs under $OUT/sanitize (default
# ./gpu_out/sanitize): <tool>.log (the sanitizer's report), <tool>.pytest.txt (the tests' output),
# kernels_<tool>.txt (every kernel the tests loaded), table.md.
#
#   scripts/sanitize.sh                                  # every tool over the GPU tier (-m "gpu and not timing" tests,
#                                                        # without the 2,000-program fuzz run: too slow under racecheck)
#   scripts/sanitize.sh tests/gpu/test_kernels_gpu.py    # arguments replace the pytest selection
#   TOOLS="memcheck synccheck" scripts/sanitize.sh       # a subset of the tools
#   TOOL_TIMEOUT=1200 scripts/sanitize.sh                # seconds per tool (racecheck is the slow one)
#
# Driver API probe noise from cuda-bindings (expected cuGetProcAddress misses) is filtered with
# --report-api-errors no; torch's own attention kernels (fmha) are excluded.  Exit status 1 when any
# tool reported an error or hazard, or its test run failed.
set -uo pipefail

cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
OUT="${OUT:-$PWD/gpu_out}"
LOGS="$OUT/sanitize"
PY="${PY:-python3}"
SAN="${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}"
TOOLS="${TOOLS:-memcheck racecheck synccheck initcheck}"
TOOL_TIMEOUT="${TOOL_TIMEOUT:-1800}"
mkdir -p "$LOGS"
if [ ! -x "$SAN" ]; then
  echo "compute-sanitizer not found at $SAN (set COMPUTE_SANITIZER)"; exit 2
fi
if [ $# -gt 0 ]; then SELECTION=("$@"); else SELECTION=(-m "gpu and not timing" --ignore=tests/gpu/test_fuzz_gpu.py tests); fi

status=0
for tool in $TOOLS; do
  extra=()
  case "$tool" in
    memcheck) extra=(--leak-check no) ;;
    racecheck) extra=(--racecheck-report hazard) ;;
  esac
  echo "=== $tool: ${SELECTION[*]} ==="
  start=$(date +%s)
  TILECRAFT_SANITIZE_KERNELS="$LOGS/kernels_$tool.txt" timeout "$TOOL_TIMEOUT" \
    "$SAN" --tool "$tool" --report-api-errors no --kernel-name-exclude kns=fmha --print-limit 200 --error-exitcode 86 \
    --log-file "$LOGS/$tool.log" "${extra[@]}" \
    "$PY" -m pytest -q -p no:cacheprovider -p sanitize_plugin "${SELECTION[@]}" > "$LOGS/$tool.pytest.txt" 2>&1
  rc=$?
  echo "$tool: tests exit $rc in $(( $(date +%s) - start )) s ($(tail -n 1 "$LOGS/$tool.pytest.txt"))"
  echo "$rc" > "$LOGS/$tool.rc"
  [ "$rc" -ne 0 ] && status=1
done

"$PY" scripts/sanitize_report.py "$LOGS" $TOOLS | tee "$LOGS/table.md"
[ "${PIPESTATUS[0]}" -ne 0 ] && status=1
exit $status
