"""Warp-group branches (`T.ws`, ir/hopper.py) for the CUDA passes: which threads run what.

A kernel that specializes its warp groups by hand marks itself with `Annotate(MANUAL, True)`
(transform/lower_manual_sync_cuda.py puts it there); the automatic pipelining and warp
specialization leave such a kernel as written (no second split).  Inside a branch, tile ops are
spread over the branch's threads only: a fragment belongs to one thread context (the whole block,
or one set of warp groups), its layout is inferred for that many threads, and its code indexes
threads from the branch's first one.  These helpers give each pass that view.

Not a pass: the helpers the passes share about warp groups.  Beside them in this package,
`thread_range_branches.py` (an `if` on the thread index around tile work as a warp-group branch:
lower_manual_sync_cpu / lower_manual_sync_cuda) and `concurrent_waits.py` (whether a kernel's
mbarrier waits need its warp groups running at once: cpu_threads.py).
"""
from __future__ import annotations

from dataclasses import replace

from ...errors import TilecraftError
from ...ir import Alloc, Annotate, AnnotationKey, Buffer, Kernel, Mutator, collect, seq
from ...ir.hopper import WARP_GROUP, WarpGroupScope

MANUAL = AnnotationKey.MANUAL_WARP_GROUPS


def is_manual(node) -> bool:
    """Whether a kernel (or function body) synchronises its warp groups by hand."""
    return bool(collect(node, lambda n: isinstance(n, Annotate) and n.key == MANUAL)
                or collect(node, lambda n: isinstance(n, WarpGroupScope)))


def scope_threads(s: WarpGroupScope, block_threads: int) -> int:
    """The branch's thread count (the block's last warp group may be partial: 64 threads, say)."""
    return s.threads_in(block_threads)


def scope_base(s: WarpGroupScope) -> int:
    """The flat index of the branch's first thread (the groups are contiguous, checked up front)."""
    return s.lanes[0] if s.lanes else WARP_GROUP * s.groups[0]


