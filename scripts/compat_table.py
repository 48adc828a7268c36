"""Turn a corpus run (run.sh's LOGDIR: results.jsonl and one log per program) into a markdown table:
example, pass/fail, seconds, the error that ended the program, and its class.

    python scripts/compat_table.py LOGDIR [LOGDIR...] [--title TEXT] [--out FILE.md] [--before LOGDIR...]

The error shown is the program's first real error line (`first_error`: the exception that stopped
it), not run.sh's last line containing "Error".  Classes (what a failure means):
  needs-gpu     the program reached a CUDA tensor or launch on a machine without a GPU
  missing-api   a tilelang name / module / T.* construct tilecraft does not provide
  unsupported   a construct tilecraft refuses by name (manual Hopper constructs, sparse GEMMs, ...)
  compile       a tilecraft compile error at the user's line (layout inference, checks, ...)
  wrong-answer  the program's own check against torch failed
  needs-package a third-party package that is not installed
  needs-sm100   a construct that needs a Blackwell GPU (tcgen05, TMEM, block-scaled MMA)
  timeout / killed (signal 9: the out-of-memory killer) / crash / other
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re

_EXC = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)?): ?(.*)$")


_DURING = "During handling of the above exception, another exception occurred:"


def _exception_at(lines: list, start: int) -> str:
    """The exception line of the traceback that starts at `start` (its first unindented line)."""
    for line in lines[start + 1:]:
        if line and not line.startswith((" ", "\t")) and _EXC.match(line):
            return line.strip()
    return ""


def first_error(log_text: str, rc: int | None = None) -> str:
    """The program's first real error line ('' if none): the exception that stopped it -- the one
    being handled when the last traceback is a failure *during* its handling (cleanup code failing
    after the real error), else the last traceback's (a wrapper raised `from` its cause says more
    than the cause); pytest's first `E   ` line; a crash's signal; else the first line that reads as
    an error.  Never run.sh's last line containing "error" (often a warning)."""
    lines = log_text.splitlines()
    tbs = [i for i, l in enumerate(lines) if l.startswith("Traceback (most recent call last)")]
    if tbs:
        k = len(tbs) - 1
        while k > 0 and any(l.strip() == _DURING for l in lines[max(tbs[k - 1], tbs[k] - 3):tbs[k]]):
            k -= 1
        found = _exception_at(lines, tbs[k])
        if found:
            return found
    pytest_e = [l[1:].strip() for l in lines if l.startswith("E  ") and _EXC.match(l[1:].strip())]
    if pytest_e:
        return pytest_e[0]
    last = next((l.strip() for l in reversed(lines) if l.strip()), "")
    if rc is not None and (rc < 0 or rc > 128) and rc != 124:
        sig = -rc if rc < 0 else rc - 128
        if sig == 9:  # SIGKILL from outside the program: on these machines, the kernel's OOM killer
            return f"killed (signal 9: usually the out-of-memory killer, the program's own sizes need more memory " \
                   f"than the machine has); last output: {last[:120]}"
        return f"crashed (signal {sig}); last output: {last}"
    cand = [l.strip() for l in lines if _EXC.match(l.strip()) and re.search(r"Error|Exception", l.split(":")[0])]
    if cand:
        return cand[0]
    cand = [l.strip() for l in lines if re.search(r"\b(error|mismatch|failed|FAIL)\b", l, re.I)]
    return cand[0] if cand else last


def classify(ok: bool, rc: int, error: str) -> str:
    if ok:
        return "pass"
    if rc == 124:
        return "timeout"
    e = error
    if re.search(r"Torch not compiled with CUDA|CUDA is not available|no NVIDIA driver|No CUDA GPUs|"
                 r"cudaGetDeviceCount|CUDA driver|needs a CUDA GPU|torch.cuda|device='cuda'|ATen_cuda|CUDA generator|"
                 r"no CUDA device", e):
        return "needs-gpu"
    if re.search(r"sm_100|sm100|Blackwell", e):
        return "needs-sm100"
    if re.search(r"is not supported by tilecraft|not supported by tilecraft yet", e):
        return "unsupported"
    if re.search(r"No module named '(tilelang|tilecraft)|cannot import name .* from '(tilelang|tilecraft)|"
                 r"module '(tilelang|tilecraft)[\w.]*' has no attribute|unknown language construct|"
                 r"has no attribute", e):
        return "missing-api"
    if re.search(r"No module named", e):
        return "needs-package"
    if e.startswith(("tilecraft.errors.", "TilecraftError")):
        return "compile"
    if e.startswith("AssertionError") or "mismatch" in e:
        return "wrong-answer"
    if e.startswith("killed (signal 9"):
        return "killed"
    if rc < 0 or rc > 128:
        return "crash"
    return "other"


