"""CPU target code generation: lowered IR → one C++ translation unit.

The entry point `extern "C" int tc_entry(void** args, const int64_t* dims)` receives the tensor
data pointers in signature order and the values of symbolic dimensions.  Each `T.Kernel` becomes
an OpenMP loop over its blocks; every statement of a block covers the whole tile, so there are no
threads inside a block and `T.sync_threads` is a no-op.  On-chip buffers larger than a few hundred
elements live in per-OpenMP-thread storage allocated once, not on the stack.
"""
from __future__ import annotations

from ..errors import TilecraftError
from ..ir import Alloc, Buffer, Kernel, collect
from ..ir import expr as E
from ..ir import intrinsics as I
from ..ir.func import PrimFunc
from ..ir.printer import to_text
from .c_printer import CPrinter, paste_imports, storage_len, view_line, viewed_bases
from .cpp_vector import row_reductions, vector_loop

ENTRY = "tc_entry"
_STACK_LIMIT = 256  # elements; larger on-chip buffers are hoisted to heap storage


class CppPrinter(CPrinter):
    _cache: dict = {}
    # a run-time grid of no block is an error: how it is recorded, and how the team sees it was (the
    # entry returns -1 on a recorded assertion; the thread-level printer's reports through tc::simt)
    record_failure = "tc::cpu_assert_record"
    has_failed = "tc::cpu_assert_text() != nullptr"

    def __init__(self, func: PrimFunc):
        super().__init__()
        self.func = func
        self.kernel: Kernel | None = None
        self.hoisted: set = set()
        self.viewed = _renamed_buffers(func)

    def intrinsic(self, e):
        raise TilecraftError(f"{e.op} is not available on the CPU target", e.span)

    def visit_IntrinsicCall(self, e):
        """Device intrinsics print only through their registered CPU emitters (below)."""
        fn = I.EMITTERS.get((type(e.intrinsic), "cpu"))
        if fn is None:
            raise TilecraftError(f"{e.intrinsic.entry} is not available on the CPU target", e.span)
        return fn(self, e)

    def _block_ids(self):
        names = [self.name(v) for v in self.kernel.block_vars] if self.kernel else []
        names += ["0"] * (3 - len(names))
        return ", ".join(names)

    def visit_Ref(self, e):
        if e.buffer.dtype.packed:
            return self.packed_address(e.buffer, e.indices)
        return f"&{self.visit_Load(e)}"

    def packed_store(self, buf):
        # the blocks run on OpenMP threads: a global byte may hold elements of two blocks' tiles
        return "tc::s4_set_atomic" if buf.scope == "global" else "tc::s4_set"

    def visit_Var(self, e):
        if self.kernel is not None and any(e is t for t in self.kernel.thread_vars):
            raise TilecraftError("thread indices (T.get_thread_binding) have no meaning on the CPU "
                                 "target, where each statement covers the whole tile; use the CUDA "
                                 "target for thread-level code", e.span)
        return self.name(e)

    def visit_Sync(self, s):
        pass

    def visit_Binary(self, e):
        if not _runtime_divisor(e):
            return super().visit_Binary(e)
        # an integer division by a divisor known only at run time: a zero one would raise SIGFPE and
        # take the Python process down; tc::nonzero throws it out of the block instead (visit_Kernel),
        # the entry returns -1 and the runtime raises a TilecraftError naming the kernel
        where = _c_string(f"integer division by zero: {to_text(e)} with {to_text(e.b)} == 0 at run time")
        a, b = self.expr(e.a), f"tc::nonzero({self.expr(e.b)}, {where})"
        if e.op == "/":
            return f"({a} / {b})"
        if self.is_nonneg(e.a) and self.is_nonneg(e.b):   # as CPrinter.visit_Binary
            return f"({a} {'/' if e.op == '//' else '%'} {b})"
        return f"tc::floor{'div' if e.op == '//' else 'mod'}({a}, {b})"

    def loop_pragma(self, s):
        ok = s.kind == "parallel" and _innermost(s) and self.loop_pragma_allows(s)
        return "#pragma omp simd" if ok else None

    def loop_pragma_allows(self, s) -> bool:
        """Whether the iterations of loop `s` may run as vector lanes, as far as its effects go."""
        # not around random draws: their order is the generator's state
        # nor around assertions: a false one throws out of the loop (tilecraft_cpu.h)
        # nor around trace events: each is a timestamped record, in program order (tilecraft_cpu_iket.h)
        # nor around stores of int4 elements: neighbouring iterations write the same byte
        return not _uses_rng(s) and not _may_throw(s) and not uses_iket(s) and not stores_packed(s)

    # an innermost loop of one contiguous store of float32 / 16-bit float arithmetic printed as
    # 16-lane vector code, bit for bit the scalar loop's stores (cpp_vector.py); the thread-level
    # printer (cpp_threads.py) addresses shared memory through swizzles, and keeps its loops
    vector_loops = True

    def visit_For(self, s):
        if self.vector_loops and _innermost(s) and (vector_loop(self, s, self.viewed)
                                                    or row_reductions(self, s, self.viewed)):
            return
        super().visit_For(s)

    def visit_Alloc(self, s):
        b = s.buffer
        if b not in self.hoisted:
            # T.view may read these bytes as a wider type: align for the widest scalar
            align = "alignas(16) " if b in viewed_bases(self.func) else ""
            self.doc.line(f"{align}{self.type_name(b.dtype)} {self.name(b)}[{storage_len(b)}];")
        if s.init is not None:
            self.doc.line(f"{self.name(b)}[0] = {self.expr(s.init)};")

    def visit_View(self, s):
        self.doc.line(view_line(self, s))

    def visit_Kernel(self, k: Kernel):
        outer = self.kernel
        self.kernel = k
        for v in k.block_vars:
            self.nonneg.add(v)
        big = _heap_tiles(k)
        self.hoisted = set(big)
        d = self.doc
        self.open_block_team(k)
        for b in big:
            store = self.name.fresh(f"{self.name(b)}_storage")
            t = self.type_name(b.dtype)
            # an allocation that fails is recorded with this text (tilecraft_cpu.h, tc::Storage)
            d.line(f"tc::Storage {store}({storage_len(b)} * sizeof({t}), {_c_string(alloc_failure(b))});"
                   f"  // zeroed, freed when the thread's loop ends")
            restrict = "" if b in viewed_bases(self.func) else " __restrict__"
            d.line(f"{t}*{restrict} {self.name(b)} = ({t}*){store}.p;")
        self.open_block_loop()
        names = self.block_indices(k)
        for n in names:
            d.line(f"(void){n};")
        if _uses_rng(k):
            d.line("tc::Philox4x32 tc_rng;  // T.rng_init / T.rng_rand: one generator per block")
        asserts = _may_throw(k.body)
        if asserts or big:  # the first false assertion (or failed allocation) stops every block not yet started
            d.line("if (tc::cpu_assert_text() != nullptr) continue;")
        if asserts:
            d.line("try {")
            d.indent()
        self.stmt(k.body)
        if asserts:
            d.dedent()
            d.line("} catch (const tc::AssertFailed& e) {")
            d.line("  tc::cpu_assert_record(e.where);")
            d.line("}")
        d.dedent()
        d.line("}")
        d.dedent()
        d.line("}")
        d.dedent()
        d.line("}")
        self.kernel = outer

    # ---- what both CPU printers open a kernel with (this one and cpp_threads.py) -------------------

    def open_block_team(self, k: Kernel) -> None:
        """`{`, the grid's extents and the OpenMP team that runs its blocks, left open for the team's
        per-thread set-up."""
        grid = [self.expr(g) for g in k.grid] + ["1"] * (3 - len(k.grid))
        d = self.doc
        d.line("{")
        d.indent()
        d.line(f"const int64_t tc_gx = {grid[0]}, tc_gy = {grid[1]}, tc_gz = {grid[2]};")
        if _dynamic_grid(k):
            # no block would run: an error, as CUDA refuses such a launch (runtime/cuda_launch.py)
            spec = ", ".join(to_text(g) for g in k.grid)
            where = f" at {k.span.file}:{k.span.line}" if k.span is not None else ""
            text = f"T.Kernel({spec}){where} has a grid dimension of 0 or less at run time (an empty input?): no block would run"
            d.line(f"if (tc_gx <= 0 || tc_gy <= 0 || tc_gz <= 0) {self.record_failure}({_c_string(text)});")
            d.line(f"const int64_t tc_nblocks = {self.has_failed} ? 0 : tc_gx * tc_gy * tc_gz;")
        else:
            d.line("const int64_t tc_nblocks = tc_gx * tc_gy * tc_gz;")
        # a one-block grid runs on the calling thread: waking the OpenMP pool (shared with torch)
        # costs more than such a kernel does
        # tc_num_threads threads at most (tilecraft_cpu.h: torch.get_num_threads(), runtime/openmp.py)
        d.line("#pragma omp parallel if(tc_nblocks > 1) num_threads(tc::omp_threads(tc_nblocks))")
        d.line("{")
        d.indent()

    def open_block_loop(self) -> None:
        """The team's loop over the blocks, left open for a block's body."""
        d = self.doc
        # blocks taken a few at a time from a big grid (tc::omp_chunk): contiguous runs in order, so
        # a block still only ever waits behind lower-numbered ones
        d.line("#pragma omp for schedule(dynamic, tc::omp_chunk(tc_nblocks))")
        d.line("for (int64_t tc_b = 0; tc_b < tc_nblocks; ++tc_b) {")
        d.indent()

    def block_indices(self, k: Kernel) -> list:
        """This block's indices, declared from the loop's `tc_b`; their names."""
        names = [self.name(v) for v in k.block_vars]
        exprs = ["(int)(tc_b % tc_gx)", "(int)((tc_b / tc_gx) % tc_gy)", "(int)(tc_b / (tc_gx * tc_gy))"]
        for n, ex in zip(names, exprs):
            self.doc.line(f"const int {n} = {ex};")
        return names


