#!/bin/bash
# scripts/compat_probe.py over the whole corpus (no GPU needed): one line per program,
#   REACHED (every kernel before the first launch compiled for sm_90a) | FAIL <error> | TIMEOUT
#   usage: scripts/compat_probe_all.sh [CORPUS_DIR] [PATTERN] > table.txt      EX_TIMEOUT=120
repo=$(cd "$(dirname "$0")/.." && pwd)
corpus=${1:-${COMPAT_CORPUS:-$repo/../shared/tilelang-examples}}
py=${PYTHON:-$repo/.venv/bin/python}
cd "$corpus"
for f in $(grep -rlE '__main__|def main' --include='*.py' examples | grep -v '/test_' | sort); do
  [ -n "${2:-}" ] && [[ $f != *$2* ]] && continue
  grep -qE '^(def main|if __name__)' "$f" || continue
  t0=$(date +%s)
  out=$(cd "$(dirname "$f")" && PYTHONPATH="$repo" timeout "${EX_TIMEOUT:-120}" "$py" "$repo/scripts/compat_probe.py" "$(basename "$f")" 2>&1)
  rc=$?; dt=$(( $(date +%s) - t0 ))
  if echo "$out" | grep -q "^COMPAT-PROBE: reached"; then res="REACHED $(echo "$out" | grep -o '[0-9]* kernel(s)')"
  elif echo "$out" | grep -q "^COMPAT-PROBE: finished"; then res="FINISHED"
  elif [ $rc -eq 124 ]; then res="TIMEOUT"
  else res="FAIL $(echo "$out" | grep -E '^[A-Za-z_.]+(Error|Exception)' | tail -1 | cut -c1-200)"; fi
  echo "$f|$dt|$res"
done