def results(logdirs) -> dict:
    """example -> (ok, seconds, class, error) over one or more runs (LOGDIRs; a later one wins)."""
    if not isinstance(logdirs, str):
        out = {}
        for d in logdirs:
            out.update(results(d))
        return out
    logdir, out = logdirs, {}
    for line in open(os.path.join(logdir, "results.jsonl")):
        if not line.strip():
            continue
        r = json.loads(line)
        log = os.path.join(logdir, r["example"].replace("/", "_") + ".log")
        text = open(log, errors="replace").read() if os.path.exists(log) else ""
        err = "" if r["ok"] else first_error(text, r["rc"]) or r.get("last_error", "")
        if r["rc"] == 124:  # with the last thing it printed: progress, or a hang
            last = next((l.strip() for l in reversed(text.splitlines()) if l.strip()), "")
            err = (r.get("last_error") or "timeout") + (f"; last output: {last}" if last else "; no output")
        err = err.replace("|", "\\|").replace(os.path.expanduser("~"), "~")[:200]
        out[r["example"].removeprefix("examples/")] = (r["ok"], r["seconds"], classify(r["ok"], r["rc"], err), err)
    return out


def corpus_programs(corpus: str) -> list:
    """The programs run.sh runs (its own selection: a `def main` or `if __name__` at the top level)."""
    out = []
    for root, _, files in os.walk(os.path.join(corpus, "examples")):
        for f in files:
            path = os.path.join(root, f)
            if not f.endswith(".py") or "/test_" in path:
                continue
            text = open(path, errors="replace").read()
            if re.search(r"^(def main|if __name__)", text, re.M):
                out.append(os.path.relpath(path, os.path.join(corpus, "examples")))
    return sorted(out)


def table(logdir: str, title: str, before: str | None = None, corpus: str | None = None) -> str:
    now = results(logdir)
    missing = [p for p in corpus_programs(corpus) if p not in now] if corpus else []
    old = results(before) if before else {}
    counts = collections.Counter(c for _, _, c, _ in now.values())
    head = [f"# {title}", "", f"{counts['pass']} of {len(now)} pass ({', '.join(f'{k}: {v}' for k, v in counts.most_common())})."]
    if missing:
        head.append(f"Not run (the run was stopped first): {len(missing)} of the corpus's {len(missing) + len(now)} programs, "
                    f"listed last.")
    if old:
        oc = collections.Counter(c for _, _, c, _ in old.values())
        head.append(f"Before: {oc['pass']} of {len(old)} pass ({', '.join(f'{k}: {v}' for k, v in oc.most_common())}).")
    cols = "| example | result | seconds | class | first error |" + (" before: class | before: first error |" if old else "")
    head += ["", cols, "|" + " --- |" * (5 + 2 * bool(old))]
    out = []
    for ex, (ok, sec, cls, err) in now.items():
        row = f"| {ex} | {'PASS' if ok else 'FAIL'} | {sec:.1f} | {'' if ok else cls} | {err} |"
        if old:
            b = old.get(ex)
            row += f" {b[2] if b else '-'} | {b[3] if b else ''} |"
        out.append(row)
    out += [f"| {ex} | NOT RUN | | | |" + (" | |" if old else "") for ex in missing]
    return "\n".join(head + out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logdir", nargs="+", help="run.sh LOGDIR(s); several are merged (a corpus run in parts)")
    ap.add_argument("--title", default="TileLang example corpus on tilecraft")
    ap.add_argument("--out")
    ap.add_argument("--before", nargs="+", help="the LOGDIR of an earlier run: its class and error become two more columns")
    ap.add_argument("--corpus", help="the corpus folder: its programs that have no result are listed as not run")
    args = ap.parse_args()
    text = table(args.logdir, args.title, args.before, args.corpus)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
