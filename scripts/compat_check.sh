#!/bin/bash
# Run one of TileLang's example corpora unchanged on tilecraft, on the GPU or in CPU mode, and write the
# table (program, pass/fail, seconds, class, the program's first real error) under benchmarks/results/.
#   usage: scripts/compat_check.sh [--cpu] [--also-compile ARCH] [CORPUS_DIR|head|v0.1.8] [PATTERN]
#   CORPUS_DIR (or $COMPAT_CORPUS): the folder holding run.sh and examples/ (exit 0 = pass); "head" is
#     ../shared/tilelang-examples-head (TileLang's current examples), "v0.1.8" ../shared/tilelang-examples;
#     default: compat_corpus/ in the repository (git-ignored; a copy for a GPU machine), else v0.1.8.
#   --cpu (or CPU=1): CPU mode (TILECRAFT_RUN_ON_CPU=1, tilecraft/compat/cpu_mode.py): programs written
#     for CUDA run on the CPU target; Triton reference kernels run in Triton's interpreter.
#   --also-compile ARCH (or ALSO_COMPILE=sm_90a; implies --cpu): every kernel is also compiled for ARCH.
#   PATTERN: only programs whose path contains it.   EX_TIMEOUT=300 seconds per program.
#   JOBS=N: run N programs at once (default: 1 on a GPU, the core count in CPU mode; the timings are then
#   not benchmark numbers); one that ran out of memory beside the others (on a GPU: CUDA's out-of-memory
#   error; in CPU mode: killed by signal 9) runs again alone.
#   NICE=N: run the programs under `nice -n N`.
#   TAG=name: the result file is <RESULTS_DIR>/<date>_compat_<TAG>.md (default: <corpus>_<GPU name or cpu>);
#   RESULTS_DIR (default benchmarks/results); LOGDIR (default: a fresh temp dir) keeps the logs;
#   COMMIT=... names the commit in the title (default: git describe --always --dirty).
#   A run in parts (one PATTERN each): merge with scripts/compat_table.py LOGDIR1 LOGDIR2 ... --out FILE.md
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
cpu=${CPU:-}; also=${ALSO_COMPILE:-}; pos=()
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) cpu=1 ;;
    --also-compile) also=$2; shift ;;
    --also-compile=*) also=${1#*=} ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) pos+=("$1") ;;
  esac
  shift
done
[ -n "$also" ] && cpu=1
[ "$cpu" = 0 ] && cpu=
corpus=${pos[0]:-${COMPAT_CORPUS:-}}
pattern=${pos[1]:-}
case $corpus in
  head) corpus=$repo/../shared/tilelang-examples-head ;;
  v0.1.8) corpus=$repo/../shared/tilelang-examples ;;
esac
if [ -z "$corpus" ]; then
  for c in "$repo/compat_corpus" "$repo/../shared/tilelang-examples" "/work/shared/tilelang-examples"; do
    [ -x "$c/run.sh" ] && corpus=$c && break
  done
fi
if [ -z "$corpus" ] || [ ! -x "$corpus/run.sh" ]; then
  echo "compat_check: no corpus (a folder with run.sh and examples/); give it as the first argument" >&2
  exit 2
fi
corpus=$(cd "$corpus" && pwd)
# the corpus's name, from its run.sh's own description
if grep -q 'v0\.1\.8' "$corpus/run.sh"; then cname=v0.1.8; clabel="TileLang v0.1.8 example corpus"
elif c=$(head -n 6 "$corpus/run.sh" | tr -d '#' | tr -s ' \n' '  ' | grep -oE 'main branch at commit [0-9a-f]+'); then
  cname=head; clabel="TileLang's current example corpus (${c#main branch at })"
