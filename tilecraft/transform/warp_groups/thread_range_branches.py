"""`if tx < 128: ... elif tx < 256: ... else: ...` as warp-group branches (CUDA targets).

TileLang programs specialize warp groups by hand with `T.ws(g)` or with `if`s on the thread index
(`tx = T.get_thread_binding()`); TileLang bounds each branch's threads from its condition, and tile
ops inside are spread over those threads only.  Here such an `if` becomes the `WarpGroupScope` of
`T.ws` (ir/hopper.py): when its condition bounds the (1-D) thread index (comparisons with
constants, joined by `and`) and its branch holds tile work (tile ops, T.Parallel loops,
T.set_max_nreg).  Bounds on multiples of 128 give a branch of whole warp groups; other bounds on
multiples of 32 a branch of whole warps (`lanes`: `if T.get_thread_binding() < 32:` in a block of
96, as TileLang's mHC pre-block example does), whose tile ops are spread over its warps the same
way (no tensor-core gemm or register budget there: warp_groups.check_scope).  An `else` becomes the
branch of the remaining threads when they are contiguous, an `elif` chain a branch per condition
(each thread runs one branch of the chain, so their order does not matter): an `elif` runs on
the threads its condition bounds among those the conditions before it left, which need not be
contiguous themselves (TileLang's Blackwell FlashAttention: `if 128 <= tid < 160: DMA
elif 160 <= tid < 192: MMA elif tid < 128: softmax`), as long as the branch's own threads are.  Anything else stays
an ordinary `if`, except one whose condition reads the thread index and whose branches hold tile
work that lowering spreads over the whole block (`refuse_partial_branch`): its tile ops would be
lowered for every thread of the block and the share of the threads that skip the branch never
done, a silent wrong answer; it is an error at the user's line instead.
"""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import Binary, Cast, Const, For, If, Let, Var, collect, seq
from ...ir.buffer import Region
from ...ir.hopper import WARP_GROUP, SetMaxNreg, WarpGroupScope
from ...ir.tileop import AtomicAdd, Copy, Cumsum, Fill, Gemm, Reduce, TileOp

# Tile ops whose CUDA lowering gives each thread of the block a share of the tile: run by some of
# the block's threads only, the others' shares are never done.  (An mbarrier arrive, a print or a
# one-element atomic is per thread: fine under `if tx == 0:`.)
_SPREAD = (Copy, Gemm, Fill, Reduce, Cumsum)
WARP = 32


def thread_aliases(k) -> set:
    """The kernel's x thread index and the lets bound to it (`tx = T.get_thread_binding()`), when
    the block is one-dimensional (so threadIdx.x is the flat index); else empty."""
    if tuple(k.threads[1:]) not in ((), (1,), (1, 1)) or not k.thread_vars:
        return set()
    names = {k.thread_vars[0]}
    for s in collect(k.body, lambda n: isinstance(n, Let)):
        if isinstance(s.value, Var) and s.value in names:
            names.add(s.var)
    return names


def _interval(cond, tids, block) -> tuple | None:
    """[lo, hi) of the thread indices for which `cond` holds, or None when it is not such a bound."""
    while isinstance(cond, Cast):
        cond = cond.value
    if not isinstance(cond, Binary):
        return None
    if cond.op == "and":
        a, b = _interval(cond.a, tids, block), _interval(cond.b, tids, block)
        return None if a is None or b is None else (max(a[0], b[0]), min(a[1], b[1]))
    flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}
    op, x, c = cond.op, cond.a, cond.b
    if isinstance(x, Const) and isinstance(c, Var) and op in flip:
        op, x, c = flip[op], c, x
    if op not in flip or not (isinstance(x, Var) and x in tids and isinstance(c, Const)):
        return None
    v = int(c.value)
    return {"<": (0, v), "<=": (0, v + 1), ">": (v + 1, block), ">=": (v, block), "==": (v, v + 1)}[op]


