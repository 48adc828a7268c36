"""The fuzzer's grammar: a random `spec` (JSON-able data) per program, rendered as a Python module
holding a `@T.prim_func`, its inputs and a torch reference of the same computation.

Program kinds (each with odd, ragged sizes, random dtypes, thread counts and names):

- ``ewise``: element-wise chains with casts and conditions over shared / fragment / global
  reads, with an optional serial or unrolled loop that folds more terms in;
- ``reduce``: sum / max / min / abssum / absmax along either dim, clear or accumulate, one tile
  per block or a serial loop over column tiles;
- ``rowwise``: softmax-shaped: a row reduction, an element-wise T.Parallel over the tile that
  reads the row vector, and a row sum of the result (layout inference's row vectors);
- ``cumsum``: prefix sums of shared tiles along either dim, forward or reverse, in place or not;
- ``copy``: copies between tensors of different shapes with offsets, ragged edges and casts,
  through shared, fragment or straight from global to global;
- ``gemm``: pipelined GEMMs with transposes, odd M/N/K, float16 / bfloat16 / float32 inputs,
  float32 or 16-bit accumulators, every warp policy, optionally a dynamic M or K;
- ``atomic``: row sums added atomically into a vector, or whole tiles added into a shared
  output region by every column block.

Variable names (parameters, buffers, loop variables, block indices, symbols) are drawn from
`NAMES`, a small pool of names C, CUDA or the printers already use: name collisions in the
generated code surface as wrong answers or compile errors here.  The module layout a program
renders to is fixed (`FZ_FUNC`, `FZ_OUTPUTS`, `FZ_TOL`, `fz_inputs`, `fz_reference`), so a
saved program is a regression test on its own.
"""
from __future__ import annotations

import json
import random

from .fuzz_expr import TORCH, Printer, expr_dtypes, fill_consts, random_expr

NAMES = ("k", "n", "m", "i", "j", "i1", "i2", "r", "e9", "tid", "int", "float", "half", "tc_tid",
         "tc_args", "tc_dims", "tc_entry", "threadIdx", "blockIdx", "blockDim", "acc", "red1", "x",
         "main", "C_local", "bx", "by", "kernel", "auto", "new", "delete", "template", "signed", "ko")
KINDS = ("ewise", "ewise", "reduce", "reduce", "rowwise", "rowwise", "cumsum", "copy", "copy", "gemm", "gemm",
         "atomic")
TILE = (8, 16, 32, 64)
FLOATS = ("float32", "float16", "bfloat16")
# tolerance class of a program: its least precise float dtype (fuzz_run.TOLERANCES)
PRECISION = ("bfloat16", "float16", "float32", "int32")


def random_spec(rng: random.Random, name: str, kind: str | None = None) -> dict:
    kind = kind or rng.choice(KINDS)
    spec = {"kind": kind, "name": name, "threads": rng.choice((32, 64, 128, 128, 256))}
    names = list(NAMES)
    rng.shuffle(names)
    spec["names"] = names[:14]
    spec["sym"] = rng.choice(NAMES)  # the C-side name of a dynamic dimension, may equal a variable's
    GEN[kind](rng, spec)
    return spec


def _size(rng, tile):
    return rng.choice((tile, tile * 2, tile + rng.randint(1, tile), rng.randint(tile, 3 * tile + 5)))


def _gen_ewise(rng, s):
    s["bm"], s["bn"] = rng.choice(TILE), rng.choice(TILE)
    while s["bm"] * s["bn"] > 2048:
        s["bn"] //= 2
    s["M"], s["N"] = _size(rng, s["bm"]), _size(rng, s["bn"])
    s["dx"], s["dy"] = rng.choice(FLOATS + ("int32",)), rng.choice(FLOATS + ("int32",))
    s["dz"] = rng.choice(FLOATS + ("int32",))
    s["stage"] = rng.choice(("shared", "fragment", "global"))
    s["out"] = rng.choice(("copy", "copy", "direct"))
    s["form"] = rng.choice(("assign", "assign", "if"))
    s["loop"] = rng.choice((None, None, "serial", "unroll"))
    s["trips"] = rng.randint(1, 3)
    s["dyn_m"] = rng.random() < 0.2
    leaves = {"x": "v", "y": "v", "li": "index", "lj": "index", "gi": "index"}
    s["expr"] = fill_consts(rng, random_expr(rng, leaves, rng.randint(1, 4)))
    s["expr2"] = fill_consts(rng, random_expr(rng, leaves, rng.randint(0, 2)))
    s["loop_expr"] = fill_consts(rng, random_expr(rng, {"x": "v", "t": "index"}, rng.randint(0, 2)))


