"""The fuzzer's mutation mode: invalid (or edge-case) programs derived from its valid ones.

    python -m tilecraft.testing.fuzz --mutate --count 2000 [--seed S] [--table benchmarks/results/fuzz_mutate.md]

Mutant i of seed S takes program i of seed S (fuzz_gen), renders it, and rewrites ONE line of the
kernel with one of `MUTATIONS` (picked from its own random stream `mutate:S:i`, so `--only i`
reproduces it alone).  A mutation says what it expects:

- ``refuse``: the mutated program is invalid (a negative or float extent, a tensor-read grid or
  T.Parallel extent (a T.serial count read from an integer tensor is valid), an index or
  atomic past a buffer's end, mismatched gemm shapes, a bitwise operator on a float, an integer
  division by a constant zero, an oversize or empty tile, a dtype that does not exist, a reduce
  over a dim the buffer lacks, ...): it must be refused with a TilecraftError whose span names the
  mutated line (or one of the lines the mutation lists as where the same mistake shows: the uses
  of a mutated tile);
- ``same``: the mutated program is valid and means what the original meant (another thread
  count, pipeline depth, loop kind or tile scope): it must compute the original's torch reference
  on the CPU target and compile for CUDA -- or be refused at the mutated line with a clear error.

Each mutant is parsed, lowered and run on the CPU target, and lowered and compiled for sm_80 and
sm_90a (NVRTC, compile only).  Outcomes per target (`OUTCOMES`): refused at the line, valid and
correct (CPU) / compiled (CUDA), and the failures -- refused at another line or without one,
wrong (an invalid program accepted, or a valid one computing something else), internal (an
exception that is not a TilecraftError, an InternalCompilerError, generated code that does not
compile), over 30 s (parsing + lowering one program), crash (the worker process died: the program
is re-run alone to pin it).
"""
from __future__ import annotations

import faulthandler
import os
import random
import re
import signal
import sys
import time

from ..errors import InternalCompilerError, TilecraftError

SLOW_S = 30.0          # parsing + lowering one mutant for one target longer than this is a failure
HARD_S = 900           # a worker still busy this long in one step (one mutant's parse, lowering or run, one
                       # batch compile) is killed: a hang in C code, which SIGALRM cannot interrupt
CUDA_TARGETS = (("compile sm_80", "sm_80"), ("compile sm_90a", "sm_90a"))
OUTCOMES = ("refused at line", "valid and correct", "refused elsewhere", "wrong", "internal", "over 30 s", "crash")
FAILURES = OUTCOMES[2:]


# ---- reading the rendered kernel ------------------------------------------------------------------

_PARAM = re.compile(r"(\w+): T\.Tensor\(\(([^()]*)\), \"(\w+)\"\)")
_ALLOC = re.compile(r"^(\s*)(\w+) = T\.alloc_(shared|fragment)\(\(([^()]*)\), \"(\w+)\"\)$")
_KERNEL = re.compile(r"^(\s*)with T\.Kernel\((.*), threads=([^)]*)\) as (.*):$")
_PARALLEL = re.compile(r"^(\s*)for (.*) in T\.Parallel\(([^()]*)\):$")
_LOOP = re.compile(r"^(\s*)for (\w+) in T\.(Pipelined|serial|unroll)\((.*?)(, num_stages=(\d+))?\):$")
_GEMM = re.compile(r"^(\s*)T\.gemm\((\w+), (\w+), (\w+)(.*)\)$")
_REDUCE = re.compile(r"^(\s*)T\.reduce_(\w+)\((\w+), (\w+), dim=(\d)(.*)\)$")
_CUMSUM = re.compile(r"^(\s*)T\.cumsum\((.*), dim=(\d)(.*)\)$")
_ATOMIC = re.compile(r"^(\s*)T\.atomic_add\((\w+)\[(.*?)\], (.*)\)$")
_STORE = re.compile(r"^(\s*)(\w+)\[([^\]]*)\] = (.*)$")
_SUBSCRIPT = re.compile(r"\b(\w+)\[([^\[\]]*)\]")


