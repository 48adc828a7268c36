"""The `tilecraft` command line (also `python -m tilecraft`).

    tilecraft demo [--target auto|cpu|cuda]     compile, check and time the reference kernels
    tilecraft doctor                            check the machine: GPU, driver, NVRTC, nvcc, C++, cache
    tilecraft bench [--quick] [--only G] [--list]   the benchmark suite (source checkout, GPU)
    tilecraft show FILE:FACTORY [ARGS...] [--what ir|lowered|source|host|sass|plan] [--target T]
    tilecraft cache info|clear
    tilecraft tune FILE:FACTORY --shapes 1024,1024,1024 2048,2048,2048 --space block_M=64,128 block_N=64,128
                   [--executor local|ray] [--ray-address ADDR] [--ref FILE:FUNC] [--out DIR]
                                                tune over a config space for many shapes (tuning database, table, plot)
    tilecraft run [--cpu [--also-compile ARCH]] PROG.py [ARGS...]   run a TileLang program unchanged (`import tilelang` -> tilecraft; --cpu: on the CPU target)

`show` imports FILE (a path to a .py file, or a dotted module name such as `tilecraft.kernels`),
takes FACTORY from it (a `@tilelang.jit` factory, an `@autotune`-wrapped one, a plain function
returning a `@T.prim_func`, or a prim_func / compiled kernel itself), calls it with the arguments
(Python literals; `name=value` for keyword arguments) and prints what was asked.  Mistakes (a bad
path, a missing name, an error in the program) print one clean message and exit with status 2.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path

WHATS = ("ir", "lowered", "source", "host", "sass", "plan")
BENCH_GROUPS_HINT = "copy,vector_add,axpby,softmax,rmsnorm,gemm,gemm_bias_gelu,flash_attention,compile,launch"


class CliError(Exception):
    """A user-facing mistake: printed as `tilecraft <cmd>: error: <message>`, exit status 2."""


# ------------------------------------------------------------------------------------ demo
def _demo(args) -> int:
    from .demo import run
    try:
        rows = run(args.target)
    except ValueError as e:  # a bad --target
        raise CliError(str(e)) from None
    return 0 if all(r["check"].startswith("PASS") for r in rows) else 1


# ------------------------------------------------------------------------------------ cache
def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def _cache(args) -> int:
    from .compiler.cache import cache_info, clear_cache
    if args.action == "clear":
        before = cache_info()
        clear_cache()
        print(f"cache cleared: removed {before['entries']} entries ({_human_bytes(before['bytes'])}) "
              f"from {before['path']}")
        return 0
    info = cache_info()
    print(f"{'path':<10} {info['path']}")
    print(f"{'entries':<10} {info['entries']}")
    print(f"{'bytes':<10} {info['bytes']} ({_human_bytes(info['bytes'])})")
    print(f"{'disabled':<10} {info['disabled']}" + ("  (TILECRAFT_DISABLE_CACHE is set)" if info["disabled"] else ""))
    for ns, stats in sorted(info["namespaces"].items()):
        print(f"  {ns:<12} {stats['entries']:>6} entries  {_human_bytes(stats['bytes']):>10}")
    from . import env
    if env.cache_url():
        print(f"{'shared':<10} {env.cache_url()}  (entries signed: "
              f"{'yes' if env.cache_signing_key() else 'NO KEY: TILECRAFT_CACHE_KEY unset, not used'})")
    elif env.cache_signing_key():
        print(f"{'signed':<10} yes (TILECRAFT_CACHE_KEY is set: unsigned or foreign entries are refused)")
    return 0


# ------------------------------------------------------------------------------------ doctor
def _doctor(args) -> int:
    from .doctor import main as doctor_main
    return doctor_main()


# ------------------------------------------------------------------------------------ bench
def bench_script() -> Path | None:
    """`benchmarks/bench.py` of the source checkout this package was imported from, if any."""
    candidate = Path(__file__).resolve().parent.parent / "benchmarks" / "bench.py"
    return candidate if candidate.is_file() else None


def _bench(args) -> int:
    import subprocess
    script = bench_script()
    if script is None:
        raise CliError("the benchmark suite ships with the source checkout (benchmarks/bench.py), not with the "
                       "installed package; clone the tilecraft repository and run `tilecraft bench` (or "
                       "`python benchmarks/bench.py`) there, or `pip install -e .` from the checkout.  "
                       "`tilecraft demo` times the reference kernels on any machine.")
    argv = [sys.executable, str(script)]
    if args.list:
        argv.append("--list")
    if args.quick:
        argv.append("--quick")
    if args.only:
        argv += ["--only", args.only]
    if getattr(args, "cpu", False):
        argv.append("--cpu")  # without a GPU the suite times the CPU target anyway
    return subprocess.run(argv, cwd=str(script.parent.parent)).returncode


# ------------------------------------------------------------------------------------ show
def _literal(text: str):
    """A Python literal (`1024`, `'float16'`, `(64, 64)`, `True`, `None`), else the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _split_params(items: list[str]) -> tuple[list, dict]:
    args, kwargs = [], {}
    for item in items:
        name, eq, value = item.partition("=")
        if eq and name.isidentifier():
            kwargs[name] = _literal(value)
        elif kwargs:
            raise CliError(f"positional argument {item!r} after keyword arguments")
        else:
            args.append(_literal(item))
    return args, kwargs