def open_entry(p: CppPrinter, func: PrimFunc) -> None:
    """The entry function's signature and its parameters and size symbols read from the argument arrays."""
    d = p.doc
    d.line(f'extern "C" int {ENTRY}(void** tc_args, const int64_t* tc_dims) {{')
    d.indent()
    for i, b in enumerate(func.params):
        d.line(f"{p.type_name(b.dtype)}* __restrict__ {p.name(b)} = ({p.type_name(b.dtype)}*)tc_args[{i}];")
    for i, s in enumerate(func.symbols):
        d.line(f"const {p.type_name(s.dtype)} {p.name(s)} = ({p.type_name(s.dtype)})tc_dims[{i}];")
        d.line(f"(void){p.name(s)};")


def _renamed_buffers(func: PrimFunc) -> frozenset:
    """The buffers a T.view renames or that rename another: their bytes have two names."""
    from ..ir import View
    views = collect(func.body, lambda n: isinstance(n, View))
    return frozenset(b for v in views for b in (v.buffer, v.base) if isinstance(b, Buffer))


def _heap_tiles(k: Kernel) -> list:
    """The kernel's on-chip buffers too large for the stack: per-OpenMP-thread heap storage."""
    return [a.buffer for a in collect(k.body, lambda n: isinstance(n, Alloc)) if a.buffer.numel > _STACK_LIMIT]


