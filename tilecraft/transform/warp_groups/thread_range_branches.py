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
(each thread runs one branch of the chain, so their order does not matter).  Anything else stays
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
    flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
    op, x, c = cond.op, cond.a, cond.b
    if isinstance(x, Const) and isinstance(c, Var) and op in flip:
        op, x, c = flip[op], c, x
    if op not in flip or not (isinstance(x, Var) and x in tids and isinstance(c, Const)):
        return None
    v = int(c.value)
    return {"<": (0, v), "<=": (0, v + 1), ">": (v + 1, block), ">=": (v, block)}[op]


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


def as_branches(s: If, tids, block, visit, reach=None):
    """The statement replacing `s` (its branches visited by `visit`), or None to keep the `if`.
    `reach`: the thread indices [lo, hi) that get to `s` (an `elif` is reached by the threads the
    conditions before it left)."""
    if not tids or not _has_tile_work(s):
        return None
    reach = reach or (0, block)
    iv = _interval(s.cond, tids, block)
    if iv is None:
        return None
    lo, hi = max(iv[0], reach[0]), min(iv[1], reach[1])
    if _scope(lo, hi, block, None, s.span) is None:
        return None
    first = _scope(lo, hi, block, visit(s.then), s.span)
    if s.orelse is None:
        return first
    left = (hi, reach[1]) if lo <= reach[0] else (reach[0], lo) if hi >= reach[1] else None
    if left is None:
        return None
    rest = s.orelse
    if isinstance(rest, If):
        other = as_branches(rest, tids, block, visit, left)
        if other is not None:
            return seq(first, other)
    if _scope(left[0], left[1], block, None, s.span) is None:
        return None
    return seq(first, _scope(left[0], left[1], block, visit(rest), rest.span or s.span))


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
    which = (f"threads [{max(iv[0], 0)}, {min(iv[1], block)}) of the block's {block} (its else: the rest)" if iv
             else "a subset of the block's threads")
    raise TilecraftError(
        f"this `if` on the thread index runs its tile operations on {which}; tilecraft spreads a tile "
        f"operation (copy, gemm, fill, reduce, T.Parallel) inside such a branch over the branch's threads only "
        f"when the condition bounds the thread index by constants on whole warps (multiples of {WARP}); here the "
        f"operation would be lowered for every thread of the block and the skipped threads' share never done",
        s.span, hint=f"bound the branch at a multiple of {WARP} threads (`if tx < 64:`), or move the tile "
                     f"operation out of the `if`")