def _load_module(spec: str):
    """Import FILE (a path) or a dotted module name; the file's folder goes on sys.path first."""
    path = Path(spec).expanduser()
    if spec.endswith(".py") or os.sep in spec or path.is_file():
        if not path.is_file():
            raise CliError(f"no such file: {spec}")
        path = path.resolve()
        name = "_tilecraft_show_" + "".join(c if c.isalnum() else "_" for c in path.stem)
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise CliError(f"cannot import {spec}: not a Python file")
        module = importlib.util.module_from_spec(module_spec)
        sys.path.insert(0, str(path.parent))
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except SystemExit as e:
            raise CliError(f"importing {spec} called sys.exit({e.code}); move the script's work under "
                           "`if __name__ == \"__main__\":`") from None
        except BaseException as e:
            sys.modules.pop(name, None)
            raise _ProgramError(f"importing {spec} failed", e) from None
        return module
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as e:
        if e.name and (spec == e.name or spec.startswith(e.name + ".")):
            raise CliError(f"no such file or module: {spec}") from None
        raise _ProgramError(f"importing {spec} failed", e) from None
    except Exception as e:  # noqa: BLE001
        raise _ProgramError(f"importing {spec} failed", e) from None


class _ProgramError(Exception):
    """An exception raised by the user's own code, reported with where it happened in their files."""

    def __init__(self, what: str, exc: BaseException):
        self.what, self.exc = what, exc
        super().__init__(what)


