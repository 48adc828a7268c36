"""TVM's low-level constructs that TileLang programs use beside the tile operations: code the program
brings itself (`T.import_source`, `T.call_extern`, `T.access_ptr`, `T.evaluate`), thread indices
bound by name (`T.thread_binding`) and TVM's cross-thread reduction (`T.comm_reducer` +
`T.tvm_thread_allreduce` inside `with T.attr(reducer, "reduce_scope", ...)`).

All of it is thread-level code, as in TileLang: every thread of the block runs each statement.  The
CUDA targets compile it; the CPU target runs a program that reads a thread index with its blocks'
threads emulated (transform/cpu_threads.py), and otherwise runs an extern call once per block.

    kr = T.thread_binding(0, 32, thread="threadIdx.x")      # the block's threadIdx.x (extent 32)
    T.import_source(DECODER_SOURCE)                         # pasted before the kernel, verbatim
    T.call_extern("handle", "decode", T.access_ptr(q, "r"), T.access_ptr(w, "w"))
    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, out[0], kr, dtype="handle"))
"""
from __future__ import annotations

from ..ir import Break, Buffer, Expr, Load, Ref, Store, Var, as_expr, binary, cast, const, same
from ..ir import dtype as dt
from ..ir import intrinsics as I
from ..ir.expr import Binary
from ..ir.intrinsics import IntrinsicCall
from ..ir.stmt import Evaluate
from .builder import current, error, require_kernel
from .compat import index_to_coordinates

_AXES = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}


# ---- thread indices --------------------------------------------------------------------------

def thread_binding(start, stop=None, thread: str = "threadIdx.x", annotations=None):
    """`kr = T.thread_binding(0, n, thread="threadIdx.x")`: the block's thread index along that axis,
    which must have extent n in `T.Kernel(..., threads=...)`."""
    b = require_kernel("T.thread_binding")
    if stop is None:
        start, stop = 0, start
    if thread not in _AXES:
        raise error(f"T.thread_binding(..., thread={thread!r}): the thread axis is one of {sorted(_AXES)}",
                    hint="block indices come from `with T.Kernel(...) as (bx, by):`")
    dim = _AXES[thread]
    threads = tuple(b.kernel.spec.threads) + (1, 1)
    if not same(start, 0) or not same(stop, threads[dim]):
        raise error(f"T.thread_binding({start}, {stop}, thread={thread!r}): the kernel launches {threads[dim]} "
                    f"threads along {thread} (T.Kernel(..., threads={tuple(b.kernel.spec.threads)})), so the "
                    f"binding must be (0, {threads[dim]})")
    return b.kernel.thread_var(dim)


# ---- code the program brings -----------------------------------------------------------------

def import_source(source: str):
    """Paste `source` (C++/CUDA text) into the generated file before the kernel, once; None: nothing."""
    b = current("T.import_source")
    if source is None:  # as in TileLang: nothing to paste (a program whose fast path is off)
        return
    if not isinstance(source, str) or not source.strip():
        raise error(f"T.import_source expects the source text (a non-empty str), got {source!r}")
    if source not in b.imports:
        b.imports.append(source)


def element_of(x, what: str):
    """(buffer, indices) of a buffer's first element or of an element `buf[i, j]`; else an error `what`."""
    if isinstance(x, Buffer):
        return x, tuple(const(0) for _ in x.shape)
    if isinstance(x, (Load, Ref)):
        return x.buffer, tuple(x.indices)
    raise error(f"{what}, got {x!r}")


def run_of(buf, idx, n: int) -> list:
    """The `n` consecutive elements along the last dimension from `buf[idx]`."""
    return [Load(buf, tuple(idx[:-1]) + (binary("+", idx[-1], k),)) for k in range(n)]


class AccessPtr:
    """`T.access_ptr(buf, "r")`: the address of `buf`'s first element (or of an element), with what the
    callee does there.  Only `T.call_extern` takes one."""

    def __init__(self, ref: Ref, access: str):
        self.ref, self.access = ref, access

    def __repr__(self):
        return f"T.access_ptr({self.ref.buffer.name}, {self.access!r})"