def split_args(text: str) -> list:
    """`text` split at its top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


class Kernel:
    """What the mutations need to know about a rendered program: its lines, where the kernel
    function starts and ends, its tensor parameters and on-chip tiles (name -> (shape, dtype))."""

    def __init__(self, source: str):
        self.lines = source.split("\n")
        self.start = self.lines.index("@T.prim_func") + 1
        self.end = next(i for i in range(self.start + 1, len(self.lines)) if self.lines[i].startswith("def "))
        self.params = {m.group(1): (split_args(m.group(2)), m.group(3)) for m in _PARAM.finditer(self.lines[self.start])}
        self.tiles = {}
        for i in self.body():
            m = _ALLOC.match(self.lines[i])
            if m:
                self.tiles[m.group(2)] = ([int(x) for x in split_args(m.group(4))], m.group(5), m.group(3), i)

    def body(self) -> range:
        return range(self.start + 1, self.end)

    def matches(self, rx) -> list:
        return [(i, m) for i in self.body() for m in [rx.match(self.lines[i])] if m]

    def uses(self, name: str) -> list:
        """Lines of the kernel that name `name` (1-based)."""
        w = re.compile(rf"\b{re.escape(name)}\b")
        return [i + 1 for i in self.body() if w.search(self.lines[i])]

    def tensor_read(self) -> str:
        """An element of the first tensor parameter, e.g. `X[0, 0]`."""
        name, (shape, _) = next(iter(self.params.items()))
        return f"{name}[{', '.join('0' for _ in shape)}]"

    def float_tensor_read(self) -> str:
        """A float read of the first tensor parameter: the element itself if the tensor holds floats,
        else the element times 0.5 (an integer element is a valid data-dependent T.serial count)."""
        read = self.tensor_read()
        return read if "float" in next(iter(self.params.values()))[1] else f"{read} * 0.5"

    def in_parallel(self, i: int) -> bool:
        """Line i sits inside a T.Parallel loop."""
        ind = len(self.lines[i]) - len(self.lines[i].lstrip())
        for j in range(i - 1, self.start, -1):
            line = self.lines[j]
            jind = len(line) - len(line.lstrip())
            if jind < ind:
                if _PARALLEL.match(line):
                    return True
                ind = jind
        return False


class Mutant:
    """One mutated line: `text` replaces line `index` (0-based) of the rendered module; `lines` are the
    1-based lines a refusal may name; `expect` is ``refuse`` or ``same``."""

    def __init__(self, name: str, index: int, text: str, expect: str, also=()):
        self.name, self.index, self.text, self.expect = name, index, text, expect
        self.lines = sorted({index + 1, *also})


# ---- the mutations: each returns every Mutant it can make of a kernel (rng picks the variant) --------

def _sub(m, group: int, new: str) -> str:
    s = m.string
    return s[:m.start(group)] + new + s[m.end(group):]


def m_parallel_extent(k, rng):
    out = []
    for i, m in k.matches(_PARALLEL):
        args = split_args(m.group(3))
        a = rng.randrange(len(args))
        bad = rng.choice(("-4", "0", "2.5", k.tensor_read(), f"{args[a]} - {args[a]} - 1"))
        args[a] = bad
        out.append(Mutant(f"T.Parallel extent {bad}", i, _sub(m, 3, ", ".join(args)), "refuse"))
    return out


def m_grid(k, rng):
    out = []
    for i, m in k.matches(_KERNEL):
        args = split_args(m.group(2))
        a = rng.randrange(len(args))
        bad = rng.choice(("-1", "0", "2.0", k.tensor_read(), "T.ceildiv(7, 0)", f"{args[a]} // 0"))
        args[a] = bad
        out.append(Mutant(f"T.Kernel grid {bad}", i, _sub(m, 2, ", ".join(args)), "refuse"))
    return out


def m_threads_valid(k, rng):
    out = []
    for i, m in k.matches(_KERNEL):
        t = rng.choice(("1", "33", "100", "None", "48", "96", "160", "512", "128.0"))
        out.append(Mutant(f"threads={t}", i, _sub(m, 3, t), "same"))
    return out


def m_threads_invalid(k, rng):
    out = []
    for i, m in k.matches(_KERNEL):
        t = rng.choice(("0", "-32", "2048", "1 << 31", "2.5", '"128"', k.tensor_read()))
        out.append(Mutant(f"threads={t}", i, _sub(m, 3, t), "refuse"))
    return out


def m_loop_extent(k, rng):
    out = []
    for i, m in k.matches(_LOOP):
        # a serial / unroll / pipelined count read from an integer tensor is valid (a data-dependent
        # trip count, as TileLang's block-sparse kernels loop): a float one is refused
        bad = rng.choice(("-2", "2.5", k.float_tensor_read(), f"{m.group(4)} // 0"))
        out.append(Mutant(f"T.{m.group(3)} extent {bad}", i, _sub(m, 4, bad), "refuse"))
    return out


def m_loop_valid(k, rng):
    """Another loop kind or pipeline depth: the same computation."""
    out = []
    for i, m in k.matches(_LOOP):
        if m.group(6) is not None and rng.random() < 0.6:
            n = rng.choice([x for x in ("0", "1", "2", "3", "4") if x != m.group(6)])
            out.append(Mutant(f"num_stages={n}", i, _sub(m, 6, n), "same"))
            continue
        kind = rng.choice([x for x in ("Pipelined", "serial", "unroll") if x != m.group(3)])
        s = m.string
        new = s[:m.start(3)] + kind + "(" + m.group(4) + ("" if kind != "Pipelined" else ", num_stages=2") + "):"
        out.append(Mutant(f"T.{m.group(3)} -> T.{kind}", i, new, "same"))
    return out


def m_stages_invalid(k, rng):
    out = []
    for i, m in k.matches(_LOOP):
        if m.group(6) is not None:
            n = rng.choice(("-1", "2.5", k.tensor_read()))
            out.append(Mutant(f"num_stages={n}", i, _sub(m, 6, n), "refuse"))
    return out


def m_alloc_size(k, rng):
    out = []
    for i, m in k.matches(_ALLOC):
        dims = split_args(m.group(4))
        a = rng.randrange(len(dims))
        # sizes past every target's limit (a 65536-row tile is valid on the CPU target)
        bad = rng.choice(("0", "-8", "1 << 28", "1 << 31", "1 << 40", "2.5", k.tensor_read()))
        dims[a] = bad
        new = _sub(m, 4, ", ".join(dims) + ("," if len(dims) == 1 else ""))
        # a tile of another size is also wrong where it is used (copied, reduced, multiplied)
        out.append(Mutant(f"tile size {bad}", i, new, "refuse", k.uses(m.group(2))))
    return out


def m_alloc_dtype(k, rng):
    out = []
    for i, m in k.matches(_ALLOC):
        bad = rng.choice(("float33", "int3", "bfloat", "complex64", "string"))
        out.append(Mutant(f"tile dtype {bad}", i, _sub(m, 5, bad), "refuse"))
    return out


def m_param_dtype(k, rng):
    line = k.lines[k.start]
    ms = list(_PARAM.finditer(line))
    m = rng.choice(ms)
    bad = rng.choice(("float33", "int3", "floaty"))
    return [Mutant(f"tensor dtype {bad}", k.start, line[:m.start(3)] + bad + line[m.end(3):], "refuse")]


def m_param_shape(k, rng):
    line = k.lines[k.start]
    ms = [m for m in _PARAM.finditer(line) if all(d.lstrip("-").isdigit() for d in split_args(m.group(2)))]
    if not ms:
        return []
    m = rng.choice(ms)
    dims = split_args(m.group(2))
    dims[rng.randrange(len(dims))] = rng.choice(("-5", "2.5"))
    new = line[:m.start(2)] + ", ".join(dims) + ("," if len(dims) == 1 else "") + line[m.end(2):]
    return [Mutant("tensor shape", k.start, new, "refuse")]


def m_scope(k, rng):
    """A tile in the other on-chip scope: the same values (TileLang's copies, reductions and gemms take
    either), or a clear refusal where an operator needs one scope."""
    out = []
    for i, m in k.matches(_ALLOC):
        other = "fragment" if m.group(3) == "shared" else "shared"
        out.append(Mutant(f"T.alloc_{m.group(3)} -> T.alloc_{other}", i, _sub(m, 3, other), "same",
                          k.uses(m.group(2))))
    return out


def _gemm_shapes(k, m):
    """(A's (M, K), B's (K, N), C's (M, N)) as the gemm line reads them, or None (a tile not found)."""
    a, b, c = (k.tiles.get(x) for x in m.group(2, 3, 4))
    if not (a and b and c) or len(a[0]) != 2 or len(b[0]) != 2 or len(c[0]) != 2:
        return None
    ta, tb = "transpose_A=True" in m.group(5), "transpose_B=True" in m.group(5)
    am, ak = a[0][::-1] if ta else a[0]
    bk, bn = b[0][::-1] if tb else b[0]
    return (am, ak), (bk, bn), tuple(c[0])


def _gemm_ok(shapes) -> bool:
    (am, ak), (bk, bn), (cm, cn) = shapes
    return am == cm and ak == bk and bn == cn


def m_gemm(k, rng):
    out = []
    for i, m in k.matches(_GEMM):
        s = m.string
        cands = [(f"T.gemm({m.group(3)}, {m.group(2)}, {m.group(4)}{m.group(5)})", "A and B swapped"),
                 (f"T.gemm({m.group(2)}, {m.group(4)}, {m.group(3)}{m.group(5)})", "B and C swapped")]
        for flag in ("transpose_A", "transpose_B"):
            if f"{flag}=False" in s:
                cands.append((s.replace(f"{flag}=False", f"{flag}=True").strip(), f"{flag} flipped"))
            elif f"{flag}=True" in s:
                cands.append((s.replace(f"{flag}=True", f"{flag}=False").strip(), f"{flag} flipped"))
            else:
                cands.append((s.rstrip()[:-1] + f", {flag}=True)", f"{flag} added"))
        for text, what in cands:
            mm = _GEMM.match(m.group(1) + text.strip())
            shapes = _gemm_shapes(k, mm) if mm else None
            if shapes is not None and not _gemm_ok(shapes):   # mismatched shapes only: refused for sure
                out.append(Mutant(f"T.gemm {what}", i, m.group(1) + text.strip(), "refuse"))
    return out


def m_reduce(k, rng):
    out = []
    for i, m in k.matches(_REDUCE):
        src = k.tiles.get(m.group(3))
        choices = ["2", "-3", '"1"', "1.0"]
        bad = rng.choice(choices)
        out.append(Mutant(f"T.reduce dim={bad}", i, _sub(m, 5, bad), "refuse"))
        if src and not src[1].startswith("int") and m.group(2) in ("sum", "max", "min", "abssum", "absmax"):
            op = rng.choice(("bitand", "bitor", "bitxor"))
            out.append(Mutant(f"T.reduce_{op} on {src[1]}", i, _sub(m, 2, op), "refuse"))
        dst = k.tiles.get(m.group(4))
        if src and dst and len(src[0]) != len(dst[0]):
            s = m.string
            out.append(Mutant("T.reduce operands swapped", i,
                              s[:m.start(3)] + f"{m.group(4)}, {m.group(3)}" + s[m.end(4):], "refuse"))
    return out


def m_cumsum(k, rng):
    return [Mutant("T.cumsum dim", i, _sub(m, 3, rng.choice(("2", "-3"))), "refuse") for i, m in k.matches(_CUMSUM)]


def _extent(k, name: str, axis: int):
    """The constant extent of `name` (a tensor parameter or a tile) along `axis`, or None."""
    if name in k.params:
        d = k.params[name][0][axis] if axis < len(k.params[name][0]) else None
        return int(d) if d is not None and d.isdigit() else None
    if name in k.tiles and axis < len(k.tiles[name][0]):
        return k.tiles[name][0][axis]
    return None


def m_atomic_oob(k, rng):
    out = []
    for i, m in k.matches(_ATOMIC):
        idx = split_args(m.group(3))
        a = rng.randrange(len(idx))
        n = _extent(k, m.group(2), a)
        if n is None:
            continue
        idx[a] = f"{idx[a]} + {n}"
        out.append(Mutant("T.atomic_add past the end", i, _sub(m, 3, ", ".join(idx)), "refuse"))
    return out


def _parallel_stores(k):
    return [(i, m) for i, m in k.matches(_STORE) if k.in_parallel(i) and not m.group(2).startswith("T")]


def m_store_oob(k, rng):
    out = []
    for i, m in _parallel_stores(k):
        idx = split_args(m.group(3))
        a = rng.randrange(len(idx))
        n = _extent(k, m.group(2), a)
        if n is None:
            continue
        idx[a] = f"{idx[a]} + {n}"
        out.append(Mutant("store past the end", i, _sub(m, 3, ", ".join(idx)), "refuse"))
    return out


def m_load_oob(k, rng):
    out = []
    for i, m in _parallel_stores(k):
        rhs = m.group(4)
        subs = [s for s in _SUBSCRIPT.finditer(rhs) if _extent(k, s.group(1), 0) is not None]
        if not subs:
            continue
        s = rng.choice(subs)
        idx = split_args(s.group(2))
        a = rng.randrange(len(idx))
        n = _extent(k, s.group(1), a)
        if n is None:
            continue
        idx[a] = f"{idx[a]} + {n}"
        new_rhs = rhs[:s.start(2)] + ", ".join(idx) + rhs[s.end(2):]
        out.append(Mutant("load past the end", i, m.string[:m.start(4)] + new_rhs, "refuse"))
    return out


def _store_dtype(k, m):
    name = m.group(2)
    if name in k.tiles:
        return k.tiles[name][1]
    if name in k.params:
        return k.params[name][1]
    return None


def m_operator(k, rng):
    """A bitwise operator on a float value, an integer division by a constant zero, a name that
    does not exist."""
    out = []
    for i, m in _parallel_stores(k):
        dt = _store_dtype(k, m)
        rhs = m.group(4)
        if dt is None:
            continue
        if dt.startswith("float") or dt.startswith("bfloat"):
            op = rng.choice(("({}) << 1", "({}) ^ 1", "({}) & 3", "~({})", "({}) >> 2"))
            out.append(Mutant(f"{op.format('x')} on {dt}", i, m.string[:m.start(4)] + op.format(rhs), "refuse"))
        elif dt.startswith("int"):
            op = rng.choice(("({}) // 0", "({}) % 0", "T.truncdiv({}, 0)"))
            out.append(Mutant(f"{op.format('x')} on {dt}", i, m.string[:m.start(4)] + op.format(rhs), "refuse"))
        idx = split_args(m.group(3))
        a = rng.randrange(len(idx))
        idx[a] = f"({idx[a]}) // 0"
        out.append(Mutant("index // 0", i, _sub(m, 3, ", ".join(idx)), "refuse"))
        out.append(Mutant("undefined name", i, m.string[:m.start(4)] + f"({rhs}) + fz_undefined_name", "refuse"))
    return out


MUTATIONS = (m_parallel_extent, m_grid, m_threads_valid, m_threads_invalid, m_loop_extent, m_loop_valid,
             m_stages_invalid, m_alloc_size, m_alloc_dtype, m_param_dtype, m_param_shape, m_scope, m_gemm,
             m_reduce, m_cumsum, m_atomic_oob, m_store_oob, m_load_oob, m_operator)


VALID_VARIANTS = (m_threads_valid, m_loop_valid, m_scope)   # the mutations that expect `same`
VALID_SHARE = 0.12   # of the mutants: a valid variant costs a compile and a run, a refusal only a parse


def mutate(source: str, rng: random.Random) -> Mutant | None:
    """One mutant of the rendered program `source`: a valid variant (VALID_SHARE of the time) or an
    invalid program, by a mutation drawn among those that apply."""
    k = Kernel(source)
    valid = rng.random() < VALID_SHARE
    first = [m for m in MUTATIONS if (m in VALID_VARIANTS) == valid]
    rest = [m for m in MUTATIONS if m not in first]
    rng.shuffle(first)
    rng.shuffle(rest)
    for mut in first + rest:
        cands = mut(k, rng)
        if cands:
            return rng.choice(cands)
    return None


class MutantProgram:
    """Mutant `index` of `seed`: program `index` of `seed` with one line rewritten, written to
    `workdir`/<name>.py (loaded later, under the worker's clocks)."""

    def __init__(self, seed: int, index: int, workdir: str):
        from .fuzz_gen import random_spec, render
        self.seed, self.index = seed, index
        spec = random_spec(random.Random(f"{seed}:{index}"), f"fzm_{seed}_{index}")
        self.kind = spec["kind"]
        self.name = spec["name"]
        lines = render(spec).split("\n")
        self.mutant = mutate("\n".join(lines), random.Random(f"mutate:{seed}:{index}"))
        if self.mutant is not None:
            lines[self.mutant.index] = self.mutant.text
            lines.append(f"FZ_MUTATION = {self.mutant.name!r}   # line {self.mutant.index + 1}, "
                         f"expected: {self.mutant.expect}")
        self.path = os.path.join(workdir, f"{self.name}.py")
        with open(self.path, "w") as f:
            f.write("\n".join(lines))

    @property
    def data_seed(self) -> int:
        return self.seed * 100003 + self.index


# ---- checking one mutant -----------------------------------------------------------------------

class _Slow(Exception):
    pass


def _alarm(signum, frame):
    raise _Slow()


def _timed(fn):
    """(result, None) or (None, exception) of fn(), at most SLOW_S seconds (SIGALRM in this process)."""
    _arm()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, SLOW_S)
    try:
        return fn(), None
    except BaseException as e:  # noqa: BLE001 - classified by the caller
        if isinstance(e, KeyboardInterrupt):
            raise
        return None, e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _arm() -> None:
    """(Re)start the hard watchdog for one step."""
    faulthandler.dump_traceback_later(HARD_S, exit=True)