def _user_location(exc: BaseException) -> str:
    """`file:line` of the innermost frame outside tilecraft and the standard library, if any."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    pkg = str(Path(__file__).resolve().parent)
    stdlib = os.path.dirname(os.__file__)
    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        fname = os.path.abspath(frame.filename)
        if fname.startswith(pkg) or fname.startswith(stdlib) or fname.startswith("<"):
            continue
        where = f"{frame.filename}:{frame.lineno}"
    return where


def _describe_exception(exc: BaseException) -> str:
    from .errors import TilecraftError
    if isinstance(exc, TilecraftError):
        return str(exc)
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__}: {exc.msg}\n  at {_user_location(exc)}"
    text = str(exc)
    where = _user_location(exc)
    return f"{type(exc).__name__}: {text}" + (f"\n  at {where}" if where else "")


def _find_object(module, name: str | None, spec: str):
    from .ir.func import PrimFunc
    from .jit import JITFactory
    if name is None:
        from .autotuner.decorator import AutoTuneImpl
        found = [k for k, v in vars(module).items()
                 if not k.startswith("_") and isinstance(v, (JITFactory, AutoTuneImpl, PrimFunc))]
        if len(found) == 1:
            return found[0], getattr(module, found[0])
        listing = ", ".join(found) if found else "none found"
        raise CliError(f"say which factory to show: {spec}:NAME (kernel factories in {spec}: {listing})")
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            from .autotuner.decorator import AutoTuneImpl
            candidates = [k for k, v in vars(module).items()
                          if not k.startswith("_") and isinstance(v, (JITFactory, AutoTuneImpl, PrimFunc))]
            hint = f"; kernel factories there: {', '.join(candidates)}" if candidates else ""
            raise CliError(f"{spec} has no {name!r}{hint}")
        obj = getattr(obj, part)
    return name, obj


def _is_gpu() -> bool:
    from .target import cuda_available
    try:
        return bool(cuda_available())
    except Exception:  # noqa: BLE001
        return False


def _choose_target(requested: str, declared, whats: list[str]):
    """The target to compile for, and a note for stderr when it was chosen for the user."""
    from .target import Target
    if requested and requested != "auto":
        try:
            return Target.resolve(requested), None
        except ValueError as e:
            raise CliError(str(e)) from None
    if declared not in (None, "auto"):
        try:
            return Target.resolve(declared), None
        except ValueError as e:
            raise CliError(f"the factory's own target: {e}") from None
    if "sass" in whats and not _is_gpu():
        return Target("cuda", "sm_90a"), "no GPU here: compiling for sm_90a (use --target to pick another)"
    return Target.resolve("auto"), None


def _show(args) -> int:
    import tilecraft
    from .autotuner.decorator import AutoTuneImpl
    from .ir.func import PrimFunc
    from .jit import JITFactory
    from .runtime.kernel import JITKernel

    whats = [w.strip() for w in args.what.split(",") if w.strip()]
    if whats == ["all"]:
        whats = list(WHATS)
    bad = [w for w in whats if w not in WHATS]
    if bad or not whats:
        raise CliError(f"--what {args.what!r}: choose from {', '.join(WHATS)} (comma-separated) or all")

    spec, colon, name = args.target_spec.rpartition(":")
    if not colon or not spec:
        spec, name = args.target_spec, None
    module = _load_module(spec)
    name, obj = _find_object(module, name or None, spec)

    pos, kw = _split_params(list(args.params) + list(args.args or []))
    more_args, more_kwargs = _split_params(list(args.kwargs or []))
    if more_args:
        raise CliError(f"--kwargs takes name=value pairs, got {more_args[0]!r}")
    kw.update(more_kwargs)

    compile_kwargs: dict = {}
    declared_target = None
    if isinstance(obj, AutoTuneImpl):
        obj = obj.factory
    kernel = None
    try:
        if isinstance(obj, JITKernel):
            if pos or kw:
                raise CliError(f"{name} is an already compiled kernel; it takes no arguments here")
            kernel, func = obj, obj.func
        elif isinstance(obj, PrimFunc):
            if pos or kw:
                raise CliError(f"{name} is a @T.prim_func; it takes no arguments here")
            func = obj
        elif isinstance(obj, JITFactory):
            compile_kwargs = {k: v for k, v in obj.compile_kwargs.items() if k in ("out_idx", "pass_configs")}
            declared_target = obj.compile_kwargs.get("target")
            func = _call_factory(obj.fn, name, pos, kw)
        elif callable(obj):
            func = _call_factory(obj, name, pos, kw)
        else:
            raise CliError(f"{spec}:{name} is a {type(obj).__name__}, not a kernel factory "
                           "(a @tilelang.jit function, or a function returning a @T.prim_func)")
        if not isinstance(func, PrimFunc):
            raise CliError(f"{name}(...) returned {type(func).__name__}, not a @T.prim_func")

        if kernel is None and whats != ["ir"]:
            target, note = _choose_target(args.target, declared_target, whats)
            if note:
                print(f"tilecraft show: {note}", file=sys.stderr)
            kernel = tilecraft.compile(func, target=target, **compile_kwargs)
    except (CliError, _ProgramError):
        raise
    except Exception as e:  # noqa: BLE001 - the program's own error, shown without our stack
        if args.traceback:
            raise
        shown = ", ".join([repr(a) for a in pos] + [f"{k}={v!r}" for k, v in kw.items()])
        raise _ProgramError(f"{name}({shown})", e) from None

    if kernel is not None and "sass" in whats and kernel.target.kind != "cuda":
        raise CliError(f"SASS exists only for CUDA targets; {name} was compiled for {kernel.target} "
                       "(use --target sm_90a)")

    sections = []
    for what in whats:
        if what == "ir":
            text = kernel.get_ir() if kernel is not None else func.script()
        elif what == "lowered":
            text = kernel.get_lowered_ir()
        elif what == "source":
            text = kernel.get_kernel_source()
        elif what == "host":
            text = kernel.get_host_source()
        elif what == "plan":
            text = kernel.get_plan()
        else:
            try:
                text = kernel.get_sass()
            except RuntimeError as e:
                raise CliError(str(e)) from None
        sections.append((what, text))
    target_text = str(kernel.target) if kernel is not None else "(not compiled)"
    for what, text in sections:
        if len(sections) > 1:
            print(f"// ===== {name}: {what} ({target_text}) =====")
        print(text.rstrip("\n"))
    return 0


def _call_factory(fn, name: str, pos: list, kw: dict):
    import inspect
    try:
        inspect.signature(fn).bind(*pos, **kw)
    except TypeError as e:
        try:
            sig = str(inspect.signature(fn))
        except (TypeError, ValueError):
            sig = "(...)"
        raise CliError(f"{name}{sig}: {e}; pass arguments after the name or with --args/--kwargs, "
                       f"e.g. --args 1024 1024 --kwargs block_M=64") from None
    return fn(*pos, **kw)


# ------------------------------------------------------------------------------------ tune
def _parse_shape(text: str):
    """`1024,1024,1024` -> (1024, 1024, 1024); `M=1024,N=512` -> {"M": 1024, "N": 512}."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise CliError(f"--shapes {text!r}: expected comma-separated values such as 1024,1024,1024")
    args, kwargs = _split_params(items)
    if args and kwargs:
        raise CliError(f"--shapes {text!r}: use all positional values or all NAME=VALUE")
    return kwargs if kwargs else tuple(args)


