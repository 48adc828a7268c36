#!/bin/bash
# Run TileLang's example corpus unchanged on tilecraft and write the table (example, pass/fail,
# seconds, first error, class) under benchmarks/results/.
#   usage: scripts/compat_check.sh [CORPUS_DIR] [PATTERN]
#   CORPUS_DIR (or $COMPAT_CORPUS): the folder holding run.sh and examples/; default: compat_corpus/
#     in the repository (git-ignored; copy ../shared/tilelang-examples there for a GPU machine),
#     else ../shared/tilelang-examples beside the repository.
#   PATTERN: only examples whose path contains it.   EX_TIMEOUT=300 seconds per example.
#   JOBS=N: run N example programs at once (pass/fail only: concurrent programs share the GPU); one
#   that ran out of GPU memory beside the others runs again alone afterwards.
#   TAG=name: the result file is <RESULTS_DIR>/<date>_compat_<TAG>.md (default: the GPU name or cpu);
#   RESULTS_DIR (default benchmarks/results); LOGDIR (default: a fresh temp dir) keeps the logs.
#   A run in parts (one PATTERN each): merge with scripts/compat_table.py LOGDIR1 LOGDIR2 ... --out FILE.md
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
corpus=${1:-${COMPAT_CORPUS:-}}
if [ -z "$corpus" ]; then
  for c in "$repo/compat_corpus" "$repo/../shared/tilelang-examples" "/work/shared/tilelang-examples"; do
    [ -x "$c/run.sh" ] && corpus=$c && break
  done
fi
if [ -z "$corpus" ] || [ ! -x "$corpus/run.sh" ]; then
  echo "compat_check: no corpus (a folder with run.sh and examples/); give it as the first argument" >&2
  exit 2
fi
py=${PYTHON:-$repo/.venv/bin/python}
[ -x "$py" ] || py=python3
py=$(command -v "$py"); case $py in /*) ;; *) py=$PWD/$py ;; esac  # absolute: the python3 wrapper below must not find itself
gpu=$("$py" -c 'import torch; print(torch.cuda.get_device_name().split()[-1].lower() if torch.cuda.is_available() else "cpu")' 2>/dev/null || echo cpu)
tag=${TAG:-$gpu}
logs=${LOGDIR:-$(mktemp -d -t compat_XXXX)}
mkdir -p "${RESULTS_DIR:-$repo/benchmarks/results}"
out="${RESULTS_DIR:-$repo/benchmarks/results}/$(date -u +%Y-%m-%d)_compat_${tag}.md"
# run.sh calls `python3`: make it the project's interpreter (a venv's own bin/ folder, so that its
# site-packages are seen), with tilecraft importable
bin=$(dirname "$py")
if [ ! -x "$bin/python3" ]; then bin=$(mktemp -d); printf '#!/bin/sh\nexec "%s" "$@"\n' "$py" > "$bin/python3"; chmod +x "$bin/python3"; fi
export PATH="$bin:$PATH" PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" IMPL=tilecraft EX_TIMEOUT=${EX_TIMEOUT:-300}
jobs=${JOBS:-1}
if [ "$jobs" -le 1 ]; then
  LOGDIR="$logs" "$corpus/run.sh" "${2:-}"
  dirs=("$logs")
else
  # one run.sh per example program, JOBS at a time (the programs share the GPU: their timings are
  # not benchmark numbers, only pass/fail); each keeps its own log dir, merged below
  files=$(cd "$corpus" && grep -rlE '__main__|def main' --include='*.py' examples | grep -v '/test_' | sort)
  dirs=()
  for f in $files; do
    [ -n "${2:-}" ] && [[ $f != *$2* ]] && continue
    dirs+=("$logs/$(echo "$f" | tr '/' '_')")
    echo "$f"
  done | xargs -P "$jobs" -I{} sh -c 'LOGDIR="$1/$(echo "$2" | tr / _)" "$0/run.sh" "$2"' "$corpus" "$logs" {}
  # a program that ran out of GPU memory beside the others runs again alone (the big attention
  # benchmarks each allocate tens of GiB; one at a time they fit)
  for d in "$logs"/examples_*; do
    if grep -q '"ok": false' "$d/results.jsonl" 2>/dev/null && grep -qE 'OutOfMemoryError|CUDA out of memory|CUDA error: out of memory' "$d"/*.log; then
      f=$(sed -n 's/.*"example": "\([^"]*\)".*/\1/p' "$d/results.jsonl")
      echo "again, alone (out of GPU memory beside the others): $f"
      rm -rf "$d"; LOGDIR="$d" "$corpus/run.sh" "$f"
    fi
  done
  dirs=("$logs"/examples_*)
fi
# the commit, "-dirty" when the tracked files differ from it (a device machine's copy of a working tree can
# carry an older .git); COMMIT=... names it outright
rev=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)
"$py" "$repo/scripts/compat_table.py" "${dirs[@]}" --out "$out" \
  --title "TileLang v0.1.8 example corpus on tilecraft ($tag, $(date -u +%Y-%m-%d), ${COMMIT:-$rev})" > /dev/null
echo "table: $out (logs: $logs)"