_MASKS = {1: "r", 2: "w", 3: "rw"}


def access_ptr(base, access_type="r", *extents, offset=0, extent=None, ignore_last_ndim=0):
    """TileLang's `T.access_ptr(base, access_type, ..., offset=0)`: `base` is a buffer (its first
    element) or an element `buf[i, j]`; `offset` counts elements beyond it in row-major order."""
    access_type = _MASKS.get(access_type, access_type)
    if access_type not in I.ACCESS_MODES:
        raise error(f"T.access_ptr: the access type is 'r', 'w' or 'rw' (or the masks 1, 2, 3), got {access_type!r}")
    buf, idx = element_of(base, "T.access_ptr expects a buffer or one of its elements")
    if not (isinstance(offset, int) and offset == 0):
        flat = as_expr(0)
        for i, n in zip(idx, buf.shape):
            flat = binary("+", binary("*", flat, n), i)
        idx = index_to_coordinates(binary("+", flat, offset), buf.shape)
    return AccessPtr(Ref(buf, tuple(as_expr(i) for i in idx)), I.ACCESS_MODES[access_type])


def _extern_args(args, what):
    values, accesses = [], []
    for a in args:
        if isinstance(a, AccessPtr):
            values.append(a.ref)
            accesses.append(a.access)
        elif isinstance(a, Buffer):
            raise error(f"{what}: pass a buffer as T.access_ptr({a.name}, \"r\" | \"w\" | \"rw\"), which says "
                        f"whether the function reads or writes it")
        elif isinstance(a, (Expr, int, float, bool)):
            values.append(as_expr(a))
            accesses.append("")
        else:
            raise error(f"{what}: cannot pass {a!r} to a C++ function")
    return tuple(values), tuple(accesses)


def _dtype_or_void(d):
    if d is None or d in ("handle", "void"):
        return None
    try:
        return dt.dtype(d)
    except ValueError as e:
        raise error(f"T.call_extern: the result type is a dtype or \"handle\": {e}") from None


def call_extern(*args, dtype=None, span=None):
    """`T.call_extern(dtype, name, *args)` (TVM's order) or `T.call_extern(name, *args, dtype=...)`: a call
    of a C++ function the program brings (`T.import_source`) or the toolchain provides.  As a
    statement its result is dropped."""
    current("T.call_extern")
    if dtype is None:
        if len(args) < 2:
            raise error("T.call_extern(dtype, name, *args): give the result type and the function's name")
        dtype, args = args[0], args[1:]
    if not args or not isinstance(args[0], str) or isinstance(args[0], dt.DType):
        raise error(f"T.call_extern: the function's name must be a str, got {args[0] if args else None!r}")
    name, rest = args[0], args[1:]
    values, accesses = _extern_args(rest, f"T.call_extern({name!r}, ...)")
    try:
        intr = I.Extern(name, accesses)
    except I.IntrinsicError as e:
        raise error(f"T.call_extern: {e}") from None
    out = _dtype_or_void(dtype)
    return I.call(intr, *values, dtype=out if out is not None else dt.int32)


call_pure_extern = call_extern


def evaluate(value):
    """`T.evaluate(expr)`: run an expression for its effect (an extern call); constants do nothing."""
    b = current("T.evaluate")
    if isinstance(value, IntrinsicCall):
        b.emit(Evaluate(value, span=b.span))
    elif isinstance(value, (_AllReduce, type(None), int, float, bool)) or isinstance(value, Expr) and not _has_calls(value):
        return  # emitted where it was built (tvm_thread_allreduce) or nothing to run
    else:
        raise error(f"T.evaluate({value!r}): only an extern call has an effect to run here")


def _has_calls(e) -> bool:
    from ..ir import collect
    return bool(collect(e, lambda n: isinstance(n, IntrinsicCall)))


# ---- TVM's cross-thread reduction --------------------------------------------------------------