else cname=$(basename "$corpus"); clabel="example corpus $cname"; fi
py=${PYTHON:-$repo/.venv/bin/python}
[ -x "$py" ] || py=python3
py=$(command -v "$py"); case $py in /*) ;; *) py=$PWD/$py ;; esac  # absolute: the python3 wrapper below must not find itself
if [ -n "$cpu" ]; then
  export TILECRAFT_RUN_ON_CPU=1 TRITON_INTERPRET=${TRITON_INTERPRET:-1}
  [ -n "$also" ] && export TILECRAFT_ALSO_COMPILE=$also
  machine=cpu; mode="CPU mode${also:+, also compiled for $also}"
  jobs=${JOBS:-$(nproc)}
else
  unset TILECRAFT_RUN_ON_CPU TILECRAFT_ALSO_COMPILE
  machine=$("$py" -c 'import torch; print(torch.cuda.get_device_name().split()[-1].lower() if torch.cuda.is_available() else "cpu")' 2>/dev/null || echo cpu)
  mode=$([ "$machine" = cpu ] && echo "CPU target, no CPU mode" || echo "GPU: $machine")
  jobs=${JOBS:-1}
fi
tag=${TAG:-${cname}_${machine}${also:+_also_$also}}
logs=${LOGDIR:-$(mktemp -d -t compat_XXXX)}
results=${RESULTS_DIR:-$repo/benchmarks/results}
mkdir -p "$results" "$logs"
out="$results/$(date -u +%Y-%m-%d)_compat_${tag}.md"
# run.sh calls `python3`: make it the project's interpreter (a venv's own bin/ folder, so that its
# site-packages are seen), with tilecraft importable; NICE=N lowers its priority; in CPU mode a program
# runs as `tilecraft run --cpu prog.py`, so CPU mode is on even in one that never imports tilelang
# (a Triton-only reference program)
bin=$(dirname "$py")
if [ -n "${NICE:-}" ] || [ -n "$cpu" ] || [ ! -x "$bin/python3" ]; then
  bin=$(mktemp -d); n=${NICE:+nice -n $NICE}
  { echo '#!/bin/sh'
    [ -n "$cpu" ] && echo "case \"\$1\" in *.py) exec $n \"$py\" -m tilecraft run --cpu \"\$@\" ;; esac"
    echo "exec $n \"$py\" \"\$@\""; } > "$bin/python3"
  chmod +x "$bin/python3"
fi
export PATH="$bin:$PATH" PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" IMPL=tilecraft EX_TIMEOUT=${EX_TIMEOUT:-300}
echo "compat_check: $clabel ($corpus), $mode, $jobs job(s), EX_TIMEOUT=$EX_TIMEOUT s"
if [ "$jobs" -le 1 ]; then
  LOGDIR="$logs" "$corpus/run.sh" "$pattern"
  dirs=("$logs")
else
  # one run.sh per program, JOBS at a time (each keeps its own log dir, merged below); the list is run.sh's own
  files=$(cd "$corpus" && grep -rlE '__main__|def main' --include='*.py' examples | grep -v '/test_' | sort)
  for f in $files; do
    [ -n "$pattern" ] && [[ $f != *$pattern* ]] && continue
    grep -qE '^(def main|if __name__)' "$corpus/$f" || continue
    echo "$f"
  done | xargs -P "$jobs" -I{} sh -c 'LOGDIR="$1/$(echo "$2" | tr / _)" "$0/run.sh" "$2"' "$corpus" "$logs" {}
  if [ -z "$cpu" ] && [ "$machine" != cpu ]; then
    # a program that ran out of GPU memory beside the others runs again alone (the big attention
    # benchmarks each allocate tens of GiB; one at a time they fit)
    for d in "$logs"/examples_*; do
      if grep -q '"ok": false' "$d/results.jsonl" 2>/dev/null && grep -qE 'OutOfMemoryError|CUDA out of memory|CUDA error: out of memory' "$d"/*.log; then
        f=$(sed -n 's/.*"example": "\([^"]*\)".*/\1/p' "$d/results.jsonl")
        echo "again, alone (out of GPU memory beside the others): $f"
        rm -rf "$d"; LOGDIR="$d" "$corpus/run.sh" "$f"
      fi
    done
  else
    # in CPU mode a program killed by the host (signal 9, rc 137: the out-of-memory killer) beside the
    # others runs again alone: two large programs at once can need more memory than one
    for d in "$logs"/examples_*; do
      if grep -q '"rc": 137' "$d/results.jsonl" 2>/dev/null; then
        f=$(sed -n 's/.*"example": "\([^"]*\)".*/\1/p' "$d/results.jsonl")
        echo "again, alone (killed beside the others): $f"
        rm -rf "$d"; LOGDIR="$d" "$corpus/run.sh" "$f"
      fi
    done
  fi
  dirs=("$logs"/examples_*)
fi
# the commit, "-dirty" when the tracked files differ from it (a device machine's copy of a working tree can
# carry an older .git); COMMIT=... names it outright
rev=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)
# a whole-corpus run lists the programs it never reached (a run stopped early) as not run
whole=(); [ -z "$pattern" ] && whole=(--corpus "$corpus")
"$py" "$repo/scripts/compat_table.py" "${dirs[@]}" --out "$out" "${whole[@]}" \
  --title "$clabel on tilecraft ${COMMIT:-$rev}: $mode ($(date -u +%Y-%m-%d), EX_TIMEOUT=$EX_TIMEOUT s, $jobs job(s))" > /dev/null
echo "table: $out (logs: $logs)"
