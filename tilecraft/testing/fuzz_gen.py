"""The fuzzer's grammar: a random `spec` (JSON-able data) per program, rendered as a Python module
holding a `@T.prim_func`, its inputs and a torch reference of the same computation.

Program kinds (each with odd, ragged sizes, random dtypes, thread counts and names):

- ``ewise``: element-wise chains with casts and conditions over shared / fragment / global
  reads, with an optional serial or unrolled loop that folds more terms in;
- ``reduce``: sum / max / min / abssum / absmax (and bitand / bitor / bitxor of int32 tiles) along either dim, clear or accumulate, one tile
  per block or a serial loop over column tiles (``pair``: two shared tiles copied at the loop's top,
  the second read at its end -- the loop-carried barrier insert_syncs once missed);
- ``rowwise``: softmax-shaped: a row reduction, an element-wise T.Parallel over the tile that
  reads the row vector, and a row sum of the result (layout inference's row vectors);
- ``cumsum``: prefix sums of shared tiles along either dim, forward or reverse, in place or not;
- ``copy``: copies between tensors of different shapes with offsets, ragged edges and casts,
  through shared, fragment or straight from global to global;
- ``gemm``: pipelined GEMMs with transposes, odd M/N/K, float16 / bfloat16 / float32 inputs,
  float32 or 16-bit accumulators, every warp policy, optionally a dynamic M or K, and sometimes
  (``tail``) A's shared tile copied out after the loop (it holds the last k-tile: the pipelined
  loop's tile is then read outside the loop, through whichever stage held it);
- ``atomic``: row sums added atomically into a vector, or whole tiles added into a shared
  output region by every column block;
- ``stages``: a tensor written by every block, then read mirrored (other blocks' elements) after
  a grid-wide boundary -- a second `T.Kernel` of the program or `T.sync_grid()` -- optionally
  through a flat view `T.Tensor((M*N,), dtype, Y.data)`;
- ``chain``: two GEMMs in a row (FlashAttention's shape): S = A·B, an element-wise P = f(S, v[j])
  in one or two T.Parallel nests, then P·Dᵀ or P·Bᵀ -- the second gemm takes its A operand from
  registers and may read the first gemm's shared tile again, so wgmma and mma.sync paths meet on
  one tile (the kernels where a wrong dK was found, 2026-11-30).

Variable names (parameters, buffers, loop variables, block indices, symbols) are drawn from
`NAMES`, a small pool of names C, CUDA or the printers already use: name collisions in the
generated code surface as wrong answers or compile errors here.  The module layout a program
renders to is fixed (`FZ_FUNC`, `FZ_OUTPUTS`, `FZ_TOL`, `fz_inputs`, `fz_reference`), so a
saved program is a regression test on its own.
"""
from __future__ import annotations

import random

from .fuzz_expr import fill_consts, random_expr
from .fuzz_render import render  # noqa: F401 - render(spec) lives next to the grammar for callers

NAMES = ("k", "n", "m", "i", "j", "i1", "i2", "r", "e9", "tid", "int", "float", "half", "tc_tid",
         "tc_args", "tc_dims", "tc_entry", "threadIdx", "blockIdx", "blockDim", "acc", "red1", "x",
         "main", "C_local", "bx", "by", "kernel", "auto", "new", "delete", "template", "signed", "ko")
KINDS = ("ewise", "ewise", "reduce", "reduce", "rowwise", "rowwise", "cumsum", "copy", "copy", "gemm", "gemm",
         "atomic", "chain", "stages")