def classify_error(e: BaseException, mutant: Mutant, path: str) -> tuple:
    """(outcome, why) of an exception raised while parsing or lowering the mutant."""
    if isinstance(e, _Slow):
        return "over 30 s", f"still parsing/lowering after {SLOW_S:.0f} s"
    if isinstance(e, InternalCompilerError):
        return "internal", str(e).splitlines()[0][:300]
    if not isinstance(e, TilecraftError):
        return "internal", f"{type(e).__name__}: {str(e)[:300]}"
    first = str(e).splitlines()[0][:300]
    span = e.span
    if span is None:
        return "refused elsewhere", f"refused without a line: {first}"
    if os.path.basename(span.file) != os.path.basename(path) or span.line not in mutant.lines:
        return "refused elsewhere", f"refused at {os.path.basename(span.file)}:{span.line}, not {mutant.lines}: {first}"
    return "refused at line", first


def check_task(task: tuple) -> dict:
    """Check mutants (seed, indices, workdir, cuda) in this process: index -> {"kind", "name",
    "mutation", "targets": {target: (outcome, why, seconds)}}."""
    from .fuzz_build import _batch_source  # noqa: F401 - (imported so a broken build module fails here)
    seed, indices, workdir, cuda = task
    _arm()   # re-armed before every step: a hang inside C code kills the worker (reported as a crash)
    try:
        return _check(seed, indices, workdir, cuda)
    finally:
        faulthandler.cancel_dump_traceback_later()


