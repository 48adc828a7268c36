"""Turn a corpus run (run.sh's LOGDIR: results.jsonl and one log per program) into a markdown table:
example, pass/fail, seconds, the error that ended the program, and its class.

    python scripts/compat_table.py LOGDIR [LOGDIR...] [--title TEXT] [--out FILE.md] [--before LOGDIR...]

The error shown is the exception line of the log's last traceback (the one that stopped the
program), not run.sh's last line containing "Error".  Classes (what a failure means):
  needs-gpu     the program reached a CUDA tensor or launch on a machine without a GPU
  missing-api   a tilelang name / module / T.* construct tilecraft does not provide
  unsupported   a construct tilecraft refuses by name (manual Hopper constructs, sparse GEMMs, ...)
  compile       a tilecraft compile error at the user's line (layout inference, checks, ...)
  wrong-answer  the program's own check against torch failed
  needs-package a third-party package that is not installed
  timeout / crash / other
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re

_EXC = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)?): ?(.*)$")


def first_error(log_text: str) -> str:
    """The exception line that ended the program ('' if none)."""
    lines = log_text.splitlines()
    last_tb = max((i for i, l in enumerate(lines) if l.startswith("Traceback (most recent call last)")), default=None)
    if last_tb is None:
        cand = [l for l in lines if _EXC.match(l.strip()) and ("Error" in l or "Exception" in l)]
        return cand[-1].strip() if cand else ""
    for line in lines[last_tb + 1:]:
        if line and not line.startswith((" ", "\t")) and _EXC.match(line):
            return line.strip()
    return lines[-1].strip() if lines else ""


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
        err = "" if r["ok"] else first_error(text) or r.get("last_error", "")
        if r["rc"] == 124:
            err = r.get("last_error") or "timeout"
        err = err.replace("|", "\\|").replace(os.path.expanduser("~"), "~")[:200]
        out[r["example"].removeprefix("examples/")] = (r["ok"], r["seconds"], classify(r["ok"], r["rc"], err), err)
    return out


def table(logdir: str, title: str, before: str | None = None) -> str:
    now = results(logdir)
    old = results(before) if before else {}
    counts = collections.Counter(c for _, _, c, _ in now.values())
    head = [f"# {title}", "", f"{counts['pass']} of {len(now)} pass ({', '.join(f'{k}: {v}' for k, v in counts.most_common())})."]
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
    return "\n".join(head + out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logdir", nargs="+", help="run.sh LOGDIR(s); several are merged (a corpus run in parts)")
    ap.add_argument("--title", default="TileLang example corpus on tilecraft")
    ap.add_argument("--out")
    ap.add_argument("--before", nargs="+", help="the LOGDIR of an earlier run: its class and error become two more columns")
    args = ap.parse_args()
    text = table(args.logdir, args.title, args.before)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