def _parse_space(items: list[str]) -> dict:
    """`block_M=64,128 num_stages=2` -> {"block_M": [64, 128], "num_stages": [2]}."""
    space: dict = {}
    for item in items:
        name, eq, values = item.partition("=")
        if not eq or not name.isidentifier() or not values.strip():
            raise CliError(f"--space {item!r}: expected NAME=V1,V2,... (e.g. block_M=64,128)")
        if name in space:
            raise CliError(f"--space: {name} given twice")
        space[name] = [_literal(v.strip()) for v in values.split(",") if v.strip()]
    return space


def _tune(args) -> int:
    from . import env
    from .autotuner.sweep import tune_many

    spec, colon, name = args.target_spec.rpartition(":")
    if not colon or not spec:
        raise CliError(f"{args.target_spec!r}: expected FILE:FACTORY or MODULE:FACTORY")
    module = _load_module(spec)
    name, factory = _find_object(module, name, spec)
    factory = getattr(factory, "factory", factory)  # an @autotune-wrapped factory: tune the jit below it
    shapes = [_parse_shape(s) for s in args.shapes]
    space = _parse_space(args.space)
    if not space:
        raise CliError("--space: give at least one NAME=V1,V2,...")
    ref = None
    if args.ref:
        ref_spec, _, ref_name = args.ref.rpartition(":")
        if not ref_spec:
            raise CliError(f"--ref {args.ref!r}: expected FILE:FUNCTION")
        ref = getattr(_load_module(ref_spec), ref_name, None)
        if not callable(ref):
            raise CliError(f"--ref {args.ref!r}: {ref_spec} has no function {ref_name!r}")
    if args.db:
        os.environ["TILECRAFT_TUNING_DB"] = args.db
    executor = args.executor
    if executor == "ray" and args.ray_address:
        from .autotuner.ray_executor import RayExecutor
        executor = RayExecutor(address=args.ray_address)
    compile_args = {"target": args.target} if args.target != "auto" else None
    try:
        report = tune_many(factory, shapes, space, executor=executor, compile_args=compile_args,
                           ref_prog=ref, skip_check=ref is None, warmup=args.warmup, rep=args.rep,
                           timeout=args.timeout)
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None
    except ImportError as e:
        raise CliError(str(e)) from None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = report.table()
    table_path = out / f"tune_{name}.md"
    table_path.write_text(text + "\n")
    written = [str(table_path)]
    try:
        written.append(report.plot(str(out / f"tune_{name}.png")))
    except ImportError as e:
        print(f"tilecraft tune: no plot: {e}", file=sys.stderr)
    print(f"tuning database: {env.tuning_db()}")
    print("wrote " + ", ".join(written))
    return 0 if all(r is not None for r in report.results) else 1