def _check(seed, indices, workdir, cuda) -> dict:
    from .fuzz_build import compile_batches, lower_with_meta
    from .fuzz_run import compare, expected_of, inputs_of, load_module, run_once
    from ..target import Target
    wd = os.path.join(workdir, f"m{os.getpid()}")
    os.makedirs(wd, exist_ok=True)
    res = {}
    progs = []
    for i in indices:
        p = MutantProgram(seed, i, wd)
        entry = res[i] = {"kind": p.kind, "name": p.name, "targets": {},
                          "mutation": p.mutant.name if p.mutant else "(none)",
                          "expect": p.mutant.expect if p.mutant else "same"}
        if p.mutant is None:
            continue
        t0 = time.perf_counter()
        mod, err = _timed(lambda: load_module(p.path))
        if err is not None:   # refused (or failed) while parsing: the same on every target
            outcome = classify_error(err, p.mutant, p.path)
            for tgt in ("cpu",) + tuple(t for t, _ in CUDA_TARGETS if cuda):
                entry["targets"][tgt] = outcome + (time.perf_counter() - t0,)
            continue
        p.mod = mod
        progs.append(p)
    targets = [("cpu", Target.resolve("cpu"))]
    if cuda:
        targets += [(name, Target.resolve({"kind": "cuda", "arch": arch})) for name, arch in CUDA_TARGETS]
    for tname, target in targets:
        lowered = {}
        for p in progs:
            t0 = time.perf_counter()
            out, err = _timed(lambda: lower_with_meta(p.mod.FZ_FUNC, target, {}))
            secs = time.perf_counter() - t0
            if err is not None:
                res[p.index]["targets"][tname] = classify_error(err, p.mutant, p.path) + (secs,)
            else:
                lowered[p.name] = out
                res[p.index]["targets"][tname] = ("pending", "", secs)
        if not lowered:
            continue
        kind = "cpu" if target.kind == "cpu" else "cuda"
        where = "fuzz" if kind == "cpu" else target.arch
        t0 = time.perf_counter()
        _arm()
        built = compile_batches(kind, lowered, where, {})
        share = (time.perf_counter() - t0) / len(lowered)
        for p in progs:
            if p.name not in lowered:
                continue
            ok, binary, pos = built[p.name]
            secs = res[p.index]["targets"][tname][2] + share
            if not ok:
                res[p.index]["targets"][tname] = ("internal", f"generated code does not compile: {binary[:300]}", secs)
                continue
            if kind == "cuda":
                if p.mutant.expect == "refuse":
                    res[p.index]["targets"][tname] = ("wrong", "an invalid program was accepted (compiled)", secs)
                else:
                    res[p.index]["targets"][tname] = ("valid and correct", "compiled", secs)
                continue
            t1 = time.perf_counter()
            _arm()
            res[p.index]["targets"][tname] = _run_cpu(p, lowered[p.name], binary, pos, wd, compare, expected_of,
                                                     inputs_of, run_once) + (secs + time.perf_counter() - t1,)
    return res


