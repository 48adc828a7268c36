"""Lower tile operations and `T.Parallel` loops to per-thread code (CUDA targets).

Before: tile ops and parallel loops over whole tiles; fragments have layouts (`infer_layouts`).
After: thread-level IR.  Every fragment becomes a per-thread register array (scope "local")
indexed by compile-time slots inside unrolled loops; each op is expressed through the thread
index `tc_tid`:

- a `T.Parallel` nest that touches a fragment runs, in each thread, over the registers of its
  anchor fragment; a nest without fragments is spread over the threads element by element;
- `T.copy` to or from a fragment walks the fragment's registers; between global and shared it
  is spread over the threads;
- `T.gemm` on tensor cores becomes a call of the header library's `tc::gemm_ss`/`gemm_rs`
  templates, other gemms a per-register dot product;
- reductions combine a thread's registers, then lanes with `__shfl_xor_sync`, then warps
  through a shared scratch buffer.
The per-op lowerings are registered by op class in `CUDA_LOWERING`.
"""
from __future__ import annotations

from ..errors import TilecraftError
from ..ir import Alloc, Const, For, Gemm, If, Kernel, Load, Mutator, Ref, Seq, Store, binary, collect, const, substitute
from ..ir.func import PrimFunc
from ..ir.lowering import SWIZZLE_SM80, SWIZZLE_SM90, Mma80Plan
from ..ir.layout.fragment import FragmentLayout, covering_slot, extend_over_loop, extend_window, uniform_slot_part
from .cuda_ops import CUDA_LOWERING, Ctx
from .plan_shared_memory import plan_kernel
from .warp_groups import scope_base, scope_threads
from .cuda_ops.tma_reduce import bulk_reduce_enabled, tma_reduces
from ..ir.semantics import (loop_dims, mixed_dims, parallel_anchor, partial_anchor, unit_anchor, window_dims,
                             writes_a_projection)

# ---- parallel loops and the driver ---------------------------------------------------------------

