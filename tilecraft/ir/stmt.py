"""Statements of the tile IR.

The front end produces a tree of these plus the tile operations of `ir.tileop`.  Passes lower
tile operations into the thread-level statements at the bottom of this file (`Evaluate` of a
target intrinsic, `Sync`), which the code generators print directly.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .buffer import Buffer
from .expr import Expr, Var
from .node import Node

LOOP_KINDS = ("serial", "unroll", "parallel", "pipelined", "vectorized")


@dataclass(frozen=True, eq=False)
class Stmt(Node):
    pass


@dataclass(frozen=True, eq=False)
class Seq(Stmt):
    stmts: tuple


@dataclass(frozen=True, eq=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple
    value: Expr


@dataclass(frozen=True, eq=False)
class Let(Stmt):
    """Bind `var` to `value` for the statements after this one in the enclosing `Seq`."""
    var: Var
    value: Expr


@dataclass(frozen=True, eq=False)
class For(Stmt):
    var: Var
    start: Expr
    extent: Expr
    kind: str
    body: Stmt
    step: int = 1
    annotations: tuple = ()  # (key, value) pairs, e.g. ("num_stages", 3)
    # a T.Pipelined loop's form (ir/loop_plan.py), chosen by transform/plan_pipelines.py; None before
    # that pass and for loops that stay serial
    plan: object = None

    def annotation(self, key, default=None):
        for k, v in self.annotations:
            if k == key:
                return v
        return default


@dataclass(frozen=True, eq=False)
class If(Stmt):
    cond: Expr
    then: Stmt
    orelse: Stmt | None = None


@dataclass(frozen=True, eq=False)
class While(Stmt):
    """A serial loop that runs `body` while `cond` holds; `cond` is evaluated before every
    iteration (it reads state the body updates: a buffer element, a T.alloc_var).  Every thread
    of a block evaluates it: it must have the same value in all of them where the body contains
    block-wide work (tile operations, barriers)."""
    cond: Expr
    body: Stmt


@dataclass(frozen=True, eq=False)
class Alloc(Stmt):
    """Declare an on-chip buffer (shared, fragment, local, var) for the rest of the kernel."""
    buffer: Buffer
    init: Expr | None = None


@dataclass(frozen=True, eq=False)
class View(Stmt):
    """`buffer` names the storage of `base` with another shape: a global tensor (TileLang's
    `T.Tensor(shape, dtype, base.data)`, the same elements and dtype) or a shared tile (`T.view`,
    any element type that fits in its bytes; both start at the same byte)."""
    buffer: Buffer
    base: object  # a Buffer, or an int64 expression holding an address (`T.make_tensor(ptrs[i], ...)`)


class AnnotationKey(enum.StrEnum):
    """The keys an `Annotate` statement carries (a StrEnum: it prints, hashes and compares as its text)."""
    USE_SWIZZLE = "use_swizzle"            # T.use_swizzle: (panel, enable)
    LAYOUT = "layout"                      # T.annotate_layout: {buffer: layout}
    NO_SET_MAX_NREG = "no_set_max_nreg"    # T.disable_warp_group_reg_alloc(): register budgets as launched
    MANUAL_WARP_GROUPS = "manual_warp_groups"  # the kernel orders its warp groups itself (lower_manual_sync_cuda)
    REQUIRES_ARCH = "requires_arch"        # a construct only some CUDA archs have: an ir/blackwell.py ArchNeed


@dataclass(frozen=True)
class SwizzledLayout:
    """A layout request an `Annotate(LAYOUT)` may carry (T.make_swizzled_layout): lay `buffer` out in
    shared memory with the bank-conflict-free XOR swizzle (transform/plan_shared_layouts.py)."""
    buffer: Buffer


@dataclass(frozen=True, eq=False)
class Annotate(Stmt):
    """A schedule annotation: (AnnotationKey.USE_SWIZZLE, (panel, enable)), (LAYOUT, {buffer: layout})."""
    key: str
    value: object

    def is_(self, key: AnnotationKey) -> bool:
        return self.key == key


@dataclass(frozen=True, eq=False)
class Kernel(Stmt):
    """A grid of blocks: `grid` extents (1-3), the block index vars, threads per block (x, y, z)."""
    grid: tuple
    block_vars: tuple
    threads: tuple
    body: Stmt
    thread_vars: tuple = ()  # Vars for threadIdx.x/y/z, used by low-level code
    # thread-block cluster dims (x, y, z) of T.ClusterKernel (sm_90+: its blocks are co-scheduled on one GPC
    # and may share shared memory and mbarriers); () for none.  Each grid extent is a multiple of its dim.
    cluster: tuple = ()

    @property
    def num_threads(self) -> int:
        n = 1
        for t in self.threads:
            n *= t
        return n


# ---- thread-level statements (after lowering) -------------------------------------------------

@dataclass(frozen=True, eq=False)
class Break(Stmt):
    """Leave the innermost enclosing serial `For` or `While` (Python's `break` in a kernel body)."""


@dataclass(frozen=True, eq=False)
class Evaluate(Stmt):
    """Evaluate an expression for its effect: a target intrinsic `Call` (mma, cp.async, ...)."""
    value: Expr


@dataclass(frozen=True, eq=False)
class Sync(Stmt):
    """A barrier among the threads of a block (`__syncthreads`)."""
    scope: str = "block"


@dataclass(frozen=True, eq=False)
class WarpSpecialize(Stmt):
    """The block split into two roles (Hopper).  `consumer` runs on the kernel's own threads
    [0, consumer_threads); `producer` on one extra warpgroup [consumer_threads, +128), of which
    one thread runs it (it issues TMA loads).  Inside `consumer` a `Sync` is a barrier of the
    consumer threads only.  `producer_regs` / `consumer_regs`: the per-thread register budgets
    each role moves to (setmaxnreg), 0 for no change."""
    producer: Stmt
    consumer: Stmt
    consumer_threads: int
    producer_regs: int = 0
    consumer_regs: int = 0
    blocks_per_sm: int = 1   # the launch bound's minimum blocks per SM the budgets were made for

    PRODUCER_THREADS = 128


def stmts_of(body) -> list:
    """A body's statements in order, nested sequences flattened (what `seq` would hold)."""
    if isinstance(body, Seq):
        return [x for s in body.stmts for x in stmts_of(s)]
    return [body]


def seq(*stmts) -> Stmt:
    """Flatten nested sequences and drop empty ones."""
    out = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            out.extend(s.stmts)
        elif isinstance(s, (list, tuple)):
            inner = seq(*s)
            out.extend(inner.stmts if isinstance(inner, Seq) else [inner])
        else:
            out.append(s)
    if len(out) == 1:
        return out[0]
    return Seq(tuple(out))
