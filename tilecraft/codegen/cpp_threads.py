"""CPU target, thread-level mode: CUDA-lowered IR → C++ whose blocks run one fiber per CUDA thread.

For the programs transform/cpu_threads.py picks (thread indices, warp shuffles, concurrent warp
groups).  The IR is what the CUDA passes made of the program (per-thread code over `tc_tid`,
fragments as per-thread register arrays, shared buffers at `plan_shared_memory`'s offsets), and it
prints as the CPU printer prints expressions and types (codegen/cpp.py), with:

- each `T.Kernel` an OpenMP loop over its blocks, as on the tile path; a block runs the kernel body
  as a lambda once per thread, each thread a fiber (device/include/tilecraft_cpu_threads.h, its
  stack sized from the thread's register arrays), its shared memory one buffer per OpenMP thread;
- a `T.ClusterKernel` whose blocks arrive on each other's mbarriers (remote arrivals, lowered to
  `MbarArriveCluster` and `ClusterSync`) an OpenMP loop over its clusters instead: one pool of
  fibers runs every thread of the cluster's blocks together (each fiber its block's rank, indices
  and shared memory, the blocks' shared memories side by side at a fixed stride, so a remote
  arrival is the same offset in block `cta`'s); any other cluster kernel runs block by block;
- barriers (`__syncthreads`, a `T.ws` branch's named barrier, `T.sync_threads(id, n)`), warp
  exchanges (shuffles, warp reductions, `__syncwarp`) and mbarrier waits as calls that switch
  fibers; each names its site (file:line and source) for the deadlock report;
- the CUDA lowering's memory intrinsics (cp.async, vector loads and stores, fences) by the CUDA
  spelling, implemented in the header as plain copies; atomics, prints, asserts, externs and the
  random generator by the tile path's CPU emitters.  Anything else (tensor-core, TMA instructions:
  this mode plans no gemm on them) is refused at its line.

A false `T.device_assert` returns -1 and a deadlock -2 from the entry; `tc_error_text(rc)` says why.
"""
from __future__ import annotations

from ..errors import TilecraftError
from ..ir import Alloc, Kernel, collect
from ..ir import intrinsics as I
from ..ir.func import PrimFunc
from ..ir.lowering import SWIZZLE_SM80, SWIZZLE_SM90
from . import intrinsics_cuda  # noqa: F401  (registers the CUDA emitters this mode reuses)
from .c_printer import paste_imports, storage_len
from .cpp import CppPrinter, open_entry, std_includes, uses_iket

TARGET = "cpu_threads"
_STACK_BASE = 64 * 1024   # bytes per fiber besides its register arrays (frames, header calls)

# intrinsics printed by the tile path's CPU emitters (codegen/cpp.py) or by their CUDA spelling,
# which tilecraft_cpu_threads.h implements
_CPU_SPELLING = (*I.ATOMICS.values(), I.AtomicLoad, I.AtomicStore, *I.RNG, I.DeviceAssert, I.Extern,
                 I.Print, I.PrintElem, I.IketEvent)