class CommReducer:
    """`T.comm_reducer(lambda x, y: x + y, [identity])`: a sum, max or min, as the lambda says."""

    _OPS = {"+": "sum", "max": "max", "min": "min"}

    def __init__(self, fcombine, identities):
        ids = list(identities) if isinstance(identities, (list, tuple)) else [identities]
        if len(ids) != 1:
            raise error(f"T.comm_reducer: one value per reduction is supported, got {len(ids)} identities")
        self.dtype = as_expr(ids[0]).dtype
        x, y = Var("x", self.dtype), Var("y", self.dtype)
        e = fcombine(x, y)
        op = self._OPS.get(e.op) if isinstance(e, Binary) else None
        if op is None or {id(e.a), id(e.b)} != {id(x), id(y)}:
            raise error("T.comm_reducer: the combiner must be x + y, T.max(x, y) or T.min(x, y) "
                        "(other reductions: T.reduce over a fragment)")
        self.op = op

    def __repr__(self):
        return f"T.comm_reducer({self.op})"


def comm_reducer(fcombine, identities):
    return CommReducer(fcombine, identities)


class _AllReduce:
    """The value `T.tvm_thread_allreduce` returns: its statement is already emitted."""


def _thread_dim(v, frame):
    from .parser import _active_parsers
    seen = 0
    while isinstance(v, Var) and seen < 16:
        for d, t in enumerate(frame.thread_vars):
            if v is t:
                return d
        parsers = _active_parsers()
        v = parsers[-1].let_values.get(v) if parsers else None
        seen += 1
    return None


def tvm_thread_allreduce(*args, dtype=None):
    """`T.tvm_thread_allreduce(T.uint32(1), value, True, out[i], *thread_indices)`: every thread of a
    group (the threads that differ only in the given thread indices) gets the group's reduction of
    `value` in `out[i]`; the combiner is the enclosing `T.attr(T.comm_reducer(...), "reduce_scope",
    ...)`.  On CUDA: xor shuffles, so the group must lie within a warp."""
    b = require_kernel("T.tvm_thread_allreduce")
    reducer = b.reducers[-1] if b.reducers else None
    if reducer is None:
        raise error("T.tvm_thread_allreduce must be inside `with T.attr(T.comm_reducer(...), \"reduce_scope\", ...):`")
    if len(args) < 5:
        raise error("T.tvm_thread_allreduce(count, value, cond, out, *thread_indices): too few arguments")
    count, value, cond, out, threads = args[0], args[1], args[2], args[3], args[4:]
    n = count.value if hasattr(count, "value") else count
    if n != 1:
        raise error(f"T.tvm_thread_allreduce: one value per call is supported, got count {n}")
    if not (cond is True or getattr(cond, "value", None) is True or getattr(cond, "value", None) == 1):
        raise error("T.tvm_thread_allreduce: only an always-true condition (True) is supported")
    if not isinstance(out, Load) or out.buffer.scope not in ("local", "var", "fragment", "shared"):
        raise error(f"T.tvm_thread_allreduce: the result goes to an element of a local buffer, got {out!r}")
    spec = tuple(b.kernel.spec.threads) + (1, 1)
    total = spec[0] * spec[1] * spec[2]
    masks = []
    for t in threads:
        d = _thread_dim(t, b.kernel)
        if d is None:
            raise error(f"T.tvm_thread_allreduce: {t!r} is not a thread index (bind one with T.thread_binding)")
        stride = 1
        for s in spec[:d]:
            stride *= s
        extent = spec[d]
        if extent & (extent - 1) or stride & (stride - 1) or stride * extent > 32 or total % 32:
            raise error(f"T.tvm_thread_allreduce over threadIdx.{'xyz'[d]} (extent {extent}, threads "
                        f"{tuple(b.kernel.spec.threads)}): the reducing threads must be a power-of-two group "
                        f"inside one warp of a block of whole warps (tilecraft reduces with xor shuffles)",
                        hint="reduce across warps with a shared tile and T.reduce")
        m = stride
        while m < stride * extent:
            masks.append(m)
            m *= 2
    if not masks:
        raise error("T.tvm_thread_allreduce: name at least one thread index to reduce over")
    v = cast(as_expr(value), reducer.dtype)
    red = I.call(I.ShflXorReduce(reducer.op, tuple(sorted(masks))), v, dtype=reducer.dtype)
    b.emit(Store(out.buffer, out.indices, cast(red, out.buffer.dtype), span=b.span))
    return _AllReduce()