# ------------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tilecraft", description="tilecraft: tile-level GPU kernels in Python",
                                     epilog="`tilecraft COMMAND --help` describes each command.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("demo", help="compile, check and time the reference kernels on the default target")
    p.add_argument("--target", default="auto", help="auto (the GPU when there is one), cpu, cuda, sm_90a, ...")
    p.set_defaults(fn=_demo)

    p = sub.add_parser("doctor", help="check the GPU, driver, NVRTC, nvcc, C++ compiler and cache; say how to fix",
                       description="Check everything tilecraft uses and print a fix for each problem. "
                                   "Exit status 0 when the CPU target works.")
    p.set_defaults(fn=_doctor)

    p = sub.add_parser("bench", help="run the benchmark suite (benchmarks/bench.py of the source checkout)",
                       description="Time every reference kernel against the fastest torch equivalent "
                                   "on the GPU, or on the CPU target where there is none "
                                   "(benchmarks/bench.py of the source checkout).")
    p.add_argument("--cpu", action="store_true", help="time the CPU target even when a GPU is present")
    p.add_argument("--quick", action="store_true", help="smaller sizes and shorter timing (smoke run)")
    p.add_argument("--only", default="", help=f"comma-separated groups: {BENCH_GROUPS_HINT}")
    p.add_argument("--list", action="store_true", help="list the groups and exit")
    p.set_defaults(fn=_bench)

    p = sub.add_parser(
        "show", help="print a kernel's IR, lowered IR, generated source or SASS",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Print what tilecraft makes of a kernel factory.",
        epilog="examples:\n"
               "  tilecraft show examples/quickstart.py:matmul 256 256 256 --what source\n"
               "  tilecraft show examples/quickstart.py:matmul --args 256 256 256 --kwargs block_M=32 --what lowered\n"
               "  tilecraft show tilecraft.kernels:matmul 1024 1024 1024 --target sm_90a --what sass\n"
               "Arguments are Python literals (1024, 'float16', (64, 64), True); text that is not a literal "
               "is passed as a string (float16).")
    p.add_argument("target_spec", metavar="FILE:FACTORY",
                   help="a .py file (or dotted module) and the name of a @tilelang.jit factory in it")
    p.add_argument("params", nargs="*", metavar="ARG", help="the factory's arguments; name=value for keywords")
    p.add_argument("--args", nargs="*", default=[], metavar="ARG", help="positional arguments of the factory")
    p.add_argument("--kwargs", nargs="*", default=[], metavar="NAME=VALUE", help="keyword arguments of the factory")
    p.add_argument("--what", default="source",
                   help=f"what to print: {', '.join(WHATS)}, several comma-separated, or all (default: source)")
    p.add_argument("--target", default="auto",
                   help="auto (the factory's own target, else the GPU, else cpu; sm_90a for sass without a GPU), "
                        "cpu, cuda, sm_80 ... sm_90a")
    p.add_argument("--traceback", action="store_true", help="show the full Python traceback of an error")
    p.set_defaults(fn=_show)

    p = sub.add_parser(
        "tune", help="tune a factory over a config space for many shapes (tuning database, table, plot)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Tune FACTORY over the product of --space for every shape of --shapes on the chosen "
                    "executor. Results go to the tuning database (TILECRAFT_TUNING_DB): a second run over "
                    "the same shapes benchmarks nothing it already knows. Prints a table (configs x shapes) "
                    "and writes it with a plot (time per config and shape) under --out.",
        epilog="example:\n"
               "  tilecraft tune tilecraft.kernels.gemm:matmul --shapes 256,256,256 512,512,512 \\\n"
               "      --space block_M=32,64 block_N=32,64 block_K=32 num_stages=1,2 --executor ray")
    p.add_argument("target_spec", metavar="FILE:FACTORY", help="a .py file (or dotted module) and a @tilelang.jit factory")
    p.add_argument("--shapes", nargs="+", required=True, metavar="SHAPE",
                   help="the factory's fixed arguments per problem: 1024,1024,1024 or M=1024,N=1024,K=1024")
    p.add_argument("--space", nargs="+", required=True, metavar="NAME=V1,V2",
                   help="tuned parameters and their values; the configs are their product")
    p.add_argument("--executor", choices=["local", "ray"], default=None,
                   help="where configs compile and run (default TILECRAFT_AUTOTUNE_EXECUTOR, else local)")
    p.add_argument("--ray-address", default=None, help="the Ray cluster to join (default: a local one)")
    p.add_argument("--ref", default=None, metavar="FILE:FUNCTION",
                   help="a reference taking the kernel's inputs; configs whose output differs are dropped")
    p.add_argument("--target", default="auto", help="compile target (default: the factory's own, else auto)")
    p.add_argument("--warmup", type=float, default=5, help="warm-up time per config (ms, default 5)")
    p.add_argument("--rep", type=float, default=20, help="timed repetitions budget per config (ms, default 20)")
    p.add_argument("--timeout", type=float, default=None, help="seconds a config may take to compile or run once")
    p.add_argument("--db", default=None, help="the tuning database file (default TILECRAFT_TUNING_DB)")
    p.add_argument("--out", default=".", help="folder for tune_FACTORY.md and tune_FACTORY.png (default .)")
    p.add_argument("--traceback", action="store_true", help="show the full Python traceback of an error")
    p.set_defaults(fn=_tune)

    p = sub.add_parser("cache", help="show or clear the compiled-kernel cache")
    p.add_argument("action", choices=["info", "clear"])
    p.set_defaults(fn=_cache)

    p = sub.add_parser("run", help="run a TileLang program unchanged, `import tilelang[.X]` answered by tilecraft",
                       description="Run PROG.py as `python PROG.py ARGS` would, with every `import tilelang[.X]` "
                                   "answered by tilecraft's own modules (tilecraft.compat).")
    p.add_argument("-m", dest="module", action="store_true", help="PROG is a module name (as `python -m`)")
    p.add_argument("--cpu", action="store_true",
                   help="CPU mode: a program written for CUDA runs unchanged on the CPU target (tensors on "
                        "\"cuda\" land on the CPU, torch.cuda bookkeeping answers, timings use the host clock; "
                        "same as TILECRAFT_RUN_ON_CPU=1)")
    p.add_argument("--also-compile", metavar="ARCH", default=None,
                   help="with --cpu (implied): also compile every kernel for this CUDA arch (e.g. sm_90a; NVRTC, "
                        "no launch) so its lowering's refusals show and kernel.get_plan() shows its plan")
    p.add_argument("--arch", metavar="ARCH", default=None,
                   help="with --cpu (implied): the GPU architecture torch.cuda reports to the program (default: "
                        "the --also-compile arch, else sm_90a), for a program that demands e.g. sm_120; same as "
                        "TILECRAFT_CPU_ARCH")
    p.add_argument("program", metavar="PROG.py")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="the program's own arguments")
    p.set_defaults(fn=_run)
    return parser