def alloc_failure(b, copies: str = "one OpenMP thread's copy") -> str:
    """What a failed allocation of the on-chip buffer `b` reports: the buffer, its bytes, the user's line."""
    where = f" at {b.span.file}:{b.span.line}" if b.span is not None else ""
    src = f" (`{b.span.source_line.strip()}`)" if b.span is not None and b.span.source_line else ""
    return (f"out of memory: could not allocate the {b.scope} tile {b.name} {tuple(b.shape)} {b.dtype}{where}{src}: "
            f"{b.nbytes} bytes ({copies})")


def _uses_rng(node) -> bool:
    return bool(collect(node, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(n.intrinsic, I.RNG)))


def stores_packed(node) -> bool:
    from ..ir import Store
    return bool(collect(node, lambda n: isinstance(n, Store) and n.buffer.dtype.packed))


def _innermost(loop) -> bool:
    from ..ir import For
    return not collect(loop.body, lambda n: isinstance(n, For))


def generate_cpp(func: PrimFunc) -> str:
    if func.lowering.cpu_threads:  # a program at the level of CUDA threads: its blocks' threads emulated
        from .cpp_threads import generate_cpp_threads
        return generate_cpp_threads(func)
    p = CppPrinter(func)
    d = p.doc
    d.line(f"// generated by tilecraft from {func.name}")
    d.line('#include "tilecraft_cpu.h"')
    if uses_iket(func.body):  # the event log and its export tc_iket_drain (runtime/iket.py reads it)
        d.line('#include "tilecraft_cpu_iket.h"')
    if uses_bf16_gemm(func.body):  # tc::gemm_bf16 (parsed only by the programs that call it)
        d.line('#include "tilecraft_cpu_gemm_bf16.h"')
    std_includes(d, func)
    d.line("")
    paste_imports(d, func)
    open_entry(p, func)
    from .cpp_manual_sync import entry_epilogue, entry_prologue, error_text_function  # mbarrier waits
    kernels = collect(func.body, lambda n: isinstance(n, Kernel))
    asserts = (_may_throw(func.body) or any(_dynamic_grid(k) for k in kernels)
               or any(_heap_tiles(k) for k in kernels))   # a failed allocation reports as an assertion does
    divisions = bool(collect(func.body, _runtime_divisor))
    if asserts:  # a false T.device_assert stops its block (visit_Kernel): return -1, the text in tc_error_text(-1)
        d.line("tc::cpu_assert_text() = nullptr;")
    entry_prologue(p, func)
    launch_number(p, func)
    if divisions:   # a run-time divisor in a grid size or a scalar outside the blocks throws here
        d.line("try {")
        d.indent()
    p.stmt(func.body)
    if divisions:
        d.dedent()
        d.line("} catch (const tc::AssertFailed& e) {")
        d.line("  tc::cpu_assert_record(e.where);")
        d.line("}")
    if asserts:
        d.line("if (tc::cpu_assert_text() != nullptr) return -1;")
    d.line(f"return {entry_epilogue(func)};")
    d.dedent()
    d.line("}")
    error_text_function(p, func, asserts)
    return d.text()