_CUDA_SPELLING = (I.CpAsyncZfill, I.CpAsyncPipelinedZfill, I.CpAsyncCommit, I.CpAsyncWait, I.CpAsyncWaitAll,
                  I.VecLoadZfill, I.VecStore, I.VecConvert, I.FenceProxyAsyncShared, I.MbarInit, I.MbarArrive)


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class CppThreadsPrinter(CppPrinter):
    record_failure = "tc::simt::fail"   # an empty grid (codegen/cpp.py): the entry returns -2 with the text
    has_failed = "tc::simt::failed()"
    _cache: dict = {}

    def __init__(self, func: PrimFunc):
        super().__init__(func)
        self.smem = func.lowering.smem_offsets
        self.swizzled = func.lowering.swizzled(SWIZZLE_SM80)
        self.span = None            # the innermost statement being printed with a span
        self.group_barrier = None   # inside a T.ws branch: its named barrier (id, threads)
        self.lane_barriers: dict = {}
        self.cluster = None         # a kernel run a cluster at a time: (blocks, smem stride in bytes)

    # ---- where each wait is, for the deadlock report ----------------------------------------------
    def stmt(self, s):
        if s is None or getattr(s, "span", None) is None:
            return super().stmt(s)
        saved, self.span = self.span, s.span
        try:
            super().stmt(s)
        finally:
            self.span = saved

    def site(self) -> str:
        sp = self.span
        if sp is None:
            return _c_string("(no source line)")
        src = f" ({sp.source_line.strip()})" if sp.source_line else ""
        return _c_string(f"{sp.short()}{src}")

    # ---- statements and expressions ------------------------------------------------------------
    def offset(self, buf, indices):
        """A tile a layout annotation swizzles (T.annotate_layout): addressed as the CUDA printer does."""
        if buf not in self.swizzled:
            return super().offset(buf, indices)
        from .cuda import _split_rows
        lead, rows = _split_rows(buf, indices)
        swz = (f"tc::swizzle_offset<{buf.shape[-1]}, {buf.dtype.bytes}>({self.expr(rows)}, "
               f"{self.expr(indices[-1])})")
        return swz if lead is None else f"{self.expr(lead)} + {swz}"

    def visit_Var(self, e):
        return self.name(e)   # thread indices are this fiber's

    def loop_pragma(self, s):
        return None

    vector_loops = False   # shared memory is addressed through swizzles (offset above): not contiguous

    def visit_IntrinsicCall(self, e):
        cls = type(e.intrinsic)
        fn = I.EMITTERS.get((cls, TARGET))
        if fn is None and cls in _CPU_SPELLING:
            fn = I.EMITTERS.get((cls, "cpu"))
        if fn is None and cls in _CUDA_SPELLING:
            fn = I.EMITTERS.get((cls, "cuda"))
        if fn is None:
            raise TilecraftError(f"{e.intrinsic.describe()} is not available in the CPU target's thread-level mode "
                                 f"(a program whose blocks' threads are emulated); use the CUDA target", self.span)
        return fn(self, e)

    def visit_Alloc(self, s):
        b = s.buffer
        t = self.type_name(b.dtype)
        if b.scope == "shared":
            self.doc.line(f"{t}* {self.name(b)} = reinterpret_cast<{t}*>(tc_smem + {self.smem[b]});")
        else:
            self.doc.line(f"{t} {self.name(b)}[{storage_len(b)}];")
        if s.init is not None:
            self.doc.line(f"{self.name(b)}[0] = {self.expr(s.init)};")

    def visit_Sync(self, s):
        if self.group_barrier is not None:   # a T.ws branch: only its threads reach the barrier
            bid, n = self.group_barrier
            self.doc.line(f"tc::simt::barrier({bid}, {n}, {self.site()});")
        else:
            self.doc.line(f"tc::simt::sync_threads({self.site()});")

    def visit_WarpGroupScope(self, s):
        """As the CUDA printer: the branch's threads, and its named barrier for the barriers inside."""
        from .cuda import CudaPrinter
        lo, hi = s.bounds(self.kernel.num_threads)
        what = f"threads [{lo}, {hi})" if s.lanes else f"T.ws{tuple(s.groups)}"
        self.doc.line(f"if (tc_tid >= {lo} && tc_tid < {hi}) {{  // {what}")
        self.doc.indent()
        outer = self.group_barrier
        self.group_barrier = (CudaPrinter.scope_barrier_id(self, s), hi - lo)
        self.stmt(s.body)
        self.group_barrier = outer
        self.doc.dedent()
        self.doc.line("}")

    def visit_While(self, s):
        """A loop on memory that other threads write (a flag, a counter) lets them run each iteration."""
        from ..ir import Load
        if not collect(s.cond, lambda n: (isinstance(n, Load) and n.buffer.scope in ("shared", "global")) or
                       (isinstance(n, I.IntrinsicCall) and isinstance(n.intrinsic, I.AtomicLoad))):
            return super().visit_While(s)
        self.doc.line(f"while ({self.expr(s.cond)}) {{")
        self.doc.indent()
        self.doc.line(f"tc::simt::poll({self.site()});")
        self.stmt(s.body)
        self.doc.dedent()
        self.doc.line("}")
        self.doc.line("tc::simt::poll_end();")

    def visit_WarpSpecialize(self, s):
        raise TilecraftError("internal: automatic warp specialization in the CPU target's thread-level mode", s.span)

    def visit_Annotate(self, s):
        pass

    def visit_Kernel(self, k: Kernel):
        outer = self.kernel, self.cluster
        self.kernel = k
        for v in (*k.block_vars, *k.thread_vars):
            self.nonneg.add(v)
        allocs = [a.buffer for a in collect(k.body, lambda n: isinstance(n, Alloc))]
        regs = sum(b.numel * b.dtype.bytes for b in allocs if b.scope != "shared")
        stack = _STACK_BASE + 2 * regs
        smem = int(self.func.lowering.smem_bytes)
        d = self.doc
        blocks = _cluster_size(k) if _communicates(k) else 1
        self.cluster = (blocks, -(-smem // 128) * 128) if blocks > 1 else None
        self.open_block_team(k)
        # memory that cannot be had stops the kernel with what it was for (tc::simt::fail), not the process
        if self.cluster is None:
            d.line(f"tc::simt::Block* tc_block = tc::simt::block({k.num_threads}, {stack});  // one fiber per CUDA thread")
            d.line(f"if (tc_block == nullptr) tc::simt::fail({_c_string(_stack_failure(k, stack, allocs))});")
            d.line(f"tc::Storage tc_smem_store({smem} + 128, nullptr);")
            d.line(f"if (tc_smem_store.p == nullptr) tc::simt::fail({_c_string(_smem_failure(smem, allocs))});")
            d.line("unsigned char* tc_smem = (unsigned char*)(((uintptr_t)tc_smem_store.p + 127) & ~(uintptr_t)127);")
            self.open_block_loop()
            d.line("if (tc::simt::failed()) continue;  // a block failed: the kernel stops")
            # a GPU block's shared memory starts undefined: bytes nobody wrote read as NaN / -1 here, not as
            # a zero (calloc) or the previous block's values that could hide a copy that skipped them
            d.line(f"std::memset(tc_smem, 0xFF, {smem});")
            names = self.block_indices(k)
        else:
            names = self.open_cluster_loop(k, stack, allocs)
        d.line("auto tc_thread = [&]() {")
        d.indent()
        d.line("const int tc_tid = tc::simt::tid();")
        if self.cluster is not None:
            self.cluster_block(k)
        tx, ty, _ = (tuple(k.threads) + (1, 1))[:3]
        decomp = [f"tc_tid % {tx}", f"tc_tid / {tx} % {ty}", f"tc_tid / {tx * ty}"]
        for v, ex in zip(k.thread_vars, decomp):
            d.line(f"const int {self.name(v)} = {ex}; (void){self.name(v)};")
        if collect(k.body, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(n.intrinsic, I.RNG)):
            d.line("tc::Philox4x32 tc_rng;  // T.rng_init / T.rng_rand: this thread's generator")
        self.stmt(k.body)
        d.dedent()
        d.line("};")
        d.line("const int tc_rc = tc_block->run([](void* tc_f) { (*(decltype(tc_thread)*)tc_f)(); }, &tc_thread);")
        ids = ", ".join(names + ["0"] * (3 - len(names)))
        d.line(f"if (tc_rc != 0) tc::simt::record(tc_rc, *tc_block, {ids});")
        d.dedent()
        d.line("}")
        d.dedent()
        d.line("}")
        d.dedent()
        d.line("}")
        self.kernel, self.cluster = outer

    # ---- a cluster at a time (its blocks arrive on each other's mbarriers) ------------------------
    def open_cluster_loop(self, k: Kernel, stack: int, allocs) -> list:
        """The team's pool of the cluster's blocks' fibers, their shared memories `stride` bytes apart,
        and the loop over the grid's clusters; the text of the cluster's first block's indices."""
        blocks, stride = self.cluster
        d = self.doc
        dims = (tuple(k.cluster) + (1, 1, 1))[:3]
        d.line(f"// a cluster of {blocks} blocks {dims} at a time: its blocks arrive on each other's mbarriers")
        d.line(f"tc::simt::Block* tc_block = tc::simt::block({k.num_threads}, {stack}, {blocks});"
               f"  // one fiber per CUDA thread of each block")
        d.line(f"if (tc_block == nullptr) tc::simt::fail({_c_string(_stack_failure(k, stack, allocs, blocks))});")
        d.line(f"tc::Storage tc_smem_store({blocks} * {stride} + 128, nullptr);")
        d.line(f"if (tc_smem_store.p == nullptr) tc::simt::fail({_c_string(_smem_failure(stride, allocs, blocks))});")
        d.line("unsigned char* tc_cluster_smem = (unsigned char*)(((uintptr_t)tc_smem_store.p + 127) & ~(uintptr_t)127);")
        d.line("#pragma omp for schedule(dynamic, 1)")
        d.line(f"for (int64_t tc_b = 0; tc_b < tc_nblocks / {blocks}; ++tc_b) {{")
        d.indent()
        d.line("if (tc::simt::failed()) continue;  // a block failed: the kernel stops")
        d.line(f"std::memset(tc_cluster_smem, 0xFF, (size_t){blocks} * {stride});  // undefined, as on a GPU")
        cx, cy, cz = dims
        d.line(f"const int64_t tc_cgx = tc_gx / {cx}, tc_cgy = tc_gy / {cy};")
        d.line(f"const int tc_cx = (int)(tc_b % tc_cgx) * {cx}, tc_cy = (int)((tc_b / tc_cgx) % tc_cgy) * {cy}, "
               f"tc_cz = (int)(tc_b / (tc_cgx * tc_cgy)) * {cz};  // the cluster's first block")
        return ["tc_cx", "tc_cy", "tc_cz"][:len(k.block_vars)]

    def cluster_block(self, k: Kernel) -> None:
        """Inside a fiber: its block's rank, shared memory and indices (rank x % cx + cx * (y % cy + ...),
        language/cluster.py)."""
        blocks, stride = self.cluster
        cx, cy, _ = (tuple(k.cluster) + (1, 1, 1))[:3]
        d = self.doc
        d.line("const int tc_cta = tc::simt::cta();  // this block's rank in the cluster")
        d.line(f"unsigned char* const tc_smem = tc_cluster_smem + (size_t)tc_cta * {stride};")
        offs = [f"tc_cta % {cx}", f"tc_cta / {cx} % {cy}", f"tc_cta / {cx * cy}"]
        for v, base, off in zip(k.block_vars, ["tc_cx", "tc_cy", "tc_cz"], offs):
            d.line(f"const int {self.name(v)} = {base} + {off}; (void){self.name(v)};")


def _communicates(k: Kernel) -> bool:
    """Does the kernel's cluster communicate across blocks (remote arrivals, lowered)?"""
    return bool(k.cluster) and bool(collect(k.body, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(
        n.intrinsic, (I.MbarArriveCluster, I.ClusterSync))))


def _cluster_size(k: Kernel) -> int:
    size = 1
    for c in k.cluster:
        size *= c
    return size


def _tiles(bufs) -> str:
    """The largest few of `bufs`, each with its bytes and line."""
    def one(b):
        where = f" at {b.span.short()}" if b.span is not None else ""
        return f"{b.name} {tuple(b.shape)} {b.dtype} ({b.nbytes} bytes{where})"
    big = sorted(bufs, key=lambda b: -b.nbytes)
    return ", ".join(one(b) for b in big[:3]) + (f" and {len(big) - 3} more" if len(big) > 3 else "")


def _stack_failure(k: Kernel, stack: int, allocs, blocks: int = 1) -> str:
    """What a block (or a cluster's pool of blocks) whose fibers' stacks cannot be mapped reports: the
    threads, the bytes, the arrays."""
    regs = [b for b in allocs if b.scope != "shared"]
    what = f": each thread's arrays take {sum(b.nbytes for b in regs)} bytes, the largest {_tiles(regs)}" if regs else ""
    if blocks > 1:
        n = blocks * k.num_threads
        return (f"out of memory: could not allocate the stacks of the {n} threads of a cluster of {blocks} blocks "
                f"({blocks} x {k.num_threads} threads, run together: they arrive on each other's mbarriers; "
                f"{n} x {stack} bytes){what}")
    return (f"out of memory: could not allocate the stacks of the block's {k.num_threads} threads "
            f"({k.num_threads} x {stack} bytes){what}")


def _smem_failure(smem: int, allocs, blocks: int = 1) -> str:
    """What a block (or a cluster) whose shared memory cannot be allocated reports: the bytes and the tiles."""
    shared = [b for b in allocs if b.scope == "shared"]
    what = f": the shared tiles {_tiles(shared)}" if shared else ""
    if blocks > 1:
        return (f"out of memory: could not allocate the shared memory of a cluster of {blocks} blocks "
                f"({blocks} x {smem} bytes){what}")
    return f"out of memory: could not allocate the block's {smem} bytes of shared memory{what}"


def generate_cpp_threads(func: PrimFunc) -> str:
    p = CppThreadsPrinter(func)
    if func.lowering.swizzled(SWIZZLE_SM90):  # the wgmma layout: planned for tensor cores only
        raise TilecraftError("internal: an sm90-swizzled shared tile in the CPU target's thread-level mode", func.span)
    d = p.doc
    d.line(f"// generated by tilecraft from {func.name} (CPU target, threads emulated: one fiber per CUDA thread)")
    d.line('#include "tilecraft_cpu.h"')
    d.line('#include "tilecraft_cpu_threads.h"')
    if uses_iket(func.body):  # the event log (codegen/cpp.py)
        d.line('#include "tilecraft_cpu_iket.h"')
    std_includes(d, func)
    d.line("")
    paste_imports(d, func)
    open_entry(p, func)
    d.line("tc::cpu_assert_text() = nullptr;")
    d.line("tc::simt::reset();")
    p.stmt(func.body)
    d.line("return tc::simt::failure_code();")
    d.dedent()
    d.line("}")
    d.line("")
    d.line('extern "C" const char* tc_error_text(int tc_rc) {')
    d.line("  return tc_rc == -1 ? tc::cpu_assert_text() : tc::simt::failure_text();")
    d.line("}")
    return d.text()


# ---- the waits: each names its site --------------------------------------------------------------

def _args(p, call) -> list:
    return [p.expr(a) for a in call.args]


@I.register_emitter(I.Shfl, TARGET)
def _shfl(p, call):
    value, lane, *width = _args(p, call)
    return f"tc::simt::shfl_{call.intrinsic.kind}({value}, {lane}, {width[0] if width else 32}, {p.site()})"


@I.register_emitter(I.ShflXorReduce, TARGET)
def _shfl_xor_reduce(p, call):
    r = call.intrinsic
    masks = ", ".join(str(m) for m in r.lane_masks)
    return f"tc::simt::shfl_xor_reduce<{intrinsics_cuda._COMBINER[r.op]}, {masks}>({_args(p, call)[0]}, {p.site()})"


@I.register_emitter(I.SyncWarp, TARGET)
def _sync_warp(p, call):
    return f"tc::simt::sync_warp({p.site()})"


@I.register_emitter(I.NamedBarrierSync, TARGET)
def _named_barrier(p, call):
    r = call.intrinsic
    return f"tc::simt::barrier({r.barrier_id}, {r.threads}, {p.site()})"


@I.register_emitter(I.MbarArriveCluster, TARGET)
def _mbar_arrive_cluster(p, call):
    bar, cta = _args(p, call)
    if p.cluster is None:
        raise TilecraftError("internal: a remote mbarrier arrival outside a kernel run a cluster at a time", p.span)
    blocks, stride = p.cluster
    sp = p.span
    at = f"{sp.short()}: " if sp is not None else ""
    bad = (f"{at}T.mbarrier_arrive(bar, cta_id): cta_id is outside 0..{blocks - 1}, the ranks of the blocks of "
           f"the cluster (T.ClusterKernel cluster_dims={tuple(p.kernel.cluster)})")
    return f"tc::mbar_arrive_cluster({bar}, (int)({cta}), {stride}, {_c_string(bad)})"


@I.register_emitter(I.ClusterSync, TARGET)
def _cluster_sync(p, call):
    return f"tc::simt::cluster_sync({p.site()})"


@I.register_emitter(I.MbarWaitParity, TARGET)
@I.register_emitter(I.MbarWaitParityCluster, TARGET)   # one scheduler runs the cluster: no scope to acquire at
def _mbar_wait(p, call):
    bar, parity = _args(p, call)
    return f"tc::simt::mbar_wait_parity({bar}, (int)({parity}), {p.site()})"
