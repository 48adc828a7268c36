"""The sanitizer tier's table: per kernel, the errors / hazards each compute-sanitizer tool
reported (scripts/sanitize.sh runs the tools and then this).

    python scripts/sanitize_report.py LOG_DIR memcheck racecheck synccheck initcheck

Reads LOG_DIR/<tool>.log (the sanitizer's report), kernels_<tool>.txt (kernels the tests
loaded) and <tool>.rc (the test run's exit status).  A finding is a report record (a line such
as "Invalid __global__ read", "Race reported", "Barrier error", "Uninitialized __global__ memory
read"); it is charged to the first "at <function>+0x..." frame of the record, mapped to the
loaded kernel whose name that frame starts with.  Exit status 1 on any finding or failed run.
"""
from __future__ import annotations

import os
import re
import sys
from collections import Counter, defaultdict

RECORD = re.compile(r"^=========\s+(Invalid|Uninitialized|Race reported|Error|Warning|Barrier|Program hit|"
                    r"Misaligned|Out-of-range|Cuda API error|Malloc|Device-side|Hardware exception)", re.I)
FRAME = re.compile(r"^=========\s+(?:at|and .* at)\s+(?:0x[0-9a-f]+ in )?([A-Za-z_][\w:<>, *&().\[\]]*?)\+0x", re.I)
AT_ANY = re.compile(r"\bat\s+(?:0x[0-9a-f]+ in )?([A-Za-z_][\w:<>, *&().\[\]]*?)\+0x")
SUMMARY = re.compile(r"(ERROR SUMMARY|RACECHECK SUMMARY):\s*(\d+)")


def findings(log_text: str) -> Counter:
    """function name -> number of report records charged to it."""
    out: Counter = Counter()
    pending = None
    for line in log_text.splitlines():
        if RECORD.match(line) and "SUMMARY" not in line:
            if pending is not None:
                out[pending] += 1
            pending = "(unattributed)"
            m = AT_ANY.search(line)
            if m:
                out[m.group(1)] += 1
                pending = None
            continue
        if pending is not None:
            m = FRAME.match(line) or AT_ANY.search(line)
            if m:
                out[m.group(1)] += 1
                pending = None
    if pending is not None:
        out[pending] += 1
    return out


def summary_count(log_text: str) -> int | None:
    counts = [int(m.group(2)) for m in SUMMARY.finditer(log_text)]
    return sum(counts) if counts else None


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def kernel_of(function: str, kernels: set) -> str:
    base = function.split("(")[0].strip()
    for k in sorted(kernels, key=len, reverse=True):
        if base == k or base.startswith(k):
            return k
    return base


def main(argv) -> int:
    logdir, tools = argv[0], argv[1:] or ["memcheck", "racecheck", "synccheck", "initcheck"]
    table: dict = defaultdict(dict)
    loaded_all: set = set()
    footer, bad = [], False
    for tool in tools:
        loaded = set(_read(os.path.join(logdir, f"kernels_{tool}.txt")).split())
        loaded_all |= loaded
        text = _read(os.path.join(logdir, f"{tool}.log"))
        for k in loaded:
            table[k].setdefault(tool, 0)
        for fn, n in findings(text).items():
            k = kernel_of(fn, loaded)
            table[k][tool] = table[k].get(tool, 0) + n
            bad = True
        rc = _read(os.path.join(logdir, f"{tool}.rc")).strip() or "?"
        total = summary_count(text)
        if rc != "0":
            bad = True
        footer.append(f"- {tool}: tests exit {rc}; sanitizer summary: "
                      f"{'no summary in the log (did it run?)' if total is None else f'{total} error(s)/hazard(s)'}")
        if total is None or total:
            bad = True
    lines = ["| kernel | " + " | ".join(tools) + " |", "| --- |" + " --- |" * len(tools)]
    for k in sorted(table, key=lambda k: (-sum(table[k].values()), k)):
        lines.append(f"| {k} | " + " | ".join(str(table[k].get(t, "-")) for t in tools) + " |")
    print("\n".join(lines))
    print(f"\n{len(loaded_all)} kernels loaded; '-': not loaded under that tool; a number: the findings charged to it")
    print("\n".join(footer))
    print("RESULT:", "FINDINGS OR FAILED RUNS" if bad else "clean: zero errors and hazards")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