TILE = (8, 16, 32, 64)
FLOATS = ("float32", "float16", "bfloat16")


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
    if s["dx"] == "int32" and rng.random() < 0.5:   # integer tiles: the bitwise reductions half the time
        s["op"] = rng.choice(("bitand", "bitor", "bitxor"))
    s["dsrc"] = rng.choice((s["dx"], "float32")) if s["dx"] != "int32" else "int32"
    s["ddst"] = rng.choice((s["dsrc"], "float32")) if s["dsrc"] != "int32" else "int32"
    s["mode"] = rng.choice(("tile", "tile", "loop"))
    s["dim"] = rng.choice((0, 1)) if s["mode"] == "tile" else 1
    s["clear"] = rng.random() < 0.5 if s["mode"] == "tile" else False
    s["init"] = rng.choice(("input", "fill"))
    s["fill"] = rng.choice((0.0, -1.5, 2.0))
    s["src_scope"] = rng.choice(("fragment", "fragment", "shared"))
    s["loop"] = rng.choice(("serial", "unroll"))
    s["pair"] = s["mode"] == "loop" and s["src_scope"] == "shared" and rng.random() < 0.5


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
    if rng.random() < 0.5:
        return _gen_gemm_tensor_core(rng, s)
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
    s["tail"] = s["dyn"] is None and rng.random() < 0.25


def _gen_gemm_tensor_core(rng, s):
    """A GEMM shaped for the tensor-core paths: fp16/bf16 in, fp32 accumulator, whole warpgroups
    along block_M, so sm_80 takes mma.sync and sm_90a wgmma; static sizes whose rows are multiples
    of 16 bytes (still ragged against the tiles), so the pipelined loop can load by TMA and the
    warp-specialized variant can split it."""
    s["dab"] = rng.choice(("float16", "bfloat16"))
    s["dacc"], s["dc"] = "float32", rng.choice(("float32", s["dab"]))
    s["bm"], s["bn"], s["bk"] = rng.choice((64, 64, 128)), rng.choice((16, 32, 64, 128)), rng.choice((16, 32, 64))
    s["threads"] = 128 * rng.choice((1, s["bm"] // 64))
    readme = rng.random() < 0.25   # the README's tile: on sm_90a split as two blocks per SM (transform/pipelining/warp_specialized.py)
    if readme:
        s["bm"], s["bn"], s["bk"], s["threads"] = 128, 128, rng.choice((16, 32, 32)), 128
    s["M"] = _size(rng, s["bm"])
    s["N"], s["K"] = (8 * -(-_size(rng, t) // 8) for t in (s["bn"], s["bk"]))
    s["ta"], s["tb"] = rng.random() < 0.3, rng.random() < 0.3
    s["stages"] = rng.choice((2, 3, 3, 4) if readme else (0, 1, 2, 3, 3))
    s["policy"] = rng.choice(("Square", "FullRow", "FullCol"))
    s["dyn"] = rng.choice((None, None, None, "M"))
    s["clear"] = rng.choice(("clear", "fill"))
    s["tail"] = s["dyn"] is None and rng.random() < 0.25


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


def _gen_chain(rng, s):
    s["names"] = rng.sample(NAMES, 15)
    s["dab"] = rng.choice(("float16", "bfloat16"))
    s["bm"] = rng.choice((64, 64, 128))
    s["threads"] = 128 * rng.choice((1, s["bm"] // 64))
    s["bk"], s["bn"] = rng.choice((16, 32, 64)), rng.choice((16, 32, 64, 128))
    s["bd"] = rng.choice((16, 32, 64, 128))
    s["M"] = _size(rng, s["bm"])
    s["share"] = rng.random() < 0.5      # the second gemm reads B's shared tile (transposed) again
    s["nests"] = rng.choice((1, 2))       # two nests: P is no plain element-wise image of S
    s["scale"] = rng.choice((0.5, 0.125, 1.0, -0.25))


def _gen_stages(rng, s):
    s["bm"], s["bn"] = rng.choice(TILE[:3]), rng.choice(TILE[:3])
    s["M"], s["N"] = _size(rng, s["bm"]), _size(rng, s["bn"])
    s["dx"] = rng.choice(("float32", "float16", "int32"))
    s["form"] = rng.choice(("kernels", "grid_sync"))
    s["view"] = rng.random() < 0.5
    s["threads2"] = rng.choice((32, 64, 128))


GEN = {"stages": _gen_stages, "chain": _gen_chain, "rowwise": _gen_rowwise, "ewise": _gen_ewise, "reduce": _gen_reduce, "cumsum": _gen_cumsum, "copy": _gen_copy,
       "gemm": _gen_gemm, "atomic": _gen_atomic}
