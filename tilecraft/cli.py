"""The `tilecraft` command line: `tilecraft demo`, `tilecraft doctor`, `tilecraft cache info|clear`."""
from __future__ import annotations

import argparse
import sys


def _demo(args) -> int:
    from .demo import run
    rows = run(args.target)
    return 0 if all(r[2] == "PASS" for r in rows) else 1


def _cache(args) -> int:
    from .compiler.cache import cache_info, clear_cache
    if args.action == "clear":
        clear_cache()
        print("cache cleared")
    else:
        for k, v in cache_info().items():
            print(f"{k:<10} {v}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tilecraft", description="tilecraft: tile-level GPU kernels in Python")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="compile, check and time the reference kernels on the default target")
    p.add_argument("--target", default="auto")
    p.set_defaults(fn=_demo)
    p = sub.add_parser("cache", help="show or clear the compiled-kernel cache")
    p.add_argument("action", choices=["info", "clear"])
    p.set_defaults(fn=_cache)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
