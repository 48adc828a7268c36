"""CUDA target code generation: thread-level IR → one CUDA C++ translation unit.

One `extern "C" __global__` function per kernel, parameters in signature order (tensor pointers,
then symbolic sizes as int).  Shared buffers are views into one dynamic shared-memory array at the
offsets `plan_shared_memory` chose; swizzled ones are addressed through `tc::swizzle_offset`.
Typed intrinsics (ir/intrinsics) print as calls into the header library
(`tilecraft/device/include/tilecraft`) through their registered emitters (intrinsics_cuda.py).
Returns the source and its launch record (launch.py: grid, block, shared bytes, parameter kinds...).
"""
from __future__ import annotations

import json

from ..errors import TilecraftError
from ..ir import Annotate, AnnotationKey, Kernel, WarpSpecialize, collect
from ..ir import expr as E
from ..ir import intrinsics as I
from ..ir.func import PrimFunc
from ..ir.lowering import SWIZZLE_SM80, SWIZZLE_SM90
from ..ir.printer import to_text
from ..launch import Grid, GridError, HeaderFeature, LaunchRecord, ParamKind, symbol_param_kind
from . import intrinsics_cuda  # noqa: F401  (registers the CUDA emitters)
from .c_printer import CPrinter, paste_imports, storage_len, view_line, viewed_bases

def _fp8(a, _out) -> bool:
    return a.is_float and a.bits == 8


def _half(_a, out) -> bool:
    return out.is_float and out.bits < 32


# How a Binary on a narrow float type prints: (when, for which ops, the text), first match wins.
# __nv_fp8_* have no arithmetic or comparison operators: compute in float, round once to the type;
# the 16-bit types' operators are the header's, parenthesised like the generic printer's.
_NARROW_FLOAT_BINARY = (
    (_fp8, ("+", "-", "*", "/"), "{t}(float({a}) {op} float({b}))"),
    (_fp8, ("min", "max"), "{t}(tc::{op}(float({a}), float({b})))"),
    (_fp8, ("<", "<=", ">", ">=", "==", "!="), "(float({a}) {op} float({b}))"),
    (_half, ("+", "-", "*", "/"), "({a} {op} {b})"),
)