_LIBS = [0]


def _run_cpu(p, lowered, binary, pos, wd, compare, expected_of, inputs_of, run_once) -> tuple:
    from ..compiler.build import Artifact
    from ..runtime.kernel import JITKernel
    from ..target import Target
    _LIBS[0] += 1
    path = os.path.join(wd, f"lib_{os.getpid()}_{_LIBS[0]}_{p.index}.so")   # a fresh file per library
    with open(path, "wb") as f:
        f.write(binary)
    from .fuzz_build import cpu_meta
    art = Artifact(Target.resolve("cpu"), lowered[0], cpu_meta(pos), binary_path=path)
    kernel = JITKernel(p.mod.FZ_FUNC, art)
    args, why = run_once(kernel, p.mod, p.data_seed)
    if why:
        e = _last_error(kernel, p)
        if isinstance(e, TilecraftError) and not isinstance(e, InternalCompilerError):
            return ("refused at line", f"at run time: {why[:300]}") if e.span is None or e.span.line in p.mutant.lines \
                else ("refused elsewhere", f"at run time: {why[:300]}")
        return "internal", why[:300]
    if p.mutant.expect == "refuse":
        return "wrong", "an invalid program was accepted and ran"
    bad = compare(args, expected_of(p.mod, inputs_of(p.mod, p.data_seed)), p.mod)
    return ("wrong", f"CPU vs torch: {bad}") if bad else ("valid and correct", "")