def _bf16_gemm(call) -> bool:
    """A tile GEMM whose A and B are both bfloat16: tc::gemm_bf16 (tilecraft_cpu_gemm_bf16.h), whose
    summation order takes k in blocks of 32, each in an even and an odd chain (TDPBF16PS's formula)."""
    return all(getattr(x, "buffer", None) is not None and x.buffer.dtype.name == "bfloat16" for x in call.args[:2])


def uses_bf16_gemm(node) -> bool:
    return bool(collect(node, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(n.intrinsic, I.CpuGemm)
                        and _bf16_gemm(n)))


def uses_iket(node) -> bool:
    return bool(collect(node, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(n.intrinsic, I.IketEvent)))


def std_includes(d, func: PrimFunc) -> None:
    """The C++ library headers tilecraft_cpu.h leaves out (<cmath>, <limits>, <vector>: its own math goes
    through tc::libm) for a program that brings code of its own (`T.import_source`, `T.call_extern`),
    which may call them; after the precompiled header, which must come first."""
    foreign = func.imports or collect(func.body, lambda n: isinstance(n, I.IntrinsicCall)
                                      and isinstance(n.intrinsic, I.Extern))
    if foreign:
        for header in ("cmath", "limits", "vector"):
            d.line(f"#include <{header}>")


def _runtime_divisor(n) -> bool:
    """An integer `//`, `%` or `/` whose divisor is not a constant (a constant zero is refused by
    transform/validate/operators.py)."""
    return (isinstance(n, E.Binary) and n.op in ("//", "%", "/") and n.dtype.is_int
            and not isinstance(n.b, E.Const))


def _dynamic_grid(k: Kernel) -> bool:
    """A grid size known only at run time (a constant one below 1 is refused by validate/extents.py)."""
    return any(not isinstance(g, (int, E.Const)) for g in k.grid)


def _may_throw(node) -> bool:
    """A false T.device_assert or a zero run-time divisor can throw out of `node` (tilecraft_cpu.h)."""
    return _has_asserts(node) or bool(collect(node, _runtime_divisor))


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def _has_asserts(node) -> bool:
    return bool(collect(node, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(n.intrinsic, I.DeviceAssert)))


# ---- CPU emitters of the intrinsics the CPU lowering uses (tilecraft_cpu.h) ----------------------

def _atomic(p: CppPrinter, call) -> str:
    """`entry[<order>](&element[, (T)(value)])`: the atomics, and the ordered loads and stores."""
    ref, *value = call.args
    order = getattr(call.intrinsic, "order", None)
    args = [f"&{p.visit_Load(ref)}"] + [f"({p.type_name(ref.buffer.dtype)})({p.expr(v)})" for v in value]
    return f"{call.intrinsic.entry}{'' if order is None else f'<{order}>'}({', '.join(args)})"


for _cls in (*I.ATOMICS.values(), I.AtomicLoad, I.AtomicStore):
    I.register_emitter(_cls, "cpu")(_atomic)


@I.register_emitter(I.CpuGemm, "cpu")
def _cpu_gemm(p: CppPrinter, call) -> str:
    g = call.intrinsic
    a, b, c = (p.expr(x) for x in call.args)
    entry = "tc::gemm_bf16" if _bf16_gemm(call) else "tc::gemm_f32acc"
    launch = ", tc_launch" if g.launch_cache and _bf16_gemm(call) else ""
    return (f"{entry}({g.m}, {g.n}, {g.k}, {a}, {g.a_strides[0]}, {g.a_strides[1]}, "
            f"{b}, {g.b_strides[0]}, {g.b_strides[1]}, {c}, {g.c_strides[0]}, {g.c_strides[1]}{launch})")