class CudaPrinter(CPrinter):
    _cache: dict = {}

    def __init__(self, func: PrimFunc, target):
        super().__init__()
        self.func = func
        self.target = target
        self.smem = func.lowering.smem_offsets
        self.swizzled = func.lowering.swizzled(SWIZZLE_SM80)
        self.swizzled_sm90 = func.lowering.swizzled(SWIZZLE_SM90)
        self.kernel = None
        self.consumer_threads = 0   # inside a warp-specialized block's consumer role: its thread count
        self.group_barrier = None   # inside a T.ws branch: its named barrier (NamedBarrierSync)
        self.lane_barriers: dict = {}  # (kernel, thread range) -> named barrier id of a branch of whole warps
        self.features: set = set()     # HeaderFeatures the printed code needs (launch.py)

    def type_name(self, d):
        if d.is_float and d.bits == 8:
            self.features.add(HeaderFeature.FP8)   # the 8-bit float types are parsed only when used
        # NVRTC has no <cstdint>: the header library defines the fixed-width integers in tc::
        if d.packed:   # an int4 value sign-extended in a byte; int4 storage: bytes, two each
            return "tc::int8_t"
        if d.is_int and d.bits != 32:
            return f"tc::{d.kind}{d.bits}_t"
        return super().type_name(d)

    def float_literal(self, value, d):
        s = super().float_literal(value, d)
        if d.bits < 32 and d.is_float and "infinity" not in s and "nan" not in s:
            return f"tc::cast<{self.type_name(d)}>({s.split('(', 1)[1][:-1]})"
        return s

    def visit_Cast(self, e):
        wide = self.widened_cast(e)
        if wide is not None:
            return wide
        if e.dtype.packed:  # into int4: the low 4 bits (an integer's; a float truncated toward zero first)
            return f"tc::to_s4(tc::cast<int>({self.expr(e.value)}))"
        return f"tc::cast<{self.type_name(e.dtype)}>({self.expr(e.value)})"

    def visit_Binary(self, e):
        """Arithmetic on the narrow float types, by the rules of `_NARROW_FLOAT_BINARY`; a 32-bit integer
        max with 0 on sm_90+ as tc::relu_s32 (math.h: ptxas 13.0 fuses max(0, min(x, C)) with a later
        `== C` into VIMNMX.RELU and reads its predicate the wrong way round)."""
        a = e.a.dtype
        if e.op == "max" and a.kind == "int" and a.bits == 32 and self.target.sm >= 90:
            zero = [x for x in (e.a, e.b) if isinstance(x, E.Const) and x.value == 0]
            if zero:
                other = e.b if zero[0] is e.a else e.a
                return f"tc::relu_s32({self.expr(other)})"
        for applies, ops, form in _NARROW_FLOAT_BINARY:
            if e.op in ops and applies(a, e.dtype):
                t = self.type_name(e.dtype) if "{t}" in form else ""
                return form.format(t=t, op=e.op, a=self.expr(e.a), b=self.expr(e.b))
        return super().visit_Binary(e)

    def visit_Unary(self, e):
        if e.op == "neg" and e.dtype.is_float and e.dtype.bits == 8:
            return f"{self.type_name(e.dtype)}(-float({self.expr(e.a)}))"
        if e.op == "neg":
            return f"(-{self.expr(e.a)})"
        return super().visit_Unary(e)

    def truncmod(self, e):
        a, b = e.args
        if not e.dtype.is_float:
            return f"({self.expr(a)} % {self.expr(b)})"
        return f"tc::fmod({self.expr(a)}, {self.expr(b)})"

    def visit_Call(self, e):
        if e.op == "truncmod":
            return self.truncmod(e)
        if e.op == "reinterpret":
            return super().visit_Call(e)
        if e.op in E.MATH_FUNCS:
            return f"tc::{e.op}({', '.join(self.expr(a) for a in e.args)})"
        return self.intrinsic(e)

    def intrinsic(self, e):
        raise TilecraftError(f"intrinsic {e.op} has no CUDA spelling", e.span)

    def visit_IntrinsicCall(self, e):
        """Device intrinsics print only through their registered CUDA emitters."""
        return I.emitter(e.intrinsic, "cuda")(self, e)

    def offset(self, buf, indices):
        fn = ("tc::swizzle_offset_sm90" if buf in self.swizzled_sm90
              else "tc::swizzle_offset" if buf in self.swizzled else None)
        if fn is None:
            return super().offset(buf, indices)
        lead, rows = _split_rows(buf, indices)
        # the sm90 layout stores rows over 128 bytes in column panels as tall as the tile
        tall = f", {buf.shape[-2]}" if fn == "tc::swizzle_offset_sm90" else ""
        swz = f"{fn}<{buf.shape[-1]}, {buf.dtype.bytes}{tall}>({self.expr(rows)}, {self.expr(indices[-1])})"
        return swz if lead is None else f"{self.expr(lead)} + {swz}"

    def visit_Ref(self, e):
        if e.buffer.dtype.packed:
            return self.packed_address(e.buffer, e.indices)
        return f"(&{self.visit_Load(e)})"

    def packed_store(self, buf):
        # a shared or global byte holds two elements other threads may write at the same time
        return "tc::s4_set_atomic" if buf.scope in ("shared", "global") else "tc::s4_set"

    def visit_Sync(self, s):
        if self.group_barrier is not None:  # a T.ws branch: only its threads reach the barrier
            self.stmt(I.evaluate(self.group_barrier))
        elif self.consumer_threads:   # the producer warpgroup never joins: a barrier of the consumers
            self.stmt(I.evaluate(I.ConsumerSync(self.consumer_threads)))
        else:
            self.doc.line("__syncthreads();")

    def visit_WarpSpecialize(self, s):
        """Producer warpgroup = threads [consumer_threads, +128), one thread of which runs the
        producer; every other thread is a consumer.  setmaxnreg needs each role to be one branch
        of a single if/else, executed by whole warpgroups."""
        d = self.doc
        d.line(f"if (tc_tid >= {s.consumer_threads}) {{")
        d.indent()
        if s.producer_regs:
            self.stmt(I.evaluate(I.WarpgroupRegDealloc(s.producer_regs)))
        d.line(f"if (tc_tid == {s.consumer_threads}) {{")
        d.indent()
        self.stmt(s.producer)
        d.dedent()
        d.line("}")
        d.dedent()
        d.line("} else {")
        d.indent()
        if s.consumer_regs:
            self.stmt(I.evaluate(I.WarpgroupRegAlloc(s.consumer_regs)))
        outer, self.consumer_threads = self.consumer_threads, s.consumer_threads
        self.stmt(s.consumer)
        self.consumer_threads = outer
        d.dedent()
        d.line("}")

    def visit_WarpGroupScope(self, s):
        """`T.ws(g0, ...)`: the threads of warp groups g0.. (contiguous, transform/warp_groups/);
        a barrier inside is a named barrier of those threads (id 2 + g0: 0 is __syncthreads, 1
        the automatic warp specialization's consumer barrier)."""
        lo, hi = s.bounds(self.kernel.num_threads)
        what = f"threads [{lo}, {hi})" if s.lanes else f"T.ws{tuple(s.groups)}"
        self.doc.line(f"if (tc_tid >= {lo} && tc_tid < {hi}) {{  // {what}")
        self.doc.indent()
        outer, self.group_barrier = self.group_barrier, I.NamedBarrierSync(self.scope_barrier_id(s), hi - lo)
        self.stmt(s.body)
        self.group_barrier = outer
        self.doc.dedent()
        self.doc.line("}")

    def scope_barrier_id(self, s) -> int:
        """The named barrier of a branch's threads: 2 + its first warp group for `T.ws` branches (at
        most 8 warp groups: ids 2..9); 15, 14, ... for branches of whole warps (`lanes`), one per
        distinct thread range of the kernel (warp_groups.check_scope allows at most 6)."""
        if not s.lanes:
            return 2 + s.groups[0]
        ids = self.lane_barriers.setdefault(self.kernel, {})
        return ids.setdefault(s.lanes, 15 - len(ids))

    def loop_pragma(self, s):
        if s.annotation("unroll"):   # a partial unroll (the split GEMM's consumer loop: by its ring's depth)
            return f"#pragma unroll {s.annotation('unroll')}"
        return "#pragma unroll" if s.kind == "unroll" else None

    def visit_Alloc(self, s):
        b = s.buffer
        t = self.type_name(b.dtype)
        if b.scope == "shared":
            # a base that T.view reinterprets is reached by two names: no __restrict__ promise
            restrict = "" if b in viewed_bases(self.func) else " __restrict__"
            self.doc.line(f"{t}*{restrict} {self.name(b)} = reinterpret_cast<{t}*>(tc_smem + {self.smem[b]});")
        else:
            self.doc.line(f"{t} {self.name(b)}[{storage_len(b)}];")
        if s.init is not None:
            self.doc.line(f"{self.name(b)}[0] = {self.expr(s.init)};")

    def visit_View(self, s):
        self.doc.line(view_line(self, s))

    def visit_Annotate(self, s):
        pass

    def visit_Kernel(self, k: Kernel):
        raise TilecraftError("a kernel cannot contain another kernel", k.span)


