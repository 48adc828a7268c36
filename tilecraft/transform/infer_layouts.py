"""Fragment layout inference (CUDA targets).

Before: fragments have no layout.  After: the lowering state's `fragment_layouts` maps every
fragment buffer to a `FragmentLayout`, and every `Gemm` carries its plan (`Gemm.plan`, an
ir/lowering.py GemmPlan: mma.sync warp partition, wgmma, wgmma with A from registers; None when
it runs on the generic path).

Strictest first, as in DESIGN.md: (1) gemm accumulators take the mma.sync accumulator layout of
their warp partition; a gemm whose result feeds another gemm's A operand (FlashAttention's
P @ V) is partitioned along M only, so P's registers can be reused as A fragments. (2) Layouts
flow through fragment-to-fragment copies, reductions (row vectors are projections) and
`T.Parallel` loops (every fragment a loop touches takes the layout of the loop's anchor, or its
projection; dimensions a loop indexes uniformly, `lse[k, j]` with k a serial loop variable,
stay whole in every thread's registers).  A fragment accessed outside every `T.Parallel` loop
is replicated: every thread holds it whole.  (3) A fragment still without a layout gets the
default one, chosen for 16-byte vector access, and propagation resumes.  A conflict is an error at the user's line naming both
buffers.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import TilecraftError
from ..ir import Alloc, Buffer, Copy, For, Gemm, Kernel, Load, Mutator, Reduce, Store, Visitor, collect, same_seq, where
from ..ir.func import PrimFunc
from ..ir.lowering import Mma80Plan, WgmmaPlan, WgmmaRSPlan
from ..ir.intrinsics.wgmma import n_split_ok
from ..ir.semantics import (shared_row_stride, loop_dims, mixed_dims, parallel_anchor, partial_anchor, slice_dims,
                             window_dims, writes_a_projection)
from .warp_groups import thread_contexts
from ..ir.layout.reshape import fragment_views, reshape_layout
from ..ir.layout.fragment import (FragmentLayout, default_layout, extend_over_loop, extend_uniform, extend_window,
                               replicated_layout,
                               uniform_slot_part, mma_accumulator_layout,
                               warp_partition, wgmma_accumulator_layout, wgmma_row_ok)

MMA_DTYPES = ("float16", "bfloat16")
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")  # wgmma only (k32 a step, both operands K-major)


def parallel_nests(body) -> list:
    """Outermost chains of directly nested T.Parallel loops: (vars, extents, innermost body, loop)."""
    nests = []

    class _V(Visitor):
        def visit_For(self, f: For):
            if f.kind != "parallel":
                return Visitor.generic(self, f)
            vars_, extents, cur = [], [], f
            while isinstance(cur, For) and cur.kind == "parallel":
                vars_.append(cur.var)
                extents.append(cur.extent.value)
                cur = cur.body
            nests.append((tuple(vars_), tuple(extents), cur, f))

    _V().visit(body)
    return nests


def _elementwise_feeds(body) -> dict:
    """fragment -> the same-shaped fragments a T.Parallel nest reads at exactly its loop indices
    while writing that fragment at exactly its loop indices (and nothing else writes it)."""
    feeds: dict = {}
    writers: dict = {}
    for vars_, extents, inner, _ in parallel_nests(body):
        stores = collect(inner, lambda n: isinstance(n, Store) and n.buffer.scope == "fragment")
        for st in stores:
            writers[st.buffer] = writers.get(st.buffer, 0) + 1
            if not same_seq(st.indices, vars_) or not same_seq(st.buffer.shape, extents):
                feeds[st.buffer] = None  # written another way: no carried layout
                continue
            reads = collect(st.value, lambda n: isinstance(n, Load) and n.buffer.scope == "fragment"
                            and same_seq(n.buffer.shape, extents) and same_seq(n.indices, vars_))
            if feeds.get(st.buffer, ()) is not None:
                feeds[st.buffer] = tuple(feeds.get(st.buffer, ())) + tuple(r.buffer for r in reads)
    return {b: v for b, v in feeds.items() if v and writers.get(b) == 1}


def outside_parallel_fragments(body) -> list:
    """(buffer, span) of the first element access of each fragment that is read or written
    outside every T.Parallel loop (in a condition, a serial loop, a scalar statement)."""
    found: dict = {}

    class _V(Visitor):
        def visit_For(self, f: For):
            if f.kind != "parallel":
                return Visitor.generic(self, f)

        def generic(self, n):
            if isinstance(n, (Load, Store)) and n.buffer.scope == "fragment":
                found.setdefault(n.buffer, n.span)
            return Visitor.generic(self, n)

    _V().visit(body)
    return list(found.items())


def fragment_accesses(body) -> list:
    """(buffer, indices) of every fragment element access inside `body`."""
    out = []
    for n in collect(body, lambda n: isinstance(n, (Load, Store))):
        if n.buffer.scope == "fragment":
            out.append((n.buffer, n.indices))
    return out


def mma_capable(g: Gemm, threads: int, fp8_mma: bool = False) -> bool:
    """mma.sync (tc::gemm_ss / gemm_rs): shared operands must be addressable as rows of a stored
    tile (a whole tile, or a column slice of a wider one on a 128-byte boundary: gemm_ss_ld).
    8-bit floats (`fp8_mma`: sm_89+) take gemm_ss's m16n8k32 form when fp8_wgmma_refusal allows it
    (both operands K-major, K % 32 == 0) and A is a shared tile."""
    m, n, k = g.mnk
    if g.a.buffer.dtype.packed:
        return int4_mma_capable(g, threads)
    if g.a.buffer.dtype.name in FP8_DTYPES:
        if not fp8_mma or fp8_wgmma_refusal(g) is not None or g.a.buffer.scope != "shared":
            return False
    elif g.a.buffer.dtype.name not in MMA_DTYPES:
        return False
    return (g.c.buffer.dtype.name == "float32" and
            k % 16 == 0 and threads % 32 == 0 and g.c.covers_whole() and
            all(shared_row_stride(r) is not None for r in (g.a, g.b) if r.buffer.scope == "shared") and
            warp_partition(m, n, threads // 32, g.policy) is not None)


def int4_mma_capable(g: Gemm, threads: int) -> bool:
    """mma.sync m16n8k64 .s4 (tc::gemm_ss_s4): int4 x int4 into int32, both operands whole K-major shared
    tiles (A [M][K], B [N][K]: each 32-bit fragment register is 8 consecutive k of one row), K % 64 == 0."""
    m, n, k = g.mnk
    a, b = g.a, g.b
    return (a.buffer.dtype.packed and b.buffer.dtype.packed and g.c.buffer.dtype.name == "int32"
            and not g.trans_a and g.trans_b and k % 64 == 0 and threads % 32 == 0 and g.c.covers_whole()
            and a.buffer.scope == "shared" and b.buffer.scope == "shared" and a.covers_whole() and b.covers_whole()
            and a.buffer.ndim == 2 and b.buffer.ndim == 2
            and warp_partition(m, n, threads // 32, g.policy) is not None)


def wgmma_split(g: Gemm, threads: int) -> int | None:
    """The Hopper path: both operands whole shared tiles with supported row lengths, fp16/bf16 (or
    K-major fp8) in, fp32 accumulator; warpgroups along M (64 rows each at least) -- returns 1 -- or, where M has
    too few rows for that, as many along M as it allows and the rest along N (FlashAttention
    backward's 64-row dQ = dS K over two warpgroups: each 64 x N/2) -- returns the warpgroups along
    N.  None: no wgmma path."""
    m, n, k = g.mnk
    if threads % 128 or g.a.buffer.scope != "shared" or g.b.buffer.scope != "shared":
        return None
    if not (g.a.covers_whole() and g.b.covers_whole() and g.c.covers_whole()):
        return None
    wg = threads // 128
    if g.a.buffer.dtype.name in FP8_DTYPES:
        if fp8_wgmma_refusal(g) is not None:
            return None
    elif g.a.buffer.dtype.name not in MMA_DTYPES:
        return None
    if not (g.c.buffer.dtype.name == "float32" and n % 8 == 0 and k % 16 == 0 and
            all(wgmma_row_ok(r.buffer.shape[-1], r.buffer.dtype.bytes) for r in (g.a, g.b))):
        return None
    if m % (64 * wg) == 0:
        return 1
    for wgm in range(wg - 1, 0, -1):  # the most warpgroups along M that M allows, the rest along N
        if wg % wgm == 0 and m % (64 * wgm) == 0 and n_split_ok(n, wg // wgm, g.trans_b, g.b.buffer.dtype.bytes):
            return wg // wgm
    return None


def wgmma_capable(g: Gemm, threads: int, along_m: bool = False) -> bool:
    """wgmma_split found a path (with `along_m`, one with warpgroups along M: an accumulator that
    feeds a gemm's A operand from registers must be in wgmma's M-split layout)."""
    split = wgmma_split(g, threads)
    return split is not None and (split == 1 or not along_m)


def fp8_wgmma_refusal(g: Gemm):
    """Why an 8-bit-float gemm cannot take wgmma's k32 .e4m3/.e5m2 form (None when the operands
    allow it): PTX has no transpose for 8-bit operands, so both must be K-major in shared memory
    (A stored [M][K], B stored [N][K], i.e. transpose_B=True), K a multiple of 32 (T.gemm has
    checked that both operands have one type)."""
    if g.trans_a or not g.trans_b:
        return ("8-bit operands must both be K-major in shared memory (A [M][K] without transpose_A, "
                "B [N][K] with transpose_B=True): wgmma cannot transpose them")
    if g.mnk[2] % 32:
        return f"K={g.mnk[2]} is not a multiple of 32 (one k32 step per instruction)"
    return None


def wgmma_rs_capable(g: Gemm, threads: int) -> bool:
    """The Hopper path with A from registers (tc::gemm_rs_sm90): A a whole fragment (not
    transposed), B a whole shared tile with a supported row length, warpgroups along M."""
    m, n, k = g.mnk
    if threads % 128 or g.a.buffer.scope != "fragment" or g.b.buffer.scope != "shared" or g.trans_a:
        return False
    if not (g.a.covers_whole() and g.b.covers_whole() and g.c.covers_whole()):
        return False
    return (g.a.buffer.dtype.name in MMA_DTYPES and g.b.buffer.dtype == g.a.buffer.dtype
            and g.c.buffer.dtype.name == "float32" and m % (64 * (threads // 128)) == 0 and n % 8 == 0
            and k % 16 == 0 and wgmma_row_ok(g.b.buffer.shape[-1], g.b.buffer.dtype.bytes))


class _Inference:
    def __init__(self, kernel: Kernel, use_wgmma: bool = False, forced_panels: frozenset = frozenset(),
                 tensor_cores: bool = True, fp8_mma: bool = False):
        self.use_wgmma = use_wgmma
        self.fp8_mma = fp8_mma   # mma.sync m16n8k32 for 8-bit floats (sm_89+)
        self.tensor_cores = tensor_cores   # False: the CPU target's thread-level mode (scalar dot products)
        self.forced_panels = forced_panels  # panel-row tiles an mma.sync gemm of another T.ws branch reads
        self.mma_panels: set = set()        # the ones this context's mma.sync gemms read
        self.kernel = kernel
        self.threads = kernel.num_threads
        self.layouts: dict = {}
        self.reasons: dict = {}
        self.plans: dict = {}
        self._uniform = None  # fragments some nest or copy indexes uniformly (_uniformly_indexed)
        self.notes: list = []  # one line per gemm: the path chosen and, if wgmma was asked for, why not
        self.views = fragment_views(kernel.body)  # T.reshape of a fragment: the same registers, reshaped

    def set(self, buf: Buffer, layout: FragmentLayout, why, span, through_view=False) -> bool:
        old = self.layouts.get(buf)
        if old is not None:
            if not old.equivalent(layout):
                raise TilecraftError(
                    f"conflicting register layouts for {buf.name}: {self.reasons[buf]} gives it "
                    f"{old.describe()}, but {why} needs {layout.describe()}", span,
                    hint="copy it into a second fragment (T.copy) to change its layout")
            return False
        if not same_seq(layout.shape, buf.shape):
            raise TilecraftError(f"internal: layout shape {layout.shape} for {buf.name}{buf.shape}", span)
        self.layouts[buf] = layout
        self.reasons[buf] = why
        if not through_view:
            self._set_views(buf, layout, why)
        return True

    def _set_views(self, buf: Buffer, layout: FragmentLayout, why):
        """A fragment and its reshaped views (T.reshape / T.view) name the same registers: once one
        of them has a layout, the others take it reshaped (ir/layout/reshape.py), slot for slot."""
        base = self.views[buf].base if buf in self.views else buf
        group = [base] + [v for v, s in self.views.items() if s.base is base]
        for other in group:
            if other is buf:
                continue
            view = self.views[other if other is not base else buf]
            lay = reshape_layout(layout, other.shape)
            if lay is None:
                raise TilecraftError(
                    f"T.reshape({view.base.name}, {tuple(view.buffer.shape)}): {why} gives {buf.name} the register "
                    f"layout {layout.describe()}, which cannot be named with the shape {tuple(other.shape)} of "
                    f"{other.name} on the CUDA target (its row-major elements do not split into whole digits)",
                    view.span, hint="copy the fragment into a fragment of the new shape (T.Parallel) instead")
            self.set(other, lay, f"{why}, seen through T.reshape", view.span, through_view=True)

    def run(self, body):
        gemms = collect(body, lambda n: isinstance(n, Gemm))
        a_from_frag = self._fragment_a_sources(body, gemms)
        veto = self._panel_vetoes(body, gemms) if self.use_wgmma else set()
        self._veto = veto
        frag_a_accs = {h.c.buffer for h in gemms if h.a.buffer.scope == "fragment"}
        rs, rs_sources = self._wgmma_rs_chains(body, gemms, veto) if self.use_wgmma else (set(), set())
        for g in gemms:
            m, n, k = g.mnk
            if g in rs:  # A from registers: the accumulator layout of the wgmma that produced it
                self.plans[g] = WgmmaRSPlan(self.threads // 128)
                self._note(g, f"wgmma, A from registers, {self.threads // 128} warpgroup(s)")
                line = g.span.line if g.span else "?"
                self.set(g.a.buffer, wgmma_accumulator_layout((m, k), self.threads),
                         f"T.gemm A operand on wgmma from registers (line {line})", g.span)
                self.set(g.c.buffer, wgmma_accumulator_layout((m, n), self.threads),
                         f"T.gemm accumulator on wgmma (line {line})", g.span)
                continue
            if (self.use_wgmma and g not in veto and (g.c.buffer not in a_from_frag or g.c.buffer in rs_sources)
                    and wgmma_capable(g, self.threads, along_m=g.c.buffer in rs_sources)):
                plan = WgmmaPlan(self.threads // 128, wgmma_split(g, self.threads))
                self.plans[g] = plan
                self._note(g, plan.describe().replace("wgmma ", "wgmma, ", 1))
                self.set(g.c.buffer, wgmma_accumulator_layout((m, n), self.threads, plan.wg_n),
                         f"T.gemm accumulator on wgmma (line {g.span.line if g.span else '?'})", g.span)
                continue
            if not self.tensor_cores:
                self.plans[g] = None
                self._note(g, "scalar dot products (the CPU target's thread-level mode: each thread computes its "
                              "accumulator elements)")
                continue
            if g.a.buffer.dtype.name in FP8_DTYPES and not mma_capable(g, self.threads, self.fp8_mma):
                self.plans[g] = None
                self._note(g, "scalar dot products (" + self._fp8_why_not(g) + ")")
                continue
            if not mma_capable(g, self.threads, self.fp8_mma):
                self.plans[g] = None
                self._note(g, "scalar dot products (no tensor-core path: float16/bfloat16 inputs, a float32 "
                              "accumulator, K % 16 == 0 and tiles that split into 16x8 warp tiles are needed)")
                continue
            # A from registers needs warps along M only; gemms sharing its accumulator follow it (one layout).
            # A kernel written with T.wgmma_gemm expects wgmma's warps, all along M, for every gemm (TileLang
            # runs them all on wgmma there): its row vectors are shared between accumulators of different widths
            along_m = g.c.buffer in a_from_frag or g.c.buffer in frag_a_accs or any(h.wgmma_requested for h in gemms)
            policy = "FullRow" if along_m else g.policy
            wm, wn = warp_partition(m, n, self.threads // 32, policy)
            self.plans[g] = Mma80Plan(wm, wn)
            why_not = ""
            if self.use_wgmma:
                why_not = ("; tc.use_wgmma: it reads a shared tile with rows over 128 bytes that an mma.sync gemm "
                           "of this kernel reads too (wgmma would store it in column panels)" if g in veto else
                           "; tc.use_wgmma: its accumulator feeds a gemm's register operand that cannot be on wgmma"
                           if g.c.buffer in a_from_frag else
                           "; tc.use_wgmma: needs threads % 128 == 0, block_M a multiple of 64 (warpgroups beyond block_M / 64 split N), "
                           "whole shared A/B tiles with rows of 32/64/128 bytes or a multiple of 128")
            self._note(g, f"mma.sync, {wm}x{wn} warps" + why_not)
            self.set(g.c.buffer, mma_accumulator_layout((m, n), self.threads, wm, wn),
                     f"T.gemm accumulator (line {g.span.line if g.span else '?'})", g.span)
        for buf, span in outside_parallel_fragments(body):
            # read or written outside any T.Parallel loop: every thread must hold every element
            self.set(buf, replicated_layout(buf.shape, self.threads),
                     f"the access outside a T.Parallel loop (line {span.line if span else '?'})", span)
        nests = parallel_nests(body)
        ops = collect(body, lambda n: isinstance(n, (Copy, Reduce)))
        frags = [a.buffer for a in collect(body, lambda n: isinstance(n, Alloc))
                 if a.buffer.scope == "fragment"]
        while True:
            while self._propagate(ops, nests):
                pass
            if self._propagate_partial(ops, nests) or self._operand_layouts(gemms):
                continue
            missing = [b for b in frags if b not in self.layouts]
            if not missing:
                break
            # fragments indexed uniformly (`lse[k, j]`, `T.copy(lse[k, :], x)`) last: their layout
            # should come from the loops and copies that use them, not from a default
            b = min(missing, key=lambda x: x in self._uniformly_indexed(nests, ops))
            self.set(b, self._default(b, ops), "the default layout", b.span)
        return self.layouts, self.plans

    def _fp8_why_not(self, g: Gemm) -> str:
        """The plan note of an 8-bit-float gemm left on scalar dot products: its only tensor-core
        path is wgmma (sm_90a), so say which condition failed."""
        if not self.fp8_mma:
            return ("this target has no 8-bit float tensor cores: sm_80 has no fp8 MMA (mma.sync m16n8k32 .e4m3 "
                    "needs sm_89+, wgmma's k32 form sm_90a)")
        why = fp8_wgmma_refusal(g)
        if why is None and g.a.buffer.scope != "shared":
            why = "A is in registers (an 8-bit A operand is read from shared memory only)"
        if not self.use_wgmma:
            return "mma.sync m16n8k32: " + (why or "tiles that split into 16x8 warp tiles are needed")
        if why is None and g in self._veto:
            why = "it reads a shared tile with rows over 128 bytes that an mma.sync gemm of this kernel reads too"
        return "wgmma: " + (why or "needs threads % 128 == 0, block_M a multiple of 64 (warpgroups beyond block_M / 64 split N), a float32 "
                            "accumulator, whole shared A/B tiles with rows of 32/64/128 bytes or a multiple of 128")

    def _uniformly_indexed(self, nests, ops) -> set:
        if self._uniform is None:
            found = set()
            for vars_, _, inner, _ in nests:
                for buf, idx in fragment_accesses(inner):
                    dims = None if loop_dims(idx, vars_) is not None else mixed_dims(idx, vars_)
                    if dims is not None and any(k is None and buf.shape[d] > 1 for d, k in enumerate(dims)):
                        found.add(buf)
                    if loop_dims(idx, vars_) is None and window_dims(idx, vars_) is not None:
                        found.add(buf)  # read in windows (`x[i, jj * 4 + j]`): laid out by that loop
            for op in ops:
                if (isinstance(op, Copy) and op.src.buffer.scope == "fragment" and op.dst.buffer.scope == "fragment"
                        and not op.src.covers_whole() and slice_dims(op.src, op.dst)[0] is not None):
                    found.add(op.src.buffer)
            self._uniform = found
        return self._uniform

    def _slice_copy(self, op: Copy) -> bool:
        """`T.copy(src[k, :], dst)` with `k` uniform: src's whole dimensions are laid out as dst,
        the sliced ones stay whole in every thread's registers (cuda_ops/copy.py)."""
        s, d = op.src.buffer, op.dst.buffer
        dims, full = slice_dims(op.src, op.dst)
        if dims is None:
            return False
        if d in self.layouts and s not in self.layouts:
            ext = extend_uniform(self.layouts[d], s.shape, dims)
            return ext is not None and self.set(s, ext, f"T.copy of a slice into {d.name}", op.span)
        if s in self.layouts and d not in self.layouts and uniform_slot_part(self.layouts[s], dims) is not None:
            return self.set(d, self.layouts[s].project(full), f"T.copy of a slice of {s.name}", op.span)
        return False

    def _operand_layouts(self, gemms) -> bool:
        """Once nothing else propagates: a fragment A operand nothing has laid out (filled from
        memory, as MLA decoding's `Q_local`) takes the tensor-core A layout of its mma.sync gemm,
        so the gemm reads it from registers.  Others are staged through shared memory
        (transform/stage_gemm_operands.py)."""
        for g in gemms:
            plan = self.plans.get(g)
            a = g.a.buffer
            if (a.scope != "fragment" or a in self.layouts or not isinstance(plan, Mma80Plan) or g.trans_a
                    or plan.warps_n != 1 or not g.a.covers_whole()):
                continue
            m, _, k = g.mnk
            line = g.span.line if g.span else "?"
            return self.set(a, mma_accumulator_layout((m, k), self.threads, plan.warps_m, 1),
                            f"T.gemm A operand (line {line})", g.span)
        return False

    def _default(self, b: Buffer, ops) -> FragmentLayout:
        # vectors sized by the narrowest element the fragment is copied from or to, so a
        # float32 fragment filled from float16 memory still moves 16 bytes per access
        elem = b.dtype.bytes
        for op in ops:
            if isinstance(op, Copy) and b in (op.src.buffer, op.dst.buffer):
                other = op.dst.buffer if op.src.buffer is b else op.src.buffer
                elem = min(elem, other.dtype.bytes)
        return default_layout(b.shape, self.threads, elem)

    def _propagate_partial(self, ops, nests) -> bool:
        """Once nothing else propagates: a nest whose only laid-out fragments are indexed by some
        of its loop variables (row vectors) runs over the best of them extended over the other loop
        dimensions (ir.semantics.partial_anchor), and the nest's other fragments follow it.  A nest
        whose fully indexed fragment would get a default layout consistent with the row vector is
        left to the defaults."""
        changed = False
        for vars_, extents, inner, loop in nests:
            accesses = fragment_accesses(inner)
            if parallel_anchor(accesses, vars_, eligible=lambda b: b in self.layouts) is not None:
                continue
            anchor = partial_anchor(accesses, vars_, eligible=lambda b: b in self.layouts)
            if anchor is None:
                continue
            abuf, adims = anchor
            base = extend_over_loop(self.layouts[abuf], adims, extents, not writes_a_projection(inner, vars_))
            if base is None:
                continue
            full = parallel_anchor(accesses, vars_)
            if full is not None:
                fdims = full[1]
                order = [fdims.index(k) for k in range(len(vars_))]
                dflt = self._default(full[0], ops)
                dbase = FragmentLayout(tuple(extents), dflt.threads, dflt.thread_digits, dflt.reg_digits,
                                       tuple(dflt.coords[o] for o in order))
                if dbase.project(adims).equivalent(self.layouts[abuf]):
                    continue
            for buf, idx in accesses:
                dims = loop_dims(idx, vars_)
                if buf in self.layouts or dims is None or len(set(dims)) != len(dims):
                    continue
                proj = base.project(dims)
                if same_seq(proj.shape, buf.shape):
                    changed |= self.set(buf, proj, f"the T.Parallel loop using {abuf.name} (a row vector)",
                                        loop.span)
        return changed

    def _window(self, buf, idx, vars_, base, abuf, loop) -> bool:
        """`buf[i, jj * 4 + j]` in a nest over (i, j) (ir.semantics.window_dims): buf is laid out
        so that every window holds its columns in the threads that run the loop's columns, one
        register digit per window (layout.fragment.extend_window)."""
        dims = window_dims(idx, vars_)
        loop_pos = [k[0] if isinstance(k, tuple) else k for k in dims or () if k is not None]
        if dims is None or len(set(loop_pos)) != len(loop_pos):
            return False
        ext = extend_window(base, buf.shape, dims)
        return ext is not None and self.set(buf, ext[0], f"the T.Parallel loop using {abuf.name} "
                                            f"(column windows of {buf.name})", loop.span)

    def _note(self, g: Gemm, what: str):
        m, n, k = g.mnk
        self.notes.append(f"{where(g.span)}: T.gemm {m}x{n}x{k} on {what}" + (f"; {g.note}" if g.note else ""))

    def _wgmma_rs_chains(self, body, gemms, veto=frozenset()) -> tuple[set, set]:
        """Gemms whose fragment A can come straight from registers on wgmma (FlashAttention's
        P @ V): A a whole fragment reached through fragment copies only from accumulators of
        wgmma-capable gemms (Q @ K^T), so the accumulator layout carries over.  Returns those
        gemms and the accumulators feeding them.  Gemms in `veto` take neither wgmma form."""
        rs, sources = set(), set()
        for g in gemms:
            if g in veto or not wgmma_rs_capable(g, self.threads):
                continue
            feeding = self._fragment_a_sources(body, [g])
            producers = [h for h in gemms if h.c.buffer in feeding]
            if producers and all(h not in veto and wgmma_capable(h, self.threads, along_m=True) for h in producers):
                rs.add(g)
                sources |= {h.c.buffer for h in producers}
        return rs, sources

    def _panel_vetoes(self, body, gemms) -> set:
        """Gemms kept off wgmma because a shared tile they read is also read by a gemm that takes
        mma.sync, and its rows are over 128 bytes: wgmma stores such rows in column panels, which the
        mma.sync path cannot address (transform/lower_cuda.py), so every reader takes mma.sync; and
        gemms accumulating into the accumulator of an mma.sync gemm (one fragment, one layout)."""
        veto: set = set()
        while True:
            rs, _ = self._wgmma_rs_chains(body, gemms, veto)
            on_mma = [g for g in gemms if g not in rs and (g in veto or not wgmma_capable(g, self.threads))]
            self.mma_panels = {r.buffer for g in on_mma for r in (g.a, g.b)
                               if r.buffer.scope == "shared" and r.buffer.shape[-1] * r.buffer.dtype.bytes > 128}
            panels = self.mma_panels | self.forced_panels
            shared_acc = {g.c.buffer for g in on_mma}  # one accumulator, one layout: its gemms agree
            new = {g for g in gemms if g not in veto and g not in on_mma
                   and (any(r.buffer in panels for r in (g.a, g.b)) or g.c.buffer in shared_acc)}
            if not new:
                return veto
            veto |= new

    def _fragment_a_sources(self, body, gemms) -> set:
        """Accumulators whose values reach some gemm's A operand through fragment copies, or through
        element-wise T.Parallel nests that write the fragment at exactly the loop's indices from
        same-shaped fragments read at those indices (`dS[i, j] = P[i, j] * (dP[i, j] - D[j])`: the
        nest is laid out like them, so their layout carries over)."""
        copies = [c for c in collect(body, lambda n: isinstance(n, Copy))
                  if c.src.buffer.scope == "fragment" and c.dst.buffer.scope == "fragment"]
        elementwise = _elementwise_feeds(body)
        sources = set()
        for g in gemms:
            if g.a.buffer.scope != "fragment":
                continue
            frontier = {g.a.buffer}
            while frontier:
                b = frontier.pop()
                sources.add(b)
                frontier |= {c.src.buffer for c in copies if c.dst.buffer is b and c.src.buffer not in sources}
                frontier |= {s for s in elementwise.get(b, ()) if s not in sources}
        return sources

    def _propagate(self, ops, nests) -> bool:
        changed = False
        for op in ops:
            if isinstance(op, Copy) and op.src.buffer.scope == "fragment" and op.dst.buffer.scope == "fragment":
                s, d = op.src.buffer, op.dst.buffer
                if s in self.layouts and d not in self.layouts and same_seq(s.shape, d.shape):
                    changed |= self.set(d, self.layouts[s], f"T.copy from {s.name}", op.span)
                elif d in self.layouts and s not in self.layouts and same_seq(s.shape, d.shape):
                    changed |= self.set(s, self.layouts[d], f"T.copy into {d.name}", op.span)
                elif not same_seq(s.shape, d.shape) and op.dst.covers_whole():
                    changed |= self._slice_copy(op)
            elif isinstance(op, Reduce) and op.src.scope == "fragment" and op.dst.scope == "fragment":
                if op.src in self.layouts:
                    keep = [i for i in range(op.src.ndim) if i != op.dim]
                    proj = self.layouts[op.src].project(keep)
                    if op.dst.ndim == op.src.ndim:  # keepdim form: re-insert a unit dimension
                        continue
                    changed |= self.set(op.dst, proj, f"T.reduce_{op.kind} of {op.src.name}", op.span)
        for vars_, extents, inner, loop in nests:
            accesses = fragment_accesses(inner)
            anchor = parallel_anchor(accesses, vars_, eligible=lambda b: b in self.layouts)
            if anchor is None:
                continue  # no laid-out fragment covers the whole nest (yet); leave the rest to defaults
            abuf, adims = anchor
            # a layout over the loop's full index space, re-expressed by loop variable position
            full = self.layouts[abuf]
            order = [adims.index(k) for k in range(len(vars_))]
            base = FragmentLayout(tuple(extents), full.threads, full.thread_digits, full.reg_digits,
                                  tuple(full.coords[o] for o in order))
            for buf, idx in accesses:
                if buf in self.layouts:
                    continue
                dims = loop_dims(idx, vars_)
                if dims is None:
                    # uniform indices in some dimensions (`lse[k, j]`, `m[0]`): those dimensions
                    # live in every thread's registers, the others follow the loop
                    dims = mixed_dims(idx, vars_)
                    if dims is None:
                        changed |= self._window(buf, idx, vars_, base, abuf, loop)
                        continue
                    loop_pos = [k for k in dims if k is not None]
                    if len(set(loop_pos)) != len(loop_pos):
                        continue
                    ext = extend_uniform(base, buf.shape, dims)
                    if ext is not None:
                        changed |= self.set(buf, ext, f"the T.Parallel loop using {abuf.name} "
                                            f"(uniform indices in {buf.name})", loop.span)
                    continue
                if len(set(dims)) != len(dims):
                    continue
                proj = base.project(dims)
                if same_seq(proj.shape, buf.shape):
                    changed |= self.set(buf, proj, f"the T.Parallel loop using {abuf.name}", loop.span)
        return changed


