"""Per-kernel lowering context for the CUDA target: the flat thread index, fragment layouts and
register arrays, and the two ways work is spread over threads (`per_slot`, `strided`)."""
from __future__ import annotations

import math

from ...errors import TilecraftError
from ...ir import (Buffer, For, If, Kernel, Region, Var, binary, const)
from ...ir.expr import thread_index
from ...ir.layout.fragment import FragmentLayout
from ...ir.layout.reshape import fragment_views
from ...ir.oob import out_of_bounds
from ...registry import Registry

CUDA_LOWERING = Registry("CUDA lowering")   # tile op class -> fn(op, ctx) -> Stmt
register = CUDA_LOWERING.register


class Ctx:
    def __init__(self, kernel: Kernel, layouts: dict, swizzled: set):
        self.kernel = kernel
        self.threads = kernel.num_threads
        self.tid = thread_index()
        self.layouts = layouts
        self.swizzled = swizzled  # shared tiles with the sm80 XOR swizzle (tc::gemm_ss SWZ_A / SWZ_B)
        self.regs: dict = {}
        # T.reshape of a fragment: view -> base, one register array (ir/layout/reshape.py)
        self.views = {b: v.base for b, v in fragment_views(kernel.body).items()}
        self.n = 0
        # shared buffers lowering creates for one statement (written, then read, never carried
        # to a later statement or iteration): plan_shared_memory may overlap them with anything
        # dead at that statement when the kernel is over its budget
        self.scratch: set = set()
        # tc.remapped_fragment_reads: T.Parallel reads of a fragment in another layout / in column
        # windows are accepted (lower_cuda._FragRewrite.slot); opt-in until verified on a GPU
        self.remapped_reads = False
        # lower_cuda sets this when the kernel's shared buffers, summed, exceed the per-block
        # limit: reductions then keep one scratch value per warp-row instead of one per thread
        self.compact_scratch = False
        # T.annotate_safe_value / T.annotate_padding: copies whose out-of-range fill is not zero
        # move element by element (the zero-filling cp.async / vector loads would give 0)
        self.oob = out_of_bounds(kernel.body)
        # sm_90+ and tc.bulk_reduce: shared tiles added into global memory go through the TMA unit
        # (misc._bulk_reduce); smem_layouts: the planned (swizzled) shared layouts, which it avoids
        self.bulk_reduce = False
        self.smem_layouts: dict = {}
        self.tma_reduces: dict = {}   # (tensor, tile) -> tma_reduce.TmaReduce
        self._only_added: dict = {}

    def for_threads(self, threads: int, base: int) -> "Ctx":
        """The context of a `T.ws` branch: `threads` threads from flat index `base` on; fragment
        registers are shared with the whole kernel's context (one array per fragment)."""
        sub = Ctx(self.kernel, self.layouts, self.swizzled)
        sub.threads = threads
        sub.tid = binary("-", self.tid, base) if base else self.tid
        sub.regs = self.regs
        sub.views = self.views
        sub.n = self.n
        sub.scratch = self.scratch
        sub.compact_scratch = self.compact_scratch
        sub.bulk_reduce, sub.smem_layouts, sub._only_added = self.bulk_reduce, self.smem_layouts, self._only_added
        sub.tma_reduces = self.tma_reduces
        return sub

    def only_atomically_added(self, buf: Buffer) -> bool:
        """The kernel touches global `buf` only as the destination of T.atomic_* (never loads, copies
        or stores it): nothing in the kernel can observe when its atomic adds complete."""
        if buf not in self._only_added:
            from ...ir import AtomicAdd, collect
            uses = len(collect(self.kernel.body, lambda n: n is buf))
            atomics = len(collect(self.kernel.body, lambda n: isinstance(n, AtomicAdd) and n.dst.buffer is buf))
            self._only_added[buf] = uses == atomics
        return self._only_added[buf]

    def var(self, base="r") -> Var:
        self.n += 1
        return Var(f"{base}{self.n}")

    def reg(self, frag: Buffer) -> Buffer:
        base = self.views.get(frag)
        if base is not None:
            return self.reg(base)
        r = self.regs.get(frag)
        if r is None:
            lay = self.layout(frag, None)
            r = self.regs[frag] = Buffer(frag.name, (lay.num_regs,), frag.dtype, "local", span=frag.span)
        return r

    def layout(self, frag: Buffer, span) -> FragmentLayout:
        lay = self.layouts.get(frag)
        if lay is None:
            raise TilecraftError(f"fragment {frag.name} has no register layout", span)
        return lay

    def digit(self, lay: FragmentLayout, name: str, r):
        """The value of one digit: from the thread index or from the register slot `r`."""
        d = lay.digit(name)
        if lay.is_thread_digit(name):
            stride, value, total = lay.thread_stride(name), self.tid, self.threads
        else:
            stride, value, total = lay.reg_stride(name), r, lay.num_regs
        v = binary("//", value, stride) if stride > 1 else value
        return v if stride * d.extent >= total else binary("%", v, d.extent)

    def coords(self, lay: FragmentLayout, r) -> list:
        out = []
        for c in lay.coords:
            total = const(0)
            for name, coef in c:
                total = binary("+", total, binary("*", self.digit(lay, name, r), coef))
            out.append(total)
        return out

    def strided_iterations(self, shape) -> int:
        """How many elements of `shape` each thread takes in `strided` (the last iteration may be partial)."""
        return -(-math.prod(shape) // self.threads)

    def strided(self, shape, body_fn, span=None, with_iteration=False):
        """Spread the elements of `shape` (row-major) over the block's threads.  `with_iteration`: body_fn
        also gets the thread's iteration number (an expression; const 0 when there is one iteration)."""
        total, t, iters = math.prod(shape), self.threads, self.strided_iterations(shape)
        v = self.var("e")
        e = binary("+", binary("*", v, t), self.tid) if iters > 1 else self.tid
        idx = []
        for k, s in enumerate(shape):
            inner = 1
            for s2 in shape[k + 1:]:
                inner *= s2
            x = binary("//", e, inner) if inner > 1 else e
            idx.append(binary("%", x, s) if k > 0 else x)
        body = body_fn(idx, v if iters > 1 else const(0)) if with_iteration else body_fn(idx)
        if total % t:
            body = If(binary("<", e, total), body)
        if iters == 1:
            return body
        # "once": every element is written by one thread in one iteration (see insert_syncs)
        return For(v, const(0), const(iters), "unroll" if iters <= 16 else "serial", body, span=span,
                   annotations=(("once", True),))

    def first_replica(self, lay: FragmentLayout, stmt):
        """Run `stmt` only in the threads holding the first copy of a replicated layout (thread
        digits no coordinate uses): side effects such as atomics must happen once per element."""
        used = set()
        for c in lay.coords:
            used |= {n for n, _ in c}
        cond = None
        for d in lay.thread_digits:
            if d.name not in used:
                c = binary("==", self.digit(lay, d.name, None), 0)
                cond = c if cond is None else binary("and", cond, c)
        return stmt if cond is None else If(cond, stmt)

    def valid(self, lay: FragmentLayout, coords):
        """For a padded layout: the condition that `coords` are inside the tile (None if always)."""
        cond = None
        for d in lay.padded_dims():
            c = binary("<", coords[d], lay.shape[d])
            cond = c if cond is None else binary("and", cond, c)
        return cond

    def per_slot(self, lay: FragmentLayout, body_fn, span=None):
        r = self.var("r")
        coords = self.coords(lay, r)
        body = body_fn(r, coords)
        ok = self.valid(lay, coords)
        return For(r, const(0), const(lay.num_regs), "unroll", body if ok is None else If(ok, body), span=span)


def _whole_fragment(region: Region, what, span):
    if not region.covers_whole():
        raise TilecraftError(f"{what}: a part of fragment {region.buffer.name} cannot be used here on the "
                             f"CUDA target yet; use the whole fragment", span)