def _flatten_rows(buf, indices):
    """Row index of a multi-dimensional shared tile seen as [rows][last dim]."""
    row = indices[0] if len(indices) > 1 else E.const(0)
    for idx, size in zip(indices[1:-1], buf.shape[1:-1]):
        row = E.binary("+", E.binary("*", row, size), idx)
    return row


def _split_rows(buf, indices):
    """(element offset of the leading indices, row inside the last two dims) of a swizzled tile
    with three or more dims, when each [rows][L] slice has a multiple of 8 rows; else (None, all
    rows flattened).  Both swizzles permute 16-byte chunks by row % 8 (and whole 8-row panels),
    so swizzle(R + r, c) == R * L + swizzle(r, c) for R % 8 == 0: a pipeline stage's offset is
    then a plain product, and the per-thread swizzled part stays the same across iterations
    (the compiler keeps it in a register instead of recomputing the XOR every k-tile)."""
    if len(indices) < 3 or buf.shape[-2] % 8:
        return None, _flatten_rows(buf, indices)
    lead = _flatten_rows(buf, tuple(indices[:-2]) + (E.const(0),))  # flat index over the leading dims
    per_slice = buf.shape[-2] * buf.shape[-1]
    return E.binary("*", lead, per_slice), indices[-2]


def _grid_expr(g) -> object:
    if isinstance(g, E.Const):
        return int(g.value)
    return to_text(g).replace("T.max", "max").replace("T.min", "min")