# ---- smaller builtins -------------------------------------------------------------------------

def address_of(element):
    """`T.address_of(buf[i])`: the element's address, for a `T.call_extern` argument (read and written)."""
    if not isinstance(element, (Load, Ref)):
        raise error(f"T.address_of expects a buffer element such as buf[i], got {element!r}")
    return AccessPtr(Ref(element.buffer, tuple(element.indices)), I.ACCESS_MODES["rw"])


def __ldg(value, index=None):  # noqa: N807 - TileLang's spelling
    """`T.__ldg(x[i])` (or `T.__ldg(x, i)`): the element, read through the read-only cache on CUDA --
    here an ordinary load (the compiler marks read-only parameters itself)."""
    if isinstance(value, Buffer):
        if index is None:
            raise error("T.__ldg(buffer, index): give the index")
        idx = tuple(index) if isinstance(index, (list, tuple)) else (index,)
        return Load(value, tuple(as_expr(i) for i in idx))
    if not isinstance(value, Load):
        raise error(f"T.__ldg expects a buffer element such as x[i], got {value!r}")
    return value


def _four(x, what):
    """The four int8 elements starting at `x` (a buffer or one of its elements), along its last dimension."""
    buf, idx = element_of(x, f"T.dp4a: {what} is four int8 values (a buffer or its element x[i])")
    if buf.dtype not in (dt.int8, dt.uint8):
        raise error(f"T.dp4a: {what} ({buf.name}) holds {buf.dtype}; dp4a multiplies four int8 or uint8 values")
    return run_of(buf, idx, 4)


def dp4a(A, B, C):
    """`T.dp4a(A, B, C)`: C += A[0]*B[0] + ... + A[3]*B[3] over four 8-bit integers each, in int32 (the
    compiler makes it one IDP4A where it can)."""
    b = require_kernel("T.dp4a")
    if not isinstance(C, Load) or not C.buffer.dtype.is_int or C.buffer.dtype.bits != 32:
        raise error(f"T.dp4a: C is the int32 accumulator element (acc[0]), got {C!r}")
    total = C
    for a, w in zip(_four(A, "A"), _four(B, "B")):
        total = binary("+", total, binary("*", cast(a, dt.int32), cast(w, dt.int32)))
    b.emit(Store(C.buffer, tuple(C.indices), cast(total, C.buffer.dtype), span=b.span))


def loop_break():
    """`T.loop_break()`: Python's `break` (leaves the innermost serial loop)."""
    from .parse_loops import break_problem
    from .parser import _active_parsers
    b = current("T.loop_break")
    parsers = _active_parsers()
    problem = break_problem(getattr(parsers[-1], "loop_kinds", []) if parsers else [], "T.loop_break()")
    if problem:
        raise error(problem, hint="use a T.serial loop or a while loop")
    b.emit(Break(span=b.span))


def device_assert(cond, msg: str = ""):
    """`T.device_assert(cond, msg)`: stop the kernel when `cond` is false, naming this line and `msg` (CUDA:
    printed, then a trap that fails the launch; CPU target: a TilecraftError).  A compile-time false
    condition is an error now; a true one costs nothing."""
    b = current("T.device_assert")
    if not isinstance(cond, Expr):
        if not cond:
            raise error(f"T.device_assert fails at compile time: {msg or 'the condition is false'}")
        return
    b.emit(assert_stmt(cond, msg, b.span))


def assert_stmt(cond, msg, span):
    """The statement that checks `cond` when the kernel runs (T.device_assert, `assert` on kernel values)."""
    where = f"{span.file}:{span.line}" if span is not None else "a kernel"
    text = msg or (f"`{span.source_line.strip()}`" if span is not None and span.source_line else "the condition is false")
    return I.evaluate(I.DeviceAssert(f"assertion failed at {where}: {text}"), cast(as_expr(cond), dt.bool_), span=span)