def _last_error(kernel, p):
    """The exception a run raises (run_once keeps only its text)."""
    from .fuzz_run import inputs_of
    try:
        kernel(*inputs_of(p.mod, p.data_seed))
    except Exception as e:  # noqa: BLE001
        return e
    return None


# ---- the run ---------------------------------------------------------------------------------------

class MutationReport:
    def __init__(self):
        self.rows: dict = {}      # (target, expect) -> {outcome: count}
        self.failures: list = []  # (target, (seed, index, name), mutation, outcome, why)
        self.by_mutation: dict = {}   # (mutation kind, outcome) -> count
        self.programs = 0

    def add(self, seed: int, index: int, entry: dict):
        self.programs += 1
        for tgt, (outcome, why, secs) in entry["targets"].items():
            row = self.rows.setdefault((tgt, entry["expect"]), dict.fromkeys(OUTCOMES + ("seconds",), 0))
            row[outcome] += 1
            row["seconds"] += secs
            mkind = re.sub(r"[-\d.]+|\".*\"|\w+\[.*\]", "N", entry["mutation"])
            self.by_mutation[(mkind, outcome)] = self.by_mutation.get((mkind, outcome), 0) + 1
            if outcome in FAILURES:
                self.failures.append((tgt, (seed, index, entry["name"]), entry["mutation"], outcome, why))

    def totals(self) -> dict:
        out = dict.fromkeys(OUTCOMES, 0)
        for row in self.rows.values():
            for c in OUTCOMES:
                out[c] += row[c]
        return out

    def table(self) -> str:
        head = ["| target | expected | programs | " + " | ".join(OUTCOMES) + " | seconds |",
                "| --- | --- |" + " ---: |" * (len(OUTCOMES) + 2)]
        body = []
        for (tgt, exp), row in sorted(self.rows.items(), key=lambda kv: (kv[0][0] != "cpu", kv[0])):
            n = sum(row[c] for c in OUTCOMES)
            body.append(f"| {tgt} | {exp} | {n} | " + " | ".join(str(row[c]) for c in OUTCOMES)
                        + f" | {row['seconds']:.1f} |")
        tot = self.totals()
        body.append(f"| **all** | | {sum(tot.values())} | " + " | ".join(str(tot[c]) for c in OUTCOMES) + " | |")
        return "\n".join(head + body)

    def mutation_table(self) -> str:
        kinds = sorted({k for k, _ in self.by_mutation})
        head = ["| mutation | " + " | ".join(OUTCOMES) + " |", "| --- |" + " ---: |" * len(OUTCOMES)]
        body = [f"| `{k}` | " + " | ".join(str(self.by_mutation.get((k, c), 0)) for c in OUTCOMES) + " |"
                for k in kinds]
        return "\n".join(head + body)