class _Lower(Mutator):
    def __init__(self, layouts, swizzled, smem_layouts, smem_limit, remapped_reads=False):
        super().__init__()
        self.layouts, self.swizzled, self.smem_limit = layouts, swizzled, smem_limit
        self.remapped_reads = remapped_reads
        # the CPU target's thread-level mode (transform/cpu_threads.py): its threads are fibers, not
        # the lanes of converged warps (see _replica_updates)
        self.fibers = False
        self.bulk_reduce = False   # sm_90+ with tc.bulk_reduce (cuda_ops/misc.py::_bulk_reduce)
        self.tma_reduces: dict = {}   # (tensor, tile) -> its tensor-map reduce (cuda_ops/tma_reduce.py)
        self.smem_layouts = smem_layouts
        self.scratch: set = set()
        self.ctx: Ctx | None = None
        self.in_parallel = 0  # inside a T.Parallel nest, _FragRewrite addresses the fragments

    def visit_Load(self, e: Load):
        if e.buffer.scope == "fragment" and not self.in_parallel:
            slot = self._replicated_slot(e.buffer, e.indices)
            if slot is not None:
                return Load(self.ctx.reg(e.buffer), slot, span=e.span)
        return Mutator.generic(self, e)

    def visit_Store(self, s: Store):
        if s.buffer.scope == "fragment" and not self.in_parallel:
            slot = self._replicated_slot(s.buffer, s.indices)
            if slot is not None:
                return Store(self.ctx.reg(s.buffer), slot, self.visit(s.value), span=s.span)
        return Mutator.generic(self, s)

    def _replicated_slot(self, buf, indices):
        """Outside T.Parallel: `buf[indices]` with uniform indices in a fragment every thread holds
        whole (`layout.fragment.replicated_layout`) is one register of each thread; None otherwise
        (the access is then refused below)."""
        dims = mixed_dims(indices, ())
        lay = self.layouts.get(buf)
        if dims is None or lay is None:
            return None
        part = uniform_slot_part(lay, dims)
        if part is None:
            return None
        slot = const(0)
        for d, stride in part:
            slot = binary("+", slot, binary("*", self.visit(indices[d]), stride))
        return (slot,)

    def _ctx(self, k: Kernel) -> Ctx:
        ctx = Ctx(k, self.layouts, self.swizzled)
        ctx.remapped_reads = self.remapped_reads
        ctx.bulk_reduce, ctx.smem_layouts, ctx.tma_reduces = self.bulk_reduce, self.smem_layouts, self.tma_reduces
        return ctx

    def visit_Kernel(self, k: Kernel):
        self.ctx = self._ctx(k)
        out = Mutator.generic(self, k)
        if self.ctx.scratch and plan_kernel(out, self.smem_layouts, self.ctx.scratch, self.smem_limit)[2] \
                > self.smem_limit:
            # the shared-memory plan (plan_shared_memory.py, every fallback tried) does not fit: lower
            # again with the compact reduction scratch (Ctx.compact_scratch); kernels that fit are unchanged
            self.ctx = self._ctx(k)
            self.ctx.compact_scratch = True
            out = Mutator.generic(self, k)
        self.scratch |= self.ctx.scratch
        return out

    def visit_WarpGroupScope(self, s):
        """A `T.ws` branch: its tile ops are spread over its own threads (transform/warp_groups/)."""
        outer = self.ctx
        self.ctx = outer.for_threads(scope_threads(s, outer.kernel.num_threads), scope_base(s))
        try:
            return Mutator.generic(self, s)
        finally:
            self.ctx = outer

    def visit_Alloc(self, a: Alloc):
        if a.buffer.scope == "fragment":
            return Alloc(self.ctx.reg(a.buffer), span=a.span)
        return a

    def visit_View(self, v):
        """A reshaped fragment names its base's registers (Ctx.reg): nothing to declare."""
        return Seq(()) if v.buffer.scope == "fragment" else v

    def visit_Ref(self, e: Ref):
        """`&frag[0]` (a whole fragment handed to an intrinsic, e.g. tc::wgmma_drain): the address
        of the thread's first register of it."""
        if e.buffer.scope != "fragment":
            return Mutator.generic(self, e)
        if not all(isinstance(i, Const) and i.value == 0 for i in e.indices):
            raise TilecraftError(f"internal: a reference into fragment {e.buffer.name} at a nonzero index", e.span)
        return Ref(self.ctx.reg(e.buffer), (const(0),), span=e.span)

    def generic(self, node):
        fn = CUDA_LOWERING.get(type(node))
        if fn is not None:
            return fn(node, self.ctx)
        return Mutator.generic(self, node)

    def visit_For(self, f: For):
        if f.kind != "parallel":
            return Mutator.generic(self, f)
        ctx = self.ctx
        vars_, extents, cur = [], [], f
        while isinstance(cur, For) and cur.kind == "parallel":
            vars_.append(cur.var)
            extents.append(cur.extent.value)
            cur = cur.body
        self.in_parallel += 1
        try:
            inner = self.visit(cur)  # lowers tile ops nested in the loop body, if any
        finally:
            self.in_parallel -= 1
        accesses = [(n.buffer, n.indices) for n in _frag_accesses(inner)]
        anchor = parallel_anchor(accesses, vars_)
        base = None
        if anchor is None:
            anchor = partial_anchor(accesses, vars_)
            if anchor is not None:  # a row vector: its layout extended over the other loop dimensions
                base = extend_over_loop(ctx.layout(anchor[0], f.span), anchor[1], extents,
                                        not writes_a_projection(inner, vars_))
                anchor = anchor if base is not None else None
        if anchor is None:
            anchor = unit_anchor(accesses, vars_)
            if anchor is not None:  # `x[i, 0]` of an [N, 1] fragment: its layout without the unit dimensions
                keep = [d for d, k in enumerate(anchor[1]) if k is not None]
                proj = ctx.layout(anchor[0], f.span).project(keep)
                pos = [anchor[1][d] for d in keep]
                base = FragmentLayout(tuple(extents), proj.threads, proj.thread_digits, proj.reg_digits,
                                      tuple(proj.coords[pos.index(k)] for k in range(len(vars_))))
        if anchor is None:
            if accesses:
                names = sorted({b.name for b, _ in accesses})
                raise TilecraftError(
                    f"this T.Parallel loop reads or writes fragment(s) {', '.join(names)} but none of them is "
                    f"indexed by all the loop variables ({', '.join(v.name for v in vars_)}), so the compiler "
                    f"cannot tell which thread owns each element", f.span,
                    hint="index a fragment of the loop's full shape with exactly the loop variables")
            return ctx.strided(extents, lambda ix: substitute(inner, dict(zip(vars_, ix))), f.span)
        abuf, adims = anchor
        if base is None:
            full = ctx.layout(abuf, f.span)
            order = [adims.index(k) for k in range(len(vars_))]
            base = FragmentLayout(tuple(extents), full.threads, full.thread_digits, full.reg_digits,
                                  tuple(full.coords[o] for o in order))
        r = ctx.var("r")
        body = _FragRewrite(ctx, base, vars_, r, f.span).visit(inner)
        coords = ctx.coords(base, r)
        body = substitute(body, dict(zip(vars_, coords)))
        ok = ctx.valid(base, coords)
        loop = For(r, const(0), const(base.num_regs), "unroll", body if ok is None else If(ok, body), span=f.span)
        if _has_atomics(body):
            loop = ctx.first_replica(base, loop)  # replicated threads must not add twice
        elif self.fibers:
            loop = _ReplicaUpdates(ctx, base).visit(loop)
        return loop