def infer_layouts(func: PrimFunc, ctx) -> PrimFunc:
    layouts, plans, notes = {}, {}, []
    use_wgmma = ctx.options.wgmma and ctx.target.has("wgmma")
    tensor_cores = ctx.target.has("mma_sync")   # every CUDA arch here; not the CPU target's thread-level mode
    fp8_mma = ctx.target.has("mma_fp8")
    for kernel in collect(func.body, lambda n: isinstance(n, Kernel)):
        contexts = thread_contexts(kernel, tensor_cores, ctx.target.has("wgmma"))  # T.ws branches: their own threads (warp_groups.py)
        forced: frozenset = frozenset()
        while True:  # a panel-row tile read on mma.sync in one branch keeps it off wgmma in every branch
            runs = [(_Inference(k, use_wgmma, forced, tensor_cores, fp8_mma), body) for k, body in contexts]
            results = [inf.run(body) for inf, body in runs]
            found = frozenset().union(*(inf.mma_panels for inf, _ in runs)) if runs else frozenset()
            if found <= forced:
                break
            forced |= found
        for (inf, _), (lay, pl) in zip(runs, results):
            layouts.update(lay)
            plans.update(pl)
            notes += inf.notes
    if plans and ctx.target.sm >= 100:
        notes.append(f"{ctx.target.arch}: the gemms take the portable tensor-core path (mma.sync); tilecraft has no "
                     f"Blackwell (tcgen05) path yet")
    return (func.with_body(_PlanGemms(plans).visit(func.body))
            .with_lowering(fragment_layouts=layouts, plan_notes=func.lowering.plan_notes + tuple(notes)))


class _PlanGemms(Mutator):
    """Put each gemm's plan on the op itself, so rewrites that rebuild the op carry it."""

    def __init__(self, plans: dict):
        super().__init__()
        self.plans = plans

    def visit_Gemm(self, g: Gemm):
        plan = self.plans.get(g)
        return g if plan is None else replace(g, plan=plan)