def check_scope(s: WarpGroupScope, block_threads: int, tensor_cores: bool = True, register_budgets: bool = True) -> None:
    """The branch's warp groups: inside the block, contiguous, and (several of them) aligned to
    their count, so that the tensor-core gemms of the header library, which number warp groups
    from threadIdx.x / 128 modulo their own count, see them in order."""
    if s.lanes:
        return _check_lanes(s, block_threads, tensor_cores, register_budgets)
    g = s.groups
    n_groups = -(-block_threads // WARP_GROUP)
    if g[-1] >= n_groups:
        raise TilecraftError(f"T.ws{tuple(g)}: the block has {block_threads} threads, warp groups 0..{n_groups - 1}; "
                             f"warp group {g[-1]} has no threads (CUDA target)", s.span)
    if list(g) != list(range(g[0], g[0] + len(g))) or g[0] % len(g):
        raise TilecraftError(f"T.ws{tuple(g)}: on the CUDA target a branch of several warp groups needs them "
                             f"contiguous and starting at a multiple of their count (e.g. T.ws(0, 1), T.ws(2, 3))",
                             s.span)


MAX_LANE_BRANCHES = 6  # named barriers 15 down to 10 (codegen/cuda.py: scope_barrier_id); 2..9 are T.ws's


def _check_lanes(s: WarpGroupScope, block_threads: int, tensor_cores: bool, register_budgets: bool) -> None:
    """A branch of whole warps (`if tx < 32:` around tile work): warp-aligned threads inside the
    block, and no tile op that needs whole warp groups -- the tensor-core gemms of the header
    library number their warps from threadIdx.x (a branch of whole warp groups is fine; without
    tensor cores, the CPU target's thread-level mode, a gemm is per-thread dot products indexed
    from the branch's first thread, fine too), and setmaxnreg moves a warp group's registers (on
    sm_90a; elsewhere it is dropped, register_budgets=False)."""
    lo, hi = s.lanes
    if lo % 32 or (hi % 32 and hi < block_threads) or not 0 <= lo < min(hi, block_threads):
        raise TilecraftError(f"a branch on the thread index runs tile operations on threads [{lo}, {hi}) of "
                             f"{block_threads}: on the CUDA target such a branch must be whole warps (bounds at "
                             f"multiples of 32)", s.span)
    from ...ir.hopper import SetMaxNreg
    from ...ir.tileop import Gemm
    bad = collect(s.body, lambda n: (register_budgets and isinstance(n, SetMaxNreg))
                  or (tensor_cores and isinstance(n, Gemm)))
    if bad:
        what = "T.gemm" if isinstance(bad[0], Gemm) else "T.set_max_nreg"
        raise TilecraftError(f"{what} inside a branch on threads [{lo}, {hi}) of the block: on the CUDA target "
                             f"it needs a branch of whole warp groups (bounds at multiples of {WARP_GROUP})", bad[0].span)


def _fragments(node) -> set:
    return set(collect(node, lambda n: isinstance(n, Buffer) and n.scope == "fragment"))


class _Drop(Mutator):
    """The kernel body without its warp-group branches and the Allocs of their fragments."""

    def __init__(self, owned: set):
        super().__init__()
        self.owned = owned

    def visit_WarpGroupScope(self, s):
        return seq()

    def visit_Alloc(self, a: Alloc):
        return seq() if a.buffer in self.owned else a


def thread_contexts(k: Kernel, tensor_cores: bool = True, register_budgets: bool = True) -> list:
    """[(kernel with the context's thread count, body)]: the whole block's statements, then for
    each set of warp groups the Allocs of its fragments and its branches.  A fragment used in two
    contexts is an error at its first use in the second.  `tensor_cores`: whether gemms take the
    header library's tensor-core path, `register_budgets`: whether T.set_max_nreg is kept (check_scope)."""
    scopes = collect(k.body, lambda n: isinstance(n, WarpGroupScope))
    if not scopes:
        return [(k, k.body)]
    owner: dict = {}
    by_groups: dict = {}
    for s in scopes:
        check_scope(s, k.num_threads, tensor_cores, register_budgets)
        if collect(s.body, lambda n: isinstance(n, WarpGroupScope)):
            raise TilecraftError("a T.ws branch inside another T.ws branch is not supported on the CUDA target",
                                 s.span)
        by_groups.setdefault(s.key, []).append(s)
        for b in _fragments(s.body):
            if owner.setdefault(b, s.key) != s.key:
                raise _two_contexts(b, owner[b], s.key, s.span)
    if len({key for key in by_groups if key[1]}) > MAX_LANE_BRANCHES:
        raise TilecraftError(f"more than {MAX_LANE_BRANCHES} distinct thread ranges of whole warps run tile "
                             f"operations in this kernel (each needs a named barrier of its own)", k.span)
    outside = _Drop(set(owner)).visit(k.body)
    for b in _fragments(outside):
        if b in owner:
            raise _two_contexts(b, owner[b], None, k.span)
    allocs = {a.buffer: a for a in collect(k.body, lambda n: isinstance(n, Alloc))}
    out = [(k, outside)]
    for key, ss in by_groups.items():
        mine = [allocs[b] for b in allocs if owner.get(b) == key]
        sub = replace(k, threads=(ss[0].threads_in(k.num_threads), 1, 1))
        out.append((sub, seq(*mine, *[s.body for s in ss])))
    return out


def _two_contexts(buf, a, b, span):
    def say(key):
        if key is None:
            return "the whole block"
        groups, lanes = key
        return f"the branch of threads [{lanes[0]}, {lanes[1]})" if lanes else f"T.ws{tuple(groups)}"
    return TilecraftError(f"fragment {buf.name} is used by {say(a)} and by {say(b)}: a register tile belongs to the "
                          f"threads of one warp-group branch (its registers are theirs)", span,
                          hint="give each branch its own fragment, and pass values between branches through "
                               "shared memory and an mbarrier")