def _crashed(task, why: str) -> dict:
    seed, indices, _, cuda = task
    return {i: {"kind": "?", "name": f"fzm_{seed}_{i}", "mutation": "?", "expect": "?",
                "targets": {"cpu": ("crash", why, 0.0)}} for i in indices}


def run_mutants(seed: int, indices: list, workdir: str, jobs: int = 1, batch: int = 24, cuda: bool = True,
                out=sys.stdout, report: MutationReport | None = None) -> MutationReport:
    """Check mutants `indices` of `seed`; a task whose worker dies is re-run one mutant at a time."""
    from .fuzz_parallel import _pool
    report = report or MutationReport()
    tasks = [(seed, indices[b:b + batch], workdir, cuda) for b in range(0, len(indices), batch)]
    t0, done, every = time.perf_counter(), 0, max(batch, len(indices) // 10)
    nxt = every

    def emit(res):
        nonlocal done, nxt
        for i, entry in sorted(res.items()):
            report.add(seed, i, entry)
        done += len(res)
        if done >= nxt or done == len(indices):
            nxt = done + every
            print(f"[fuzz --mutate] {done}/{len(indices)} mutants, {len(report.failures)} failure(s), "
                  f"{time.perf_counter() - t0:.0f} s", file=out, flush=True)

    if jobs <= 1:
        for t in tasks:
            emit(check_task(t))
        return report
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool
    todo = list(reversed(tasks))
    while todo:
        suspects = []
        with _pool(jobs) as ex:   # at most `jobs` tasks in flight: a dying worker loses only those
            pending = {}
            while (todo or pending) and not suspects:
                while todo and len(pending) < jobs:
                    t = todo.pop()
                    pending[ex.submit(check_task, t)] = t
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    t = pending.pop(f)
                    try:
                        emit(f.result())
                    except BrokenProcessPool:
                        suspects.append(t)
                    except Exception as e:  # noqa: BLE001 - an error escaping the checks is a finding
                        emit(_crashed(t, f"{type(e).__name__}: {str(e)[:300]}"))
            suspects += list(pending.values())
        for t in suspects:   # each alone; one that kills its worker again, one mutant at a time
            for one in ([t] if _survives(t, emit) else [(t[0], [i], t[2], t[3]) for i in t[1]]):
                if one is not t and not _survives(one, emit):
                    emit(_crashed(one, "the worker process died (a crash, or a hang past the watchdog)"))
    return report


def _survives(task, emit) -> bool:
    """Run `task` in a worker of its own; False when the worker died."""
    from .fuzz_parallel import _pool
    with _pool(1) as ex:
        try:
            res = ex.submit(check_task, task).result()
        except Exception:  # noqa: BLE001 - BrokenProcessPool: the worker died
            return False
    emit(res)
    return True


def main(args) -> int:
    """`python -m tilecraft.testing.fuzz --mutate ...` (fuzz.main parses the arguments)."""
    import tempfile
    from .fuzz import default_jobs
    jobs = args.jobs or default_jobs()
    indices = list(args.only) if args.only is not None else list(range(args.count))
    workdir = tempfile.mkdtemp(prefix=f"tilecraft-mutate-{args.seed}-")
    t0 = time.perf_counter()
    report = run_mutants(args.seed, indices, workdir, jobs=jobs, batch=max(args.batch, 32),
                         cuda=args.target != "cpu-only")
    wall = time.perf_counter() - t0
    for tgt, (s, i, name), mutation, outcome, why in report.failures[:80]:
        print(f"[fuzz --mutate] {outcome.upper()} {name} on {tgt} ({mutation}): {why}\n"
              f"[fuzz --mutate]   reproduce: python -m tilecraft.testing.fuzz --mutate --seed {s} --only {i}")
    table, mtable = report.table(), report.mutation_table()
    print(table)
    summary = (f"{report.programs} mutants (seed {args.seed}, {jobs} worker(s)) in {wall:.0f} s: "
               f"{len(report.failures)} failure(s)")
    if args.table:
        with open(args.table, "w") as f:
            f.write(f"# fuzz --mutate: seed {args.seed}, {report.programs} mutated programs\n\n"
                    f"`python -m tilecraft.testing.fuzz {' '.join(sys.argv[1:])}`\n\n"
                    f"One row per target and expectation (tilecraft/testing/fuzz_mutate.py: `refuse`: an invalid "
                    f"program, which must be refused at the mutated line; `same`: a valid variant, which must "
                    f"compute the original's torch reference). CUDA targets are compile-only (NVRTC, no GPU).\n\n"
                    f"{table}\n\nPer mutation (all targets):\n\n{mtable}\n\n"
                    f"Failures (first 40):\n\n" + "\n".join(
                        f"- {name} on {tgt} ({mutation}): {outcome}: {why[:200]}"
                        for tgt, (_, _, name), mutation, outcome, why in report.failures[:40])
                    + f"\n\n{summary}\n")
    print(summary, flush=True)
    if not report.failures:
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if report.failures else 0
