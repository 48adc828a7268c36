#!/usr/bin/env python3
"""Two `benchmarks/bench.py` runs side by side: every row the two share (kernel, size, note), the
same-run ratio ours/ref in each, and whether the new one is slower than the old by more than the
run-to-run spread (its best round below the old run's worst round).  Markdown on stdout.

    scripts/bench_compare.py OLD.json NEW.json [--out FILE.md]
"""
import argparse
import json


def rows(path):
    d = json.load(open(path))
    out = {}
    for r in d["rows"]:
        if r.get("speed") is None:
            continue
        # the note's verdicts (SLOWER: ..., best) change from run to run; the rest names the variant
        note = "; ".join(p.strip() for p in (r.get("note") or "").split(";")
                         if p.strip() and not p.strip().startswith(("SLOWER", "best", "FASTER")))
        key = (r["kernel"], r["size"], note)
        out[key] = r
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--out")
    a = ap.parse_args()
    old, new = rows(a.old), rows(a.new)
    shared = [k for k in new if k in old]
    lines = [f"| kernel | size | old ratio (range) | new ratio (range) | new/old | verdict |", "|---|---|---|---|---|---|"]
    below = []
    for k in shared:
        o, n = old[k], new[k]
        olo, ohi = o.get("speed_range") or (o["speed"], o["speed"])
        nlo, nhi = n.get("speed_range") or (n["speed"], n["speed"])
        verdict = "slower beyond the spread" if nhi < olo else ("faster beyond the spread" if nlo > ohi else "within")
        if nhi < olo:
            below.append(k)
        lines.append(f"| {k[0]} | {k[1]} | {o['speed']:.2f} ({olo:.2f}-{ohi:.2f}) | {n['speed']:.2f} ({nlo:.2f}-{nhi:.2f}) "
                     f"| {n['speed'] / o['speed']:.2f} | {verdict} |")
    head = (f"{len(shared)} rows in both ({len(new) - len(shared)} only in the new run, {len(old) - len(shared)} only in "
            f"the old); {len(below)} slower than the old run beyond the run-to-run spread (the new run's best round "
            f"below the old run's worst)")
    text = head + "\n\n" + "\n".join(lines) + "\n"
    if a.out:
        open(a.out, "w").write(text)
    print(head)
    for k in below:
        print("  slower:", " | ".join(k), f"{old[k]['speed']:.2f} -> {new[k]['speed']:.2f}")


if __name__ == "__main__":
    main()