def _swizzle_blocks(p: CudaPrinter, k: Kernel, panel: int, grid: list):
    """Rasterize the 2-D grid in panels of `panel` block-rows so neighbouring blocks share
    tiles of A and B in L2."""
    d = p.doc
    gx, gy = grid[0], grid[1]
    d.line(f"const int tc_panel = {panel};")
    d.line(f"const int tc_lin = blockIdx.x + blockIdx.y * {gx};")
    d.line(f"const int tc_per_panel = tc_panel * {gx};")
    d.line(f"const int tc_p = tc_lin / tc_per_panel;")
    d.line(f"const int tc_rows = min(tc_panel, {gy} - tc_p * tc_panel);")
    d.line(f"const int tc_in = tc_lin - tc_p * tc_per_panel;")
    bx, by = p.name(k.block_vars[0]), p.name(k.block_vars[1])
    d.line(f"const int {by} = tc_p * tc_panel + tc_in % tc_rows;")
    d.line(f"const int {bx} = tc_in / tc_rows;")


def generate_cuda(func: PrimFunc, target, configs=None) -> tuple:
    kernels = collect(func.body, lambda n: isinstance(n, Kernel))
    if len(kernels) != 1:
        raise TilecraftError(f"{func.name}: a CUDA program must contain exactly one T.Kernel, found {len(kernels)}",
                             func.span)
    k = kernels[0]
    p = CudaPrinter(func, target)
    p.kernel = k
    d = p.doc
    name = f"{func.name}_kernel"
    # a warp-specialized kernel launches one producer warpgroup beyond the program's threads, and
    # caps registers at launch (min 1 block per SM, or 2 for the two-block split) so setmaxnreg can
    # move them between the roles
    ws = collect(k.body, lambda n: isinstance(n, WarpSpecialize))
    threads = k.num_threads + (WarpSpecialize.PRODUCER_THREADS if ws else 0)
    # T.set_max_nreg by hand: likewise one block per SM, so the budgets it moves exist
    setmaxnreg = collect(k.body, lambda n: isinstance(n, I.IntrinsicCall)
                         and isinstance(n.intrinsic, (I.WarpgroupRegAlloc, I.WarpgroupRegDealloc)))
    bounds = f"{threads}, {ws[0].blocks_per_sm if ws else 1}" if ws or setmaxnreg else f"{threads}"
    d.line(f"// generated by tilecraft from {func.name} for {target.arch}")
    hopper = func.lowering.hopper
    if not hopper:
        d.line("#define TC_NO_WGMMA  // this kernel uses no wgmma: skip parsing those wrappers")
    else:  # parse only the wgmma shapes this kernel issues (device/gen_wgmma.py)
        d.line("#define TC_WGMMA_ONLY")
        for n in _wgmma_shapes(k):
            d.line(f"#define TC_WGMMA_N{n}")
    d.line('#include "tilecraft/tilecraft.h"')
    d.line("")
    paste_imports(d, func)
    iket = iket_events(k.body)
    if iket:
        _iket_meta_info(d, iket)
    params = [f"{p.type_name(b.dtype)}* __restrict__ {p.name(b)}" for b in func.params]
    params += [f"{p.type_name(s.dtype) if symbol_param_kind(s) is ParamKind.INT64 else 'int'} {p.name(s)}" for s in func.symbols]
    tma = func.lowering.tma_descs  # tensor maps, passed by value (device/include/tilecraft/tma.h)
    params += [f"const __grid_constant__ tc::TmaDesc tc_tma_desc_{i}" for i in range(len(tma))]
    # T.ClusterKernel: the cluster shape is compiled in, so an ordinary launch runs whole clusters
    cluster = f"__cluster_dims__({', '.join(map(str, k.cluster))}) " if k.cluster else ""
    d.line(f'extern "C" __global__ void {cluster}__launch_bounds__({bounds}) {name}({", ".join(params)}) {{')
    d.indent()
    d.line(f"extern __shared__ __align__({1024 if hopper else 128}) unsigned char tc_smem[];")
    tx, ty, _ = k.threads
    d.line(f"const int tc_tid = threadIdx.x + threadIdx.y * {tx} + threadIdx.z * {tx * ty};")
    for v, c in zip(k.thread_vars, "xyz"):
        d.line(f"const int {p.name(v)} = threadIdx.{c}; (void){p.name(v)};")
    for i in range(len(tma)):
        d.line(f"const tc::TmaDesc* tc_tma_{i} = &tc_tma_desc_{i};")
    rng = collect(k.body, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(n.intrinsic, I.RNG))
    if rng:
        d.line("tc::Philox4x32 tc_rng;  // T.rng_init / T.rng_rand: this thread's generator")
    grid = [p.expr(g) for g in k.grid]
    swz = collect(k.body, lambda n: isinstance(n, Annotate) and n.key == AnnotationKey.USE_SWIZZLE)
    # not in a cluster kernel: the raster would separate a cluster's blocks, whose ranks
    # (T.block_rank_in_cluster) are computed from the block indices
    if swz and len(k.block_vars) >= 2 and not func.symbols and not k.cluster:
        _swizzle_blocks(p, k, swz[0].value[0], grid)
        rest = k.block_vars[2:]
    else:
        rest = k.block_vars
    for v, c in zip(k.block_vars, "xyz"):
        if any(v is r for r in rest):
            d.line(f"const int {p.name(v)} = blockIdx.{c};")
    for v in k.block_vars:
        p.nonneg.add(v)
    for v in k.thread_vars:
        p.nonneg.add(v)
    p.stmt(k.body)
    d.dedent()
    d.line("}")
    block = (threads, 1, 1) if ws else tuple(k.threads)
    kinds = ((ParamKind.PTR,) * len(func.params) + tuple(symbol_param_kind(s) for s in func.symbols)
             + (ParamKind.TMA_DESC,) * len(tma))
    features = set(p.features)
    if rng:
        features.add(HeaderFeature.RNG)
    if iket:
        features.add(HeaderFeature.IKET)
    try:
        grid = Grid.of(k.grid, [_grid_expr(g) for g in k.grid])
    except GridError as e:
        raise TilecraftError(f"{func.name}: {e}", k.span) from None
    record = LaunchRecord(name, grid, block, int(func.lowering.smem_bytes), kinds, tuple(func.lowering.tma_descs),
                          features=frozenset(features), plan=tuple(func.lowering.plan_notes))
    text = d.text()
    # the optional parts of the header library this kernel uses, read from the IR it printed
    # (8-bit float types: the printer met one; the generator: an RNG intrinsic)
    defines = "".join(f"#define {f}\n" for f in (HeaderFeature.FP8, HeaderFeature.RNG, HeaderFeature.IKET)
                      if f in features)
    if defines:
        text = text.replace('#include "tilecraft/tilecraft.h"', defines + '#include "tilecraft/tilecraft.h"', 1)
    return text, record