class _ReplicaUpdates(Mutator):
    """`shared[i] = shared[i] + x` in a T.Parallel nest over a replicated layout: every thread holding
    a copy of row i runs it.  On a GPU those threads are lanes of one converged warp, which read
    before any of them writes: one update.  The CPU target's fibers run one after another, so there
    only the first copy's thread updates (each would add x again)."""

    def __init__(self, ctx, layout):
        super().__init__()
        self.ctx, self.layout = ctx, layout

    def visit_Store(self, st: Store):
        from ..ir import collect
        if st.buffer.scope in ("shared", "global") and collect(
                st.value, lambda n: isinstance(n, Load) and n.buffer is st.buffer):
            return self.ctx.first_replica(self.layout, st)
        return st


def _has_atomics(node) -> bool:
    """Whether `node` calls a device intrinsic declared to update memory atomically."""
    from ..ir import collect
    from ..ir.intrinsics import ATOMIC, IntrinsicCall
    return any(d is not None and d.access == ATOMIC for c in collect(node, lambda n: isinstance(n, IntrinsicCall))
               for d, _ in c.operand_args())


def _frag_accesses(node):
    from ..ir import collect
    return [n for n in collect(node, lambda n: isinstance(n, (Load, Store, Ref))) if n.buffer.scope == "fragment"]


class _FragRewrite(Mutator):
    """Inside a lowered parallel loop: fragment element accesses → register slots of slot `r`."""

    def __init__(self, ctx, base, vars_, r, span):
        super().__init__()
        self.ctx, self.base, self.vars, self.r, self.span = ctx, base, vars_, r, span

    def slot(self, buf, indices, read=False):
        dims = loop_dims(indices, self.vars)
        lay = self.ctx.layout(buf, self.span)
        if dims is None:
            uniform = self.uniform_slot(buf, lay, indices)
            if uniform is not None:
                return uniform
        proj = None if dims is None else self.base.project(dims)
        # reads in another layout / in column windows (tc.remapped_fragment_reads, on by default; the two
        # TileLang programs that need them failed on the H200 in session 6 for other reasons: barriers
        # missing inside a block-uniform `if`, an `if tx < 32:` around tile work)
        remap = self.ctx.remapped_reads
        if remap and proj is not None and read and not lay.equivalent(proj):
            cover = covering_slot(lay, proj)
            if cover is not None:  # each thread reads its own copy (layout.fragment.covering_slot)
                offset, coefs = cover
                slot = const(offset)
                for name, coef in coefs:
                    v = self.ctx.digit(self.base, name, self.r)
                    slot = binary("+", slot, binary("*", v, coef))
                return (slot,)
        if remap and dims is None:
            window = self.window_slot(buf, lay, indices)
            if window is not None:
                return window
        if proj is None or not lay.equivalent(proj):
            raise TilecraftError(
                f"fragment {buf.name} is indexed in this T.Parallel loop in a way that does not match the "
                f"register layout of the loop (indices must be loop variables or uniform values such as a serial "
                f"loop variable, and {buf.name} must be laid out like the loop's other fragments)", self.span,
                hint=None if remap else "pass_configs={'tc.remapped_fragment_reads': True} (the default) accepts "
                "reads of a fragment in another layout or in column windows")
        slot = const(0)
        for d in proj.reg_digits:  # proj numbers its slots as `lay` does (equivalent layouts)
            v = binary("%", binary("//", self.r, self.base.reg_stride(d.name)), d.extent)
            slot = binary("+", slot, binary("*", v, proj.reg_stride(d.name)))
        return (slot,)

    def window_slot(self, buf, lay, indices):
        """The slot of `buf[i, u * c + j]` (ir.semantics.window_dims) when `lay` is the loop's
        layout extended by one register digit per window (layout.fragment.extend_window), as
        infer_layouts lays out such a fragment; None otherwise."""
        dims = window_dims(indices, self.vars)
        ext = None if dims is None else extend_window(self.base, buf.shape, dims)
        if ext is None or not lay.equivalent(ext[0]):
            return None
        ext, owner = ext
        slot = const(0)
        for d in ext.reg_digits:
            if d.name in owner:
                k = dims[owner[d.name]]
                v = self.visit(k[1] if isinstance(k, tuple) else indices[owner[d.name]])
            else:
                v = binary("%", binary("//", self.r, self.base.reg_stride(d.name)), d.extent)
            slot = binary("+", slot, binary("*", v, ext.reg_stride(d.name)))
        return (slot,)

    def uniform_slot(self, buf, lay, indices):
        """The slot of `buf[indices]` when some indices are uniform (`ir.semantics.mixed_dims`)
        and `lay` keeps those dimensions whole in every thread's registers; None otherwise."""
        dims = mixed_dims(indices, self.vars)
        if dims is None:
            return None
        ld = [d for d, k in enumerate(dims) if k is not None]
        part = uniform_slot_part(lay, dims)
        if part is None:
            return None
        proj = self.base.project([dims[d] for d in ld])
        if not lay.project(ld).equivalent(proj):
            return None
        slot = const(0)
        for d in proj.reg_digits:  # the loop-indexed registers come first in `lay`, numbered as in proj
            v = binary("%", binary("//", self.r, self.base.reg_stride(d.name)), d.extent)
            slot = binary("+", slot, binary("*", v, proj.reg_stride(d.name)))
        for d, stride in part:
            slot = binary("+", slot, binary("*", self.visit(indices[d]), stride))
        return (slot,)

    def visit_Load(self, e: Load):
        if e.buffer.scope == "fragment":
            return Load(self.ctx.reg(e.buffer), self.slot(e.buffer, e.indices, read=True), span=e.span)
        return Mutator.generic(self, e)

    def visit_Store(self, s: Store):
        if s.buffer.scope == "fragment":
            return Store(self.ctx.reg(s.buffer), self.slot(s.buffer, s.indices), self.visit(s.value), span=s.span)
        return Mutator.generic(self, s)