def _launch_cached(func: PrimFunc) -> list:
    """The global tensors a bf16 gemm may keep packed for the launch (CpuGemm.launch_cache), in order."""
    calls = collect(func.body, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(n.intrinsic, I.CpuGemm)
                    and n.intrinsic.launch_cache and _bf16_gemm(n))
    out = []
    for c in calls:
        for ref in c.args[:2]:
            if ref.buffer not in out:
                out.append(ref.buffer)
    return out


def launch_number(p: CppPrinter, func: PrimFunc) -> None:
    """`tc_launch`: this launch's number for the gemms that keep packed operands, 0 (keep nothing) when
    one of those tensors shares a byte with another argument -- a write through that one could change
    it during the launch."""
    kept = _launch_cached(func)
    if not kept:
        return
    def span(b):   # the tensor's address and bytes
        if all(isinstance(d, int) for d in b.shape):
            return f"{p.name(b)}, {b.nbytes}"
        n = " * ".join(f"(int64_t)({d if isinstance(d, int) else p.expr(d)})" for d in b.shape)
        return f"{p.name(b)}, ({n}) * {b.dtype.bits} / 8"
    apart = [f"!tc::gemm_overlaps({span(x)}, {span(y)})"   # kept tensors may share bytes: none is written
             for x in kept for y in func.params if y.scope == "global" and y not in kept]
    p.doc.line(f"const uint64_t tc_launch = tc::gemm_pack_launch({' && '.join(apart) or 'true'});")


@I.register_emitter(I.CpuReduceRow, "cpu")
def _cpu_reduce(p: CppPrinter, call) -> str:
    from ..ir.intrinsics.cpu_reduce import REDUCERS
    r = call.intrinsic
    src, init = (p.expr(x) for x in call.args)
    return f"tc::reduce_row<{REDUCERS[r.kind]}>({src}, {r.n}, {r.stride}, (float)({init}))"


@I.register_emitter(I.NamedBarrierSync, "cpu")
@I.register_emitter(I.NamedBarrierArrive, "cpu")
@I.register_emitter(I.FenceProxyAsyncShared, "cpu")
def _named_barrier(p: CppPrinter, call) -> str:
    return "(void)0"  # one CPU thread runs the whole block: a barrier or a proxy fence orders nothing


def _rng(p: CppPrinter, call) -> str:
    return f"{call.intrinsic.entry}({', '.join(['tc_rng'] + [p.expr(a) for a in call.args])})"


for _cls in I.RNG:
    I.register_emitter(_cls, "cpu")(_rng)


@I.register_emitter(I.DeviceAssert, "cpu")
def _device_assert(p: CppPrinter, call) -> str:
    return f"tc::cpu_assert({p.expr(call.args[0])}, {p.expr(call.intrinsic.where)})"


@I.register_emitter(I.Extern, "cpu")
def _extern(p: CppPrinter, call) -> str:
    return f"{call.intrinsic.name}({', '.join(p.expr(a) for a in call.args)})"


@I.register_emitter(I.Print, "cpu")
def _print(p: CppPrinter, call) -> str:
    msg, value = call.args
    return f"tc::print({p.expr(msg)}, {p.expr(value)}, {p._block_ids()})"


@I.register_emitter(I.PrintElem, "cpu")
def _print_elem(p: CppPrinter, call) -> str:
    msg, value, *idx = call.args
    label = p.expr(msg + "[" + ", ".join(["%d"] * len(idx)) + "]")
    return (f"{{ char tc_lbl[128]; std::snprintf(tc_lbl, sizeof tc_lbl, {label}, "
            f"{', '.join('(int)(' + p.expr(i) + ')' for i in idx)}); "
            f"tc::print(tc_lbl, {p.expr(value)}, {p._block_ids()}); }}")


@I.register_emitter(I.IketEvent, "cpu")
def _iket_event(p: CppPrinter, call) -> str:
    """A timestamped record of the event in the library's log: id, kind, this block's indices, payload."""
    e = call.intrinsic
    if call.args:
        kind = 2 if e.payload_dtype.startswith(("float", "bfloat")) else 1
        value = (f"tc::iket_f64_bits((double)({p.expr(call.args[0])}))" if kind == 2
                 else f"(int64_t)({p.expr(call.args[0])})")
    else:
        kind, value = 0, "0"
    return f"tc::iket_event({e.event_id}, {I.IKET_KINDS[e.kind]}, {p._block_ids()}, {value}, {kind})"