def _run(args) -> int:
    """`tilecraft run`: the program's own exceptions and exit status pass through unchanged."""
    from .compat import run_module, run_program
    from . import env
    if args.cpu or args.also_compile or args.arch or env.knobs.run_on_cpu:
        from .compat import cpu_mode
        from .target import ARCHS
        for flag, value in (("--also-compile", args.also_compile), ("--arch", args.arch)):
            if value and value not in ARCHS:
                raise CliError(f"{flag} {value}: expected one of {', '.join(ARCHS)}")
        if args.arch:
            os.environ["TILECRAFT_CPU_ARCH"] = args.arch
        os.environ["TILECRAFT_RUN_ON_CPU"] = "1"       # the program's own subprocesses too
        if args.also_compile:
            os.environ["TILECRAFT_ALSO_COMPILE"] = args.also_compile
        cpu_mode.install(args.also_compile)
    try:
        if args.module:
            run_module(args.program, args.args)
        else:
            run_program(args.program, args.args)
    except FileNotFoundError as e:
        raise CliError(str(e)) from None
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"tilecraft {args.command}"
    try:
        return args.fn(args)
    except CliError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except _ProgramError as e:
        if getattr(args, "traceback", False):
            raise e.exc
        print(f"{prog}: error: {e.what}:\n{_describe_exception(e.exc)}", file=sys.stderr)
        if not getattr(args, "traceback", True):
            print("(run with --traceback for the full Python traceback)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tilecraft show ... | head`
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