def _mma_readable_sm90(func: PrimFunc) -> set:
    """Shared tiles laid out for wgmma (another gemm of the kernel reads them there) that an
    mma.sync gemm reads too.  With rows of up to 128 bytes the wgmma layout is the very bytes of
    the sm80 XOR swizzle (tc::swizzle_offset_sm90's contract), so the mma.sync gemm reads them as
    swizzled; rows of 16 bytes are unswizzled in both.  Longer rows are stored in column panels
    that tc::gemm_ss / tc::gemm_rs cannot address: refused here rather than read wrong."""
    sm90 = func.lowering.swizzled(SWIZZLE_SM90)
    out = set()
    for g in collect(func.body, lambda n: isinstance(n, Gemm)):
        if not isinstance(g.plan, Mma80Plan):
            continue
        for r in (g.a, g.b):
            b = r.buffer
            if b not in sm90:
                continue
            row_bytes = b.shape[-1] * b.dtype.bytes
            if row_bytes > 128:
                raise TilecraftError(
                    f"T.gemm: shared tile {b.name} is laid out for wgmma (another T.gemm of this kernel reads it "
                    f"on wgmma) in 128-byte column panels, which this gemm's mma.sync path cannot read; give every "
                    f"gemm of {b.name} the wgmma path (threads a multiple of 128, 64 rows per warpgroup) or set "
                    f"pass_configs={{'tl.disable_wgmma': True}}", g.span)
            if row_bytes > 16:
                out.add(b)
    return out


def lower_cuda(func: PrimFunc, ctx) -> PrimFunc:
    layouts = func.lowering.fragment_layouts
    swizzled = func.lowering.swizzled(SWIZZLE_SM80) | _mma_readable_sm90(func)
    lower = _Lower(layouts, swizzled, func.lowering.smem_layouts, ctx.target.max_shared_memory,
                   ctx.options.remapped_fragment_reads)
    lower.fibers = ctx.target.kind == "cpu"
    lower.bulk_reduce = bulk_reduce_enabled(ctx)
    new_descs = ()
    if lower.bulk_reduce and ctx.options.tma_reduce:   # tc.tma_reduce=False: no tensor reduce, whatever the layout
        lower.tma_reduces, new_descs = tma_reduces(func, len(func.lowering.tma_descs))
    lowered = lower.visit(func.body)
    leftovers = _frag_accesses(lowered)
    if leftovers:
        b = leftovers[0]
        raise TilecraftError(f"fragment {b.buffer.name} is accessed outside a T.Parallel loop; on the CUDA "
                             f"ctx.target fragment elements live in different threads — use T.Parallel, or "
                             f"T.alloc_var / T.alloc_local for per-thread values", b.span)
    out = func.with_body(lowered)
    if new_descs:
        out = out.with_lowering(tma_descs=tuple(func.lowering.tma_descs) + new_descs)
    return out.with_lowering(scratch_smem=frozenset(lower.scratch)) if lower.scratch else out