def _gen_reduce(rng, s):
    s["bm"], s["bn"] = rng.choice(TILE), rng.choice(TILE)
    s["M"], s["N"] = _size(rng, s["bm"]), _size(rng, s["bn"])
    s["op"] = rng.choice(("sum", "max", "min", "abssum", "absmax"))
    s["dx"] = rng.choice(FLOATS + ("int32",))
    s["dsrc"] = rng.choice((s["dx"], "float32")) if s["dx"] != "int32" else "int32"
    s["ddst"] = rng.choice((s["dsrc"], "float32")) if s["dsrc"] != "int32" else "int32"
    s["mode"] = rng.choice(("tile", "tile", "loop"))
    s["dim"] = rng.choice((0, 1)) if s["mode"] == "tile" else 1
    s["clear"] = rng.random() < 0.5 if s["mode"] == "tile" else False
    s["init"] = rng.choice(("input", "fill"))
    s["fill"] = rng.choice((0.0, -1.5, 2.0))
    s["src_scope"] = rng.choice(("fragment", "fragment", "shared"))
    s["loop"] = rng.choice(("serial", "unroll"))


def _gen_cumsum(rng, s):
    s["bm"], s["bn"] = rng.choice(TILE[:3]), rng.choice(TILE[:3])
    s["M"], s["N"] = _size(rng, s["bm"]), _size(rng, s["bn"])
    s["dx"] = rng.choice(FLOATS + ("int32",))
    s["dim"], s["reverse"], s["inplace"] = rng.choice((0, 1)), rng.random() < 0.5, rng.random() < 0.3


def _gen_copy(rng, s):
    s["bm"], s["bn"] = rng.choice(TILE), rng.choice(TILE)
    s["M"], s["N"] = _size(rng, s["bm"]), _size(rng, s["bn"])
    s["M2"], s["N2"] = _size(rng, s["bm"]), _size(rng, s["bn"])
    s["off"] = [rng.choice((0, 0, 1, 3)), rng.choice((0, 0, 1, 5)), rng.choice((0, 0, 2)), rng.choice((0, 0, 1, 7))]
    s["dx"], s["dy"] = rng.choice(FLOATS + ("int32",)), rng.choice(FLOATS + ("int32",))
    s["via"] = rng.choice(("shared", "fragment", "global"))


def _gen_gemm(rng, s):
    s["dab"] = rng.choice(("float16", "float16", "bfloat16", "float32"))
    s["bm"], s["bn"] = rng.choice((16, 32, 64)), rng.choice((16, 32, 64))
    s["bk"] = rng.choice((16, 32)) if s["dab"] != "float32" else rng.choice((8, 16))
    s["M"], s["N"], s["K"] = _size(rng, s["bm"]), _size(rng, s["bn"]), _size(rng, s["bk"])
    s["ta"], s["tb"] = rng.random() < 0.3, rng.random() < 0.3
    s["dacc"] = rng.choice(("float32", "float32", s["dab"]))
    s["dc"] = rng.choice(("float32", s["dab"]))
    s["stages"] = rng.choice((0, 1, 2, 3))
    s["threads"] = rng.choice((64, 128, 128, 256))
    s["policy"] = rng.choice(("Square", "FullRow", "FullCol"))
    s["dyn"] = rng.choice((None, None, None, "M", "K"))
    s["clear"] = rng.choice(("clear", "fill"))


def _gen_atomic(rng, s):
    s["bm"], s["bn"] = rng.choice(TILE[:3]), rng.choice(TILE[:3])
    s["M"], s["N"] = _size(rng, s["bm"]), _size(rng, s["bn"])
    s["dx"] = rng.choice(("float32", "int32"))
    s["form"] = rng.choice(("rows", "tile"))