def _scope(lo, hi, block, body, span):
    """The branch of threads [lo, hi): whole warp groups, else whole warps (`lanes`); None when its
    bounds are not on warps."""
    lo, hi = max(lo, 0), min(hi, block)
    if lo >= hi or lo % WARP or (hi % WARP and hi != block):
        return None
    groups = tuple(range(lo // WARP_GROUP, -(-hi // WARP_GROUP)))
    whole = lo % WARP_GROUP == 0 and (hi % WARP_GROUP == 0 or hi == block)
    return WarpGroupScope(groups, body, () if whole else (lo, hi), span=span)


def _has_tile_work(node) -> bool:
    return bool(collect(node, lambda n: isinstance(n, (TileOp, SetMaxNreg))
                        or (isinstance(n, For) and n.kind == "parallel")))


def _minus(reach: tuple, lo: int, hi: int) -> tuple:
    """The disjoint, ordered intervals of `reach` without [lo, hi)."""
    out = []
    for a, b in reach:
        out += [(a, min(b, lo))] if a < min(b, lo) else []
        out += [(max(a, hi), b)] if max(a, hi) < b else []
    return tuple(out)


def as_branches(s: If, tids, block, visit, reach=None):
    """The statement replacing `s` (its branches visited by `visit`), or None to keep the `if`.
    `reach`: the disjoint intervals of thread indices that get to `s` (an `elif` is reached by the
    threads the conditions before it left: after `if 128 <= tx < 160:`, threads [0, 128) and
    [160, block)); each branch's own threads must be one contiguous range of them."""
    if not tids or not _has_tile_work(s):
        return None
    return _branches(s, tids, block, visit, reach or ((0, block),))[0]


def _say(ivs) -> str:
    return " and ".join(f"[{a}, {b})" for a, b in ivs)


def _branches(s: If, tids, block, visit, reach):
    """(the statement replacing `s`, None) or (None, why the chain is not warp branches)."""
    iv = _interval(s.cond, tids, block)
    if iv is None:
        if not collect(s.cond, lambda n: isinstance(n, Var) and n in tids):
            return None, ("its condition is a value that differs between threads (computed from the thread "
                          "index: a warp vote, a lane's element), not a bound of the thread index by constants: "
                          "which threads skip the branch depends on data, and the share of a tile operation each "
                          "thread does is given by tilecraft's register layout, not necessarily the one the "
                          "program assumes")
        return None, ("its condition is not a bound of the thread index by constants (comparisons of the "
                      "thread index itself with constants, joined by `and`)")
    pieces = [(max(a, iv[0]), min(b, iv[1])) for a, b in reach if max(a, iv[0]) < min(b, iv[1])]
    if len(pieces) != 1:
        return None, (f"its threads {_say(pieces)} are not one contiguous range" if pieces
                      else "no thread reaches its branch")
    lo, hi = pieces[0]
    if _scope(lo, hi, block, None, s.span) is None:
        return None, f"its threads [{lo}, {hi}) are not whole warps (bounds at multiples of {WARP})"
    first = _scope(lo, hi, block, visit(s.then), s.span)
    if s.orelse is None:
        return first, None
    left = _minus(reach, lo, hi)
    if not left:
        return first, None   # no thread reaches the else
    rest = s.orelse
    if isinstance(rest, If):
        other, why = _branches(rest, tids, block, visit, left)
        if other is not None:
            return seq(first, other), None
        if len(left) != 1:
            return None, f"its elif (threads {_say(left)} reach it): {why}"
    if len(left) != 1:
        return None, f"its else runs on threads {_say(left)}, not one contiguous range"
    if _scope(left[0][0], left[0][1], block, None, s.span) is None:
        return None, f"its else runs on threads {_say(left)}, not whole warps (bounds at multiples of {WARP})"
    return seq(first, _scope(left[0][0], left[0][1], block, visit(rest), rest.span or s.span)), None


def _spread_work(node):
    """The first statement under `node` that lowering spreads over the block's threads, or None."""
    def spread(n):
        if isinstance(n, For) and n.kind == "parallel":
            return True
        if isinstance(n, AtomicAdd):
            return isinstance(n.value, Region)
        if not isinstance(n, _SPREAD):
            return False
        bufs = [r.buffer for r in n.reads() + n.writes()]
        return isinstance(n, Gemm) or any(b.scope in ("shared", "fragment") for b in bufs)
    found = collect(node, spread)
    return found[0] if found else None


def _thread_derived(k, tids) -> set:
    """`tids` and the lets computed from them (`warp = tx // 32`), transitively."""
    names = set(tids)
    lets = collect(k.body, lambda n: isinstance(n, Let))
    grew = True
    while grew:
        grew = False
        for s in lets:
            if s.var not in names and collect(s.value, lambda n: isinstance(n, Var) and n in names):
                names.add(s.var)
                grew = True
    return names


def refuse_partial_branch(s: If, k, tids, block) -> None:
    """Raise when `s` (an `if` that `as_branches` kept) tests the thread index and its branches hold
    tile work spread over the block (module docstring)."""
    if not tids:
        return
    derived = _thread_derived(k, tids)
    if not collect(s.cond, lambda n: isinstance(n, Var) and n in derived):
        return
    work = _spread_work(s)
    if work is None:
        return
    iv = _interval(s.cond, tids, block)
    which = (f"threads [{max(iv[0], 0)}, {min(iv[1], block)}) of the block's {block}" if iv
             else "a subset of the block's threads")
    why = _branches(s, tids, block, lambda x: x, ((0, block),))[1] or "it is not such a branch"
    raise TilecraftError(
        f"this `if` on the thread index runs its tile operations on {which}; tilecraft spreads a tile "
        f"operation (copy, gemm, fill, reduce, T.Parallel) inside such a branch (and its elif / else) over the "
        f"branch's threads only when each branch is one contiguous range of whole warps, bounded by constants; "
        f"here {why}, so the operation would be lowered for every thread of the block and the skipped threads' "
        f"share never done",
        s.span, hint=f"bound each branch by constants at multiples of {WARP} threads so that it and its else are "
                     f"contiguous ranges (`if tx < 64: ... else: ...`, or an elif per range), or move the tile "
                     f"operation out of the `if`")