def iket_events(node) -> dict:
    """The iket events (language/iket.py) `node` records: name -> event id."""
    calls = collect(node, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(n.intrinsic, I.IketEvent))
    return {c.intrinsic.name: c.intrinsic.event_id for c in calls}


def _iket_meta_info(d, events: dict) -> None:
    """The kernel's event table in the module, as TileLang's instrumented source carries one
    (`__iket_meta_info`): JSON text the launcher reads back and checks against the trace it writes
    (runtime/iket.py), so a trace never names events after another session's table."""
    text = json.dumps({"iket": 1, "events": dict(sorted(events.items(), key=lambda kv: kv[1]))})
    literal = "".join(c if (c.isascii() and c.isalnum()) or c in " _-:,{}[]." else f"\\{ord(c):03o}"
                      for c in text.encode().decode("latin-1"))   # each byte of the UTF-8 text
    d.line(f'__device__ __attribute__((used)) char __iket_meta_info[] = "{literal}";')
    d.line("")


def _wgmma_shapes(k: Kernel) -> list:
    """The wgmma n of every instruction the kernel's wgmma gemms issue: N in pieces of at most 256
    (gemm_sm90.h, Sm90NPieces)."""
    from ..ir.intrinsics import GemmRSSm90, GemmRSSm90Async, GemmSSSm90, IntrinsicCall
    ns = set()
    for c in collect(k.body, lambda n: isinstance(n, IntrinsicCall) and isinstance(n.intrinsic, (GemmSSSm90, GemmRSSm90, GemmRSSm90Async))):
        n = c.intrinsic.n // getattr(c.intrinsic, "wg_n", 1)
        ns.update(min(256, n - n0) for n0 in range(0, n, 256))
    return sorted(ns)