def _gen_rowwise(rng, s):
    s["bm"], s["bn"] = rng.choice(TILE[:3]), rng.choice((16, 32, 64))
    s["M"], s["N"] = _size(rng, s["bm"]), rng.randint(s["bn"] // 2 + 1, s["bn"])
    s["dx"] = rng.choice(FLOATS)
    s["dacc"] = rng.choice(("float32", "float32", s["dx"]))
    s["op"] = rng.choice(("sum", "max", "min", "abssum", "absmax"))
    exact = s["op"] in ("max", "min", "absmax")   # a sum's rounding differs between targets
    s["expr"] = fill_consts(rng, random_expr(rng, {"x": "v", "r": "v" if exact else "vx", "lj": "index"},
                                             rng.randint(1, 3)))


GEN = {"rowwise": _gen_rowwise, "ewise": _gen_ewise, "reduce": _gen_reduce, "cumsum": _gen_cumsum, "copy": _gen_copy,
       "gemm": _gen_gemm, "atomic": _gen_atomic}


# ---- rendering -----------------------------------------------------------------------------------

class _Src:
    def __init__(self):
        self.lines: list = []

    def __call__(self, depth: int, text: str):
        self.lines.append("    " * depth + text)


def render(spec: dict) -> str:
    """The Python module of `spec` (see the module docstring for its layout)."""
    s = _Src()
    head = RENDER[spec["kind"]](spec, s)
    body = "\n".join(s.lines)
    tol = _precision(head.pop("dtypes"))
    return (f'"""Fuzzed program {spec["name"]} ({spec["kind"]}); generated by tilecraft.testing.fuzz."""\n'
            f"import torch\n\nimport tilecraft.language as T\n"
            f"from tilecraft.testing.fuzz_ref import acc_dtype, combine, index_grids, pad, pad1, rand, reduce, tiles\n\n"
            f"FZ_SPEC = {json.dumps(spec, sort_keys=True)!r}\n{head.get('globals', '')}\n\n{body}\n\n"
            f"FZ_FUNC = {spec['name']}\nFZ_OUTPUTS = {head['outputs']!r}\nFZ_TOL = {tol!r}\n")


def _precision(dtypes) -> str:
    for d in PRECISION:
        if d in dtypes:
            return d
    return "float32"


def _t(d):
    return TORCH[d]


def _names(spec, *roles):
    return spec["names"][:len(roles)]


def _render_ewise(sp, s):
    X, Y, Z, Xs, Ys, Zf, i, j, bx, by, t = _names(sp, *"X Y Z Xs Ys Zf i j bx by t".split())
    bm, bn, N = sp["bm"], sp["bn"], sp["N"]
    M = "FZ_M" if sp["dyn_m"] else sp["M"]
    glob = f"FZ_M = T.dynamic({sp['sym']!r})\n" if sp["dyn_m"] else ""
    if sp["stage"] == "global":
        xk, yk = f"{X}[{by} * {bm} + {i}, {bx} * {bn} + {j}]", f"{Y}[{by} * {bm} + {i}, {bx} * {bn} + {j}]"
    else:
        xk, yk = f"{Xs}[{i}, {j}]", f"{Ys}[{i}, {j}]"
    leaves = {"x": (xk, "x", sp["dx"]), "y": (yk, "y", sp["dy"]), "li": (i, "li", "index"),
              "lj": (j, "lj", "index"), "gi": (f"({by} * {bm} + {i})", "gi", "index")}
    pr = Printer(leaves)
    e = pr.print(sp["expr"])
    dz = sp["dz"] if not (sp["dz"] == "int32" and e[2] != "int32") else e[2]
    ek, er, _ = pr._as(e, dz)
    e2k, e2r, _ = pr._as(pr.print(sp["expr2"]), dz)
    loop = sp["loop"] if sp["out"] == "copy" else None
    s(0, "@T.prim_func")
    s(0, f"def {sp['name']}({X}: T.Tensor(({M}, {N}), \"{sp['dx']}\"), {Y}: T.Tensor(({M}, {N}), \"{sp['dy']}\"), "
         f"{Z}: T.Tensor(({M}, {N}), \"{dz}\")):")
    s(1, f"with T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm}), threads={sp['threads']}) as ({bx}, {by}):")
    if sp["stage"] != "global":
        alloc = "T.alloc_shared" if sp["stage"] == "shared" else "T.alloc_fragment"
        s(2, f"{Xs} = {alloc}(({bm}, {bn}), \"{sp['dx']}\")")
        s(2, f"{Ys} = {alloc}(({bm}, {bn}), \"{sp['dy']}\")")
        s(2, f"T.copy({X}[{by} * {bm}, {bx} * {bn}], {Xs})")
        s(2, f"T.copy({Y}[{by} * {bm}, {bx} * {bn}], {Ys})")
    dst = f"{Zf}[{i}, {j}]" if sp["out"] == "copy" else f"{Z}[{by} * {bm} + {i}, {bx} * {bn} + {j}]"
    if sp["out"] == "copy":
        s(2, f"{Zf} = T.alloc_fragment(({bm}, {bn}), \"{dz}\")")
    s(2, f"for {i}, {j} in T.Parallel({bm}, {bn}):")
    if sp["form"] == "if":
        ck, cr = pr.cond(["gtc", "x", 0.0])
        s(3, f"if {ck}:")
        s(4, f"{dst} = {ek}")
        s(3, "else:")
        s(4, f"{dst} = {e2k}")
        ref = f"torch.where({cr}, {er}, {e2r})"
    else:
        s(3, f"{dst} = {ek}")
        ref = er
    loop_ref = []
    if loop:
        lp = Printer({"x": (xk, "x", sp["dx"]), "t": (t, "t", "index")})
        lk, lr, _ = lp._as(lp.print(sp["loop_expr"]), dz)
        s(2, f"for {t} in T.{loop}({sp['trips']}):")
        s(3, f"for {i}, {j} in T.Parallel({bm}, {bn}):")
        s(4, f"{Zf}[{i}, {j}] = {Zf}[{i}, {j}] + {lk}")
        loop_ref = [f"    for t in range({sp['trips']}):",
                    f"        t = torch.full(z.shape, t, dtype=torch.int32)",
                    f"        z = z + {lr}"]
    if sp["out"] == "copy":
        s(2, f"T.copy({Zf}, {Z}[{by} * {bm}, {bx} * {bn}])")
    s(0, "")
    s(0, "")
    s(0, "def fz_inputs(g):")
    s(1, f"return [rand(({sp['M']}, {N}), {_t(sp['dx'])}, g), rand(({sp['M']}, {N}), {_t(sp['dy'])}, g), "
         f"rand(({sp['M']}, {N}), {_t(dz)}, g)]")
    s(0, "")
    s(0, "")
    s(0, "def fz_reference(X, Y, Z):")
    s(1, f"x, y = pad(X, {bm}, {bn}), pad(Y, {bm}, {bn})")
    s(1, f"li, lj, gi, gj = index_grids(x.shape[0], x.shape[1], {bm}, {bn})")
    s(1, f"z = ({ref}).to({_t(dz)})")
    for line in loop_ref:
        s(0, line)
    s(1, f"return {{2: z[:{sp['M']}, :{N}]}}")
    dts = {dz} | expr_dtypes(sp["expr"], leaves) | (expr_dtypes(sp["expr2"], leaves) if sp["form"] == "if" else set())
    return {"outputs": [2], "globals": glob, "dtypes": dts}


def _render_reduce(sp, s):
    X, D, R, Xf, Rf, bx, by, ko = _names(sp, *"X D R Xf Rf bx by ko".split())
    bm, bn, M, N, op = sp["bm"], sp["bn"], sp["M"], sp["N"], sp["op"]
    nbx, nby = -(-N // bn), -(-M // bm)
    alloc = "T.alloc_fragment" if sp["src_scope"] == "fragment" else "T.alloc_shared"
    s(0, "@T.prim_func")
    if sp["mode"] == "tile":
        rshape, rlen, at = ((nbx, M), bm, f"[{bx}, {by} * {bm}]") if sp["dim"] == 1 else \
            ((nby, N), bn, f"[{by}, {bx} * {bn}]")
        s(0, f"def {sp['name']}({X}: T.Tensor(({M}, {N}), \"{sp['dx']}\"), {D}: T.Tensor({rshape}, \"{sp['ddst']}\"), "
             f"{R}: T.Tensor({rshape}, \"{sp['ddst']}\")):")
        s(1, f"with T.Kernel({nbx}, {nby}, threads={sp['threads']}) as ({bx}, {by}):")
    else:
        rshape, rlen, at = (M,), bm, f"[{by} * {bm}]"
        s(0, f"def {sp['name']}({X}: T.Tensor(({M}, {N}), \"{sp['dx']}\"), {D}: T.Tensor({rshape}, \"{sp['ddst']}\"), "
             f"{R}: T.Tensor({rshape}, \"{sp['ddst']}\")):")
        s(1, f"with T.Kernel({nby}, threads={sp['threads']}) as {by}:")
    s(2, f"{Xf} = {alloc}(({bm}, {bn}), \"{sp['dsrc']}\")")
    s(2, f"{Rf} = T.alloc_fragment(({rlen},), \"{sp['ddst']}\")")
    init_ref = None
    if not sp["clear"]:
        if sp["init"] == "input":
            s(2, f"T.copy({D}{at}, {Rf})")
            init_ref = "d"
        else:
            s(2, f"T.fill({Rf}, {sp['fill']})")
            init_ref = f"torch.full_like(d, {sp['fill']})"
    if sp["mode"] == "tile":
        s(2, f"T.copy({X}[{by} * {bm}, {bx} * {bn}], {Xf})")
        s(2, f"T.reduce_{op}({Xf}, {Rf}, dim={sp['dim']}, clear={sp['clear']})")
    else:
        s(2, f"for {ko} in T.{sp['loop']}({nbx}):")
        s(3, f"T.copy({X}[{by} * {bm}, {ko} * {bn}], {Xf})")
        s(3, f"T.reduce_{op}({Xf}, {Rf}, dim=1, clear=False)")
    s(2, f"T.copy({Rf}, {R}{at})")
    s(0, "")
    s(0, "")
    s(0, "def fz_inputs(g):")
    s(1, f"return [rand(({M}, {N}), {_t(sp['dx'])}, g), rand({rshape}, {_t(sp['ddst'])}, g), "
         f"rand({rshape}, {_t(sp['ddst'])}, g)]")
    s(0, "")
    s(0, "")
    s(0, "def fz_reference(X, D, R):")
    s(1, f"src = {_t(sp['dsrc'])}")
    s(1, "acc = acc_dtype(src)")
    s(1, f"t = tiles(X, {bm}, {bn}).to(src).to(acc)   # (row tiles, bm, col tiles, bn)")
    s(1, f"d = {'pad1(D, %d)' % bm if sp['mode'] == 'loop' else 'D'}")
    if sp["mode"] == "tile":
        if sp["dim"] == 1:
            s(1, f"red = reduce({op!r}, t, 3).permute(2, 0, 1).reshape({nbx}, -1)   # (col tiles, padded M)")
            s(1, f"d = torch.cat([d, torch.zeros({nbx}, red.shape[1] - {M}, dtype=d.dtype)], 1)")
        else:
            s(1, f"red = reduce({op!r}, t, 1).reshape({nby}, -1)   # (row tiles, padded N)")
            s(1, f"d = torch.cat([d, torch.zeros({nby}, red.shape[1] - {N}, dtype=d.dtype)], 1)")
        if init_ref is None:
            s(1, f"out = red.to({_t(sp['ddst'])})")
        else:
            s(1, f"out = combine({op!r}, ({init_ref}).to(acc), red).to({_t(sp['ddst'])})")
        s(1, f"return {{2: out[:, :{rshape[1]}]}}")
    else:
        s(1, f"out = ({init_ref}).to({_t(sp['ddst'])})")
        s(1, f"for c in range({nbx}):")
        s(2, f"out = combine({op!r}, out.to(acc), reduce({op!r}, t[:, :, c, :], 2).reshape(-1)).to({_t(sp['ddst'])})")
        s(1, f"return {{2: out[:{M}]}}")
    return {"outputs": [2], "dtypes": {sp["dx"], sp["dsrc"], sp["ddst"]}}


def _render_cumsum(sp, s):
    X, Y, Xs, Ys, bx, by = _names(sp, *"X Y Xs Ys bx by".split())
    bm, bn, M, N, d = sp["bm"], sp["bn"], sp["M"], sp["N"], sp["dx"]
    s(0, "@T.prim_func")
    s(0, f"def {sp['name']}({X}: T.Tensor(({M}, {N}), \"{d}\"), {Y}: T.Tensor(({M}, {N}), \"{d}\")):")
    s(1, f"with T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm}), threads={sp['threads']}) as ({bx}, {by}):")
    s(2, f"{Xs} = T.alloc_shared(({bm}, {bn}), \"{d}\")")
    s(2, f"T.copy({X}[{by} * {bm}, {bx} * {bn}], {Xs})")
    if sp["inplace"]:
        s(2, f"T.cumsum({Xs}, dim={sp['dim']}, reverse={sp['reverse']})")
        out = Xs
    else:
        s(2, f"{Ys} = T.alloc_shared(({bm}, {bn}), \"{d}\")")
        s(2, f"T.cumsum({Xs}, {Ys}, dim={sp['dim']}, reverse={sp['reverse']})")
        out = Ys
    s(2, f"T.copy({out}, {Y}[{by} * {bm}, {bx} * {bn}])")
    s(0, "")
    s(0, "")
    s(0, "def fz_inputs(g):")
    s(1, f"return [rand(({M}, {N}), {_t(d)}, g), rand(({M}, {N}), {_t(d)}, g)]")
    s(0, "")
    s(0, "")
    s(0, "def fz_reference(X, Y):")
    s(1, f"t = tiles(X, {bm}, {bn}).to(acc_dtype({_t(d)}))")
    dim = 1 if sp["dim"] == 0 else 3
    if sp["reverse"]:
        s(1, f"c = t.flip({dim}).cumsum({dim}).flip({dim})")
    else:
        s(1, f"c = t.cumsum({dim})")
    s(1, f"out = c.to({_t(d)}).reshape({-(-M // bm) * bm}, {-(-N // bn) * bn})")
    s(1, f"return {{1: out[:{M}, :{N}]}}")
    return {"outputs": [1], "dtypes": {d}}


def _render_copy(sp, s):
    X, Y, S, bx, by = _names(sp, *"X Y S bx by".split())
    bm, bn, M, N, M2, N2 = sp["bm"], sp["bn"], sp["M"], sp["N"], sp["M2"], sp["N2"]
    ox, oy, px, py = sp["off"]
    gm, gn = -(-max(M, M2) // bm), -(-max(N, N2) // bn)
    src = f"{X}[{by} * {bm} + {ox}, {bx} * {bn} + {oy}]"
    dst = f"{Y}[{by} * {bm} + {px}, {bx} * {bn} + {py}]"
    s(0, "@T.prim_func")
    s(0, f"def {sp['name']}({X}: T.Tensor(({M}, {N}), \"{sp['dx']}\"), {Y}: T.Tensor(({M2}, {N2}), \"{sp['dy']}\")):")
    s(1, f"with T.Kernel({gn}, {gm}, threads={sp['threads']}) as ({bx}, {by}):")
    if sp["via"] == "global":
        s(2, f"T.copy({X}[{by} * {bm} + {ox}:{by} * {bm} + {ox + bm}, {bx} * {bn} + {oy}:{bx} * {bn} + {oy + bn}], "
             f"{Y}[{by} * {bm} + {px}:{by} * {bm} + {px + bm}, {bx} * {bn} + {py}:{bx} * {bn} + {py + bn}])")
    else:
        alloc = "T.alloc_shared" if sp["via"] == "shared" else "T.alloc_fragment"
        s(2, f"{S} = {alloc}(({bm}, {bn}), \"{sp['dx']}\")")
        s(2, f"T.copy({src}, {S})")
        s(2, f"T.copy({S}, {dst})")
    s(0, "")
    s(0, "")
    s(0, "def fz_inputs(g):")
    s(1, f"return [rand(({M}, {N}), {_t(sp['dx'])}, g), rand(({M2}, {N2}), {_t(sp['dy'])}, g)]")
    s(0, "")
    s(0, "")
    s(0, "def fz_reference(X, Y):")
    s(1, "out = Y.clone()")
    s(1, f"for by in range({gm}):")
    s(2, f"for bx in range({gn}):")
    s(3, f"r0, c0, r1, c1 = by * {bm} + {ox}, bx * {bn} + {oy}, by * {bm} + {px}, bx * {bn} + {py}")
    s(3, f"tile = torch.zeros(({bm}, {bn}), dtype=X.dtype)   # zero-filled past X's edges")
    s(3, f"part = X[r0:r0 + {bm}, c0:c0 + {bn}]")
    s(3, "tile[:part.shape[0], :part.shape[1]] = part")
    s(3, f"dst = out[r1:r1 + {bm}, c1:c1 + {bn}]   # clipped at Y's edges")
    s(3, f"dst[:] = tile[:dst.shape[0], :dst.shape[1]].to({_t(sp['dy'])})")
    s(1, "return {1: out}")
    return {"outputs": [1], "dtypes": {sp["dx"], sp["dy"]}}


def _render_gemm(sp, s):
    A, B, C, As, Bs, Cf, bx, by, ko = _names(sp, *"A B C As Bs Cf bx by ko".split())
    bm, bn, bk, M, N, K = sp["bm"], sp["bn"], sp["bk"], sp["M"], sp["N"], sp["K"]
    Ms = "FZ_M" if sp["dyn"] == "M" else M
    Ks = "FZ_K" if sp["dyn"] == "K" else K
    glob = f"FZ_{sp['dyn']} = T.dynamic({sp['sym']!r})\n" if sp["dyn"] else ""
    ash, a_tile = ((Ks, Ms), (bk, bm)) if sp["ta"] else ((Ms, Ks), (bm, bk))
    bsh, b_tile = ((N, Ks), (bn, bk)) if sp["tb"] else ((Ks, N), (bk, bn))
    a_at = f"{A}[{ko} * {bk}, {by} * {bm}]" if sp["ta"] else f"{A}[{by} * {bm}, {ko} * {bk}]"
    b_at = f"{B}[{bx} * {bn}, {ko} * {bk}]" if sp["tb"] else f"{B}[{ko} * {bk}, {bx} * {bn}]"
    s(0, "@T.prim_func")
    s(0, f"def {sp['name']}({A}: T.Tensor(({ash[0]}, {ash[1]}), \"{sp['dab']}\"), "
         f"{B}: T.Tensor(({bsh[0]}, {bsh[1]}), \"{sp['dab']}\"), {C}: T.Tensor(({Ms}, {N}), \"{sp['dc']}\")):")
    s(1, f"with T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({Ms}, {bm}), threads={sp['threads']}) as ({bx}, {by}):")
    s(2, f"{As} = T.alloc_shared({a_tile}, \"{sp['dab']}\")")
    s(2, f"{Bs} = T.alloc_shared({b_tile}, \"{sp['dab']}\")")
    s(2, f"{Cf} = T.alloc_fragment(({bm}, {bn}), \"{sp['dacc']}\")")
    s(2, f"T.clear({Cf})" if sp["clear"] == "clear" else f"T.fill({Cf}, 0)")
    s(2, f"for {ko} in T.Pipelined(T.ceildiv({Ks}, {bk}), num_stages={sp['stages']}):")
    s(3, f"T.copy({a_at}, {As})")
    s(3, f"T.copy({b_at}, {Bs})")
    extra = ""
    s(3, f"T.gemm({As}, {Bs}, {Cf}, transpose_A={sp['ta']}, transpose_B={sp['tb']}, "
         f"policy=T.GemmWarpPolicy.{sp['policy']}{extra})")
    s(2, f"T.copy({Cf}, {C}[{by} * {bm}, {bx} * {bn}])")
    s(0, "")
    s(0, "")
    s(0, "def fz_inputs(g):")
    ashape = (K, M) if sp["ta"] else (M, K)
    bshape = (N, K) if sp["tb"] else (K, N)
    s(1, f"return [rand({ashape}, {_t(sp['dab'])}, g), rand({bshape}, {_t(sp['dab'])}, g), "
         f"rand(({M}, {N}), {_t(sp['dc'])}, g)]")
    s(0, "")
    s(0, "")
    s(0, "def fz_reference(A, B, C):")
    s(1, f"a = pad(A.T if {sp['ta']} else A, {bm}, {bk}).float()")
    s(1, f"b = pad(B.T if {sp['tb']} else B, {bk}, {bn}).float()")
    s(1, f"acc = torch.zeros(a.shape[0], b.shape[1]).to({_t(sp['dacc'])})")
    s(1, f"for k0 in range(0, a.shape[1], {bk}):   # the accumulator is rounded once per k-tile")
    s(2, f"acc = (acc.float() + a[:, k0:k0 + {bk}] @ b[k0:k0 + {bk}, :]).to({_t(sp['dacc'])})")
    s(1, f"return {{2: acc[:{M}, :{N}].to({_t(sp['dc'])})}}")
    return {"outputs": [2], "globals": glob, "dtypes": {sp["dab"], sp["dacc"], sp["dc"]}}


def _render_atomic(sp, s):
    X, O, Xf, Rf, bx, by, i = _names(sp, *"X O Xf Rf bx by i".split())
    bm, bn, M, N, d = sp["bm"], sp["bn"], sp["M"], sp["N"], sp["dx"]
    oshape = (M,) if sp["form"] == "rows" else (M, bn)
    s(0, "@T.prim_func")
    s(0, f"def {sp['name']}({X}: T.Tensor(({M}, {N}), \"{d}\"), {O}: T.Tensor({oshape}, \"{d}\")):")
    s(1, f"with T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm}), threads={sp['threads']}) as ({bx}, {by}):")
    s(2, f"{Xf} = T.alloc_fragment(({bm}, {bn}), \"{d}\")")
    s(2, f"T.copy({X}[{by} * {bm}, {bx} * {bn}], {Xf})")
    if sp["form"] == "rows":
        s(2, f"{Rf} = T.alloc_fragment(({bm},), \"{d}\")")
        s(2, f"T.reduce_sum({Xf}, {Rf}, dim=1)")
        s(2, f"for {i} in T.Parallel({bm}):")
        s(3, f"T.atomic_add({O}[{by} * {bm} + {i}], {Rf}[{i}])")
    else:
        s(2, f"T.atomic_add({O}[{by} * {bm}, 0], {Xf})")
    s(0, "")
    s(0, "")
    s(0, "def fz_inputs(g):")
    s(1, f"return [rand(({M}, {N}), {_t(d)}, g), rand({oshape}, {_t(d)}, g)]")
    s(0, "")
    s(0, "")
    s(0, "def fz_reference(X, O):")
    s(1, f"t = tiles(X, {bm}, {bn})")
    if sp["form"] == "rows":
        s(1, f"return {{1: O + t.sum((2, 3)).reshape(-1)[:{M}]}}")
    else:
        s(1, f"return {{1: O + t.sum(2).reshape(-1, {bn})[:{M}]}}")
    return {"outputs": [1], "dtypes": {d}}


def _render_rowwise(sp, s):
    """softmax-shaped: a row reduction, a T.Parallel over the tile using it (a replicated row vector),
    a row sum of the result."""
    X, Y, S, Xf, Rf, Yf, Sf, by, i, j = _names(sp, *"X Y S Xf Rf Yf Sf by i j".split())
    bm, bn, M, N, d, a, op = sp["bm"], sp["bn"], sp["M"], sp["N"], sp["dx"], sp["dacc"], sp["op"]
    pr = Printer({"x": (f"{Xf}[{i}, {j}]", "x", a), "r": (f"{Rf}[{i}]", "r", a), "lj": (j, "lj", "index")})
    ek, er, _ = pr._as(pr.print(sp["expr"]), a)
    s(0, "@T.prim_func")
    s(0, f"def {sp['name']}({X}: T.Tensor(({M}, {N}), \"{d}\"), {Y}: T.Tensor(({M}, {N}), \"{a}\"), "
         f"{S}: T.Tensor(({M},), \"{a}\")):")
    s(1, f"with T.Kernel(T.ceildiv({M}, {bm}), threads={sp['threads']}) as {by}:")
    for buf, shape in ((Xf, (bm, bn)), (Rf, (bm,)), (Yf, (bm, bn)), (Sf, (bm,))):
        s(2, f"{buf} = T.alloc_fragment({shape}, \"{a}\")")
    s(2, f"T.copy({X}[{by} * {bm}, 0], {Xf})")
    s(2, f"T.reduce_{op}({Xf}, {Rf}, dim=1)")
    s(2, f"for {i}, {j} in T.Parallel({bm}, {bn}):")
    s(3, f"{Yf}[{i}, {j}] = {ek}")
    s(2, f"T.reduce_sum({Yf}, {Sf}, dim=1)")
    s(2, f"T.copy({Yf}, {Y}[{by} * {bm}, 0])")
    s(2, f"T.copy({Sf}, {S}[{by} * {bm}])")
    s(0, "")
    s(0, "")
    s(0, "def fz_inputs(g):")
    s(1, f"return [rand(({M}, {N}), {_t(d)}, g), rand(({M}, {N}), {_t(a)}, g), rand(({M},), {_t(a)}, g)]")
    s(0, "")
    s(0, "")
    s(0, "def fz_reference(X, Y, S):")
    s(1, f"x = pad(X, {bm}, {bn}).to({_t(a)})   # zeros past the edges take part, as in the tile")
    s(1, f"r = reduce({op!r}, x.to(acc_dtype(x.dtype)), 1).to({_t(a)})[:, None].expand(x.shape)")
    s(1, f"li, lj, gi, gj = index_grids(x.shape[0], x.shape[1], {bm}, {bn})")
    s(1, f"y = ({er}).to({_t(a)})")
    s(1, f"s = y.to(acc_dtype(y.dtype)).sum(1).to({_t(a)})")
    s(1, f"return {{1: y[:{M}, :{N}], 2: s[:{M}]}}")
    return {"outputs": [1, 2], "dtypes": {d, a} | expr_dtypes(sp["expr"], pr.leaves)}


RENDER = {"rowwise": _render_rowwise, "ewise": _render_ewise, "reduce": _render_reduce, "cumsum": _render_cumsum, "copy": _render_copy,
          "gemm": _render_gemm, "atomic": _render_atomic}
