"""Kernel launch, loops and on-chip allocations: `T.Kernel`, `T.Parallel`, `T.Pipelined`,
`T.serial`, `T.unroll`, `T.alloc_*`, `T.get_thread_binding`, `T.sync_threads`."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Alloc, Buffer, Sync, Var, as_expr, const, dtype as dt
from ..ir.expr import Expr
from .builder import current, error, require_kernel, warn_once


@dataclass
class KernelSpec:
    grid: tuple
    threads: tuple
    cluster: tuple = ()   # T.ClusterKernel's cluster dims (x, y, z), language/cluster.py

    def __enter__(self):
        # only reached when Python itself runs the `with`: the body is not a @T.prim_func
        from ..errors import TilecraftError
        from .builder import caller_span
        raise TilecraftError(
            "`with T.Kernel(...)` runs outside a @T.prim_func body: a kernel is either the body of a "
            "`@T.prim_func` or, in TileLang's newer jit style, the body of the `@tilelang.jit` function itself "
            "(tensors declared there as `x: T.Tensor(...)`; T.const / T.empty are not supported yet)", caller_span(),
            hint="decorate the function holding the kernel with @tilelang.jit, or put the body in a "
                 "`@T.prim_func def main(A: T.Tensor(...), ...)` returned from the factory")

    def __exit__(self, *exc):
        return False


def Kernel(*grid, threads=128, is_cpu=False, prelude=None):  # noqa: N802 - TileLang spelling
    """A grid of `grid` blocks (1-3 extents) of `threads` threads each; used as
    `with T.Kernel(gx, gy, threads=128) as (bx, by):`."""
    if not grid:
        grid = (1,)  # TileLang: no grid extent launches one block
    if len(grid) > 3:
        raise error(f"T.Kernel takes at most 3 grid extents, got {len(grid)}")
    for g in grid:
        _check_extent(g, "a T.Kernel grid extent")
        if _reads_memory(g):
            raise error(f"T.Kernel grid extent {_text(g)} reads a tensor element: the grid is fixed when the "
                        f"kernel is launched, before any element is read",
                        hint="pass the size as a factory argument or a shape symbol (T.dynamic / T.symbolic)")
        if isinstance(g, int) and g <= 0:
            raise error(f"T.Kernel grid extent must be positive, got {g}")
    if threads is None:   # TileLang's meaning: the default block of 128 threads
        threads = 128
    if isinstance(threads, bool) or not isinstance(threads, (int, list, tuple)):
        raise error(f"T.Kernel threads must be a positive int or a list of up to 3 ints, got {threads!r} "
                    f"({type(threads).__name__})")
    if isinstance(threads, int):
        threads = (threads,)
    threads = tuple(threads)
    if not 1 <= len(threads) <= 3 or not all(isinstance(t, int) and not isinstance(t, bool) and t > 0
                                             for t in threads):
        raise error(f"T.Kernel threads must be a positive int or a list of up to 3 ints, got {threads!r}")
    total = 1
    for t in threads:
        total *= t
    if total > 1024:
        raise error(f"T.Kernel asks for {total} threads per block; a block has at most 1024")
    return KernelSpec(tuple(grid), threads + (1,) * (3 - len(threads)))


@dataclass
class LoopSpec:
    kind: str
    extents: tuple            # one extent per loop variable
    start: object = 0
    step: int = 1
    annotations: tuple = ()


def _text(x) -> str:
    from ..ir.printer import to_text
    return to_text(x) if isinstance(x, Expr) else repr(x)


def _reads_memory(x) -> bool:
    """`x` reads a buffer element (a tensor, a tile or a T.alloc_var): known only while the kernel runs."""
    from ..ir import Load, collect
    return isinstance(x, Expr) and bool(collect(x, lambda n: isinstance(n, Load)))


def _check_extent(x, what):
    if isinstance(x, bool) or not isinstance(x, (int, Expr)):
        raise error(f"{what} must be an integer, got {x!r}")
    if isinstance(x, Expr) and not x.dtype.is_int:
        raise error(f"{what} must be an integer, got {_text(x)} of type {x.dtype}",
                    hint="a loop runs a whole number of times; cast with T.cast(x, 'int32') if that is meant")
    return x


def _check_parallel_extent(x):
    _check_extent(x, "a T.Parallel extent")
    if isinstance(x, int) and x < 0:
        raise error(f"a T.Parallel extent must not be negative, got {x}")
    if isinstance(x, int) and x == 0:
        raise error("a T.Parallel extent of 0 runs no iteration: the loop's body would never run",
                    hint="a T.Parallel loop covers a tile; give it the tile's (positive) size")
    if _reads_memory(x):
        raise error(f"a T.Parallel extent must be known when the kernel is launched (a constant or a shape "
                    f"symbol), got {_text(x)}, which reads a buffer element",
                    hint="a T.Parallel loop is spread over the block's threads by its extent; loop over a "
                         "data-dependent count with T.serial")
    return x


def _loop_annotations(what, annotations):
    """TileLang's `annotations={...}` of a loop: lowering hints here (warned once per key)."""
    if annotations is None:
        return
    if not isinstance(annotations, dict):
        raise error(f"{what}: annotations must be a dict, got {annotations!r}")
    from .tileops import _without_ws_id
    for key in _without_ws_id(what, annotations) or {}:
        warn_once((what, "annotations", str(key)), f"{what}(annotations={{{key!r}: ...}}) is ignored: a lowering "
                                                   f"hint tilecraft does not use; results do not change")


def Parallel(*extents, coalesced_width=None, loop_layout=None, prefer_async=False, annotations=None):  # noqa: N802
    """Element-wise loop nest over a tile; iterations are independent and spread over threads.
    `prefer_async=True` (TileLang: stores into shared memory issued as cp.async) changes no result
    in tilecraft's model, where a store has landed when the next statement starts."""
    if not extents:
        raise error("T.Parallel needs at least one extent")
    for name, value in (("coalesced_width", coalesced_width), ("loop_layout", loop_layout),
                        ("prefer_async", prefer_async or None)):
        if value is not None:
            warn_once(("T.Parallel", name), f"T.Parallel({name}=...) is ignored: tilecraft maps the loop's "
                                            f"iterations to threads itself; results do not change")
    _loop_annotations("T.Parallel", annotations)
    for e in extents:
        _check_parallel_extent(e)
    return LoopSpec("parallel", tuple(extents))


def parallel(start, stop=None, annotations=None):
    """TVM script's `T.parallel(n)`: a parallel loop, which TileLang treats as `T.Parallel(n)` (its
    T.Parallel builds the same loop kind)."""
    if stop is None:
        start, stop = 0, start
    if not (isinstance(start, int) and start == 0):
        raise error(f"T.parallel({start!r}, {stop!r}): a parallel loop starts at 0 here",
                    hint="write T.Parallel(n) and add the offset to the index")
    return Parallel(stop)


def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None,  # noqa: N802
              annotations=None):
    """A serial loop whose copies into shared tiles overlap compute, `num_stages` buffers deep."""
    _loop_annotations("T.Pipelined", annotations)
    if stop is None:
        start, stop = 0, start
    _check_extent(start, "T.Pipelined start")
    _check_extent(stop, "T.Pipelined stop")
    if isinstance(start, int) and isinstance(stop, int) and stop < start:
        raise error(f"T.Pipelined runs from {start} to {stop}: a negative number of iterations")
    if not isinstance(num_stages, int) or num_stages < 0:
        raise error(f"T.Pipelined num_stages must be a non-negative int, got {num_stages!r}")
    for name, value in (("order", order), ("stage", stage), ("group", group), ("sync", sync)):
        if value is not None:
            warn_once(("T.Pipelined", name),
                      f"T.Pipelined({name}=...) is ignored: tilecraft plans the stages of a pipelined loop "
                      f"itself (num_stages={num_stages} is honoured); results do not change")
    return LoopSpec("pipelined", (as_expr(stop) - start if isinstance(stop, Expr) or isinstance(start, Expr)
                                  else stop - start,), start=start,
                    annotations=(("num_stages", num_stages),))


@dataclass
class PersistentSpec:
    """`T.Persistent(domain, wave_size, index, group_size)`: the tiles of `domain` visited by a
    persistent block; see `Persistent`."""
    domain: tuple
    wave_size: object
    index: object
    group_size: object

    def tile_of(self, linear):
        """The tile coordinates of tile number `linear` (< the domain's size): for a 2-D domain, groups
        of `group_size` rows of tiles column by column (neighbouring blocks share operand tiles in L2);
        otherwise row-major."""
        d = [as_expr(x) for x in self.domain]
        if len(d) == 2 and self.group_size:
            per_group = as_expr(self.group_size) * d[1]
            first = (as_expr(linear) // per_group) * self.group_size
            from .math import min as t_min
            rows = t_min(as_expr(self.group_size), d[0] - first)
            within = as_expr(linear) % per_group
            return [first + within % rows, within // rows]
        out, rest = [], as_expr(linear)
        for size in reversed(d):
            out.append(rest % size)
            rest = rest // size
        return out[::-1]


def Persistent(domain, wave_size, index, group_size=8):  # noqa: N802
    """A persistent block's loop over the tiles of `domain` (a list of extents): wave w gives the
    block tile number w * wave_size + index, while that is below the number of tiles (TileLang's
    T.Persistent; `wave_size` is the grid's block count, `index` this block's number).  Binds one
    variable per domain entry.  Every tile is visited once, whatever `group_size` (the order only)."""
    domain = tuple(domain) if isinstance(domain, (list, tuple)) else (domain,)
    for e in domain:
        _check_extent(e, "a T.Persistent domain extent")
    _check_extent(wave_size, "T.Persistent wave_size")
    _check_extent(index, "T.Persistent index")
    if group_size is not None:
        _check_extent(group_size, "T.Persistent group_size")
    return PersistentSpec(domain, wave_size, index, group_size)


def _range(kind, start, stop, step):
    if stop is None:
        start, stop = 0, start
    for v, w in ((start, "start"), (stop, "stop")):
        _check_extent(v, f"loop {w}")
    if not isinstance(step, int) or step == 0:
        raise error(f"loop step must be a non-zero Python int, got {step!r}")
    if isinstance(start, int) and isinstance(stop, int):
        if (stop - start) * step < 0:   # as T.Pipelined: a loop that counts the wrong way is a mistake
            raise error(f"T.{kind}({start}, {stop}{'' if step == 1 else f', {step}'}) runs a negative number of "
                        f"iterations ({-(-(stop - start) // step)})",
                        hint="a loop's extent is its trip count: check the sign (a count-down loop takes a "
                             "negative step)")
        extent = max(0, -(-(stop - start) // step)) if step > 0 else max(0, -(-(start - stop) // -step))
    else:
        diff = as_expr(stop) - start
        extent = diff if step == 1 else (diff + (step - 1 if step > 0 else step + 1)) // step
    return LoopSpec(kind, (extent,), start=start, step=step)


def serial(start, stop=None, step=1, annotations=None):
    _loop_annotations("T.serial", annotations)
    return _range("serial", start, stop, step)


def unroll(start, stop=None, step=1, explicit=False, unroll_factor=None, annotations=None):
    _loop_annotations("T.unroll", annotations)
    return _range("unroll", start, stop, step)


def grid(*extents):
    """`for i, j in T.grid(M, N):` -- TVM's nest of serial loops, one per extent."""
    if not extents:
        raise error("T.grid needs at least one extent")
    for e in extents:
        _check_extent(e, "a T.grid extent")
    return LoopSpec("serial", tuple(extents))


def vectorized(start, stop=None):
    return _range("serial", start, stop, 1)


# ---- allocations ---------------------------------------------------------------------------

def _shape(shape, what):
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise error(f"{what} shape must be an int or a tuple of ints, got {shape!r}") from None
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, int) or s <= 0:
            shown = "(" + ", ".join(_text(x) for x in shape) + ("," if len(shape) == 1 else "") + ")"
            raise error(f"{what} shape entries must be positive compile-time ints, got {shown}",
                        hint="tile shapes are static; use T.dynamic only for tensor parameters")
    return shape


def _dtype(d, what):
    from .dtypes import require_computable
    try:
        return require_computable(dt.dtype(d), what)
    except ValueError as e:
        raise error(f"{what}: {getattr(e, 'message', e)}", hint=getattr(e, "hint", None)) from None


def _alloc(shape, dtype, scope, what, init=None):
    b = require_kernel(what)
    name = b.fresh_name(getattr(b, "pending_name", None) or scope)
    buf = Buffer(name, _shape(shape, what), _dtype(dtype, what), scope, span=b.span)
    b.emit(Alloc(buf, init, span=b.span))
    return buf


# TileLang's storage scope names (the `scope=` argument of the T.alloc_* calls) -> tilecraft's.
_SCOPES = {"shared": "shared", "shared.dyn": "shared", "local.fragment": "fragment", "local": "local",
           "local.var": "var"}


def _scope(scope, what):
    s = _SCOPES.get(scope) if isinstance(scope, str) else None
    if s is None:
        raise error(f"{what}: unknown scope {scope!r}; expected one of {', '.join(map(repr, _SCOPES))}")
    if s == "var":
        raise error(f"{what}: scope 'local.var' declares a scalar; use T.alloc_var(dtype)")
    return s


def alloc_global(shape, dtype, scope="global"):
    """`T.alloc_global(shape, dtype)`: a scratch tensor in global memory, allocated (uninitialized) by
    each call and shared by every block and every `T.Kernel` of the program (e.g. the partial results
    a split kernel writes and a combine kernel reads); it is not returned.  Its sizes are ints or the
    program's `T.dynamic` symbols."""
    b = current("T.alloc_global")
    if scope != "global":
        raise error(f"T.alloc_global: scope must be 'global', got {scope!r}")
    if isinstance(shape, (int, Var)):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise error(f"T.alloc_global shape must be an int or a tuple, got {shape!r}") from None
    for s in shape:
        if isinstance(s, bool) or not (isinstance(s, Var) or (isinstance(s, int) and s > 0)):
            raise error(f"T.alloc_global shape entries must be positive ints or T.dynamic symbols, got {shape!r}")
    name = b.fresh_name(getattr(b, "pending_name", None) or "workspace")
    buf = Buffer(name, shape, _dtype(dtype, "T.alloc_global"), "global", span=b.span)
    if not hasattr(b, "workspaces"):
        b.workspaces = []
    b.workspaces.append(buf)
    return buf


def alloc_shared(shape, dtype, scope="shared.dyn"):
    return _alloc(shape, dtype, _scope(scope, "T.alloc_shared"), "T.alloc_shared")


def alloc_fragment(shape, dtype, scope="local.fragment"):
    """A tile spread over the block's threads; TileLang's `scope="local"` makes it a per-thread
    buffer instead (as T.alloc_local), `"shared"` a shared one."""
    return _alloc(shape, dtype, _scope(scope, "T.alloc_fragment"), "T.alloc_fragment")


def alloc_local(shape, dtype, scope="local"):
    return _alloc(shape, dtype, _scope(scope, "T.alloc_local"), "T.alloc_local")


def alloc_var(dtype, init=None, scope="local.var"):
    if init is not None:
        init = as_expr(init, _dtype(dtype, "T.alloc_var"))
    return _alloc((1,), dtype, "var", "T.alloc_var", init)


def get_thread_binding(dim: int = 0):
    """The thread index along `dim` inside the block (low-level code; CUDA target only)."""
    b = require_kernel("T.get_thread_binding")
    return b.kernel.thread_var(dim)


def get_block_binding(dim: int = 0):
    b = require_kernel("T.get_block_binding")
    return b.kernel.block_vars[dim]


def get_block_bindings():
    b = require_kernel("T.get_block_bindings")
    return list(b.kernel.block_vars)


def sync_grid():
    """A barrier of the whole grid: every block's writes before it are seen by every block after it
    (at the top level of a kernel body; see language/grid_sync.py)."""
    b = require_kernel("T.sync_grid")
    from .grid_sync import GridSync
    b.emit(GridSync(span=b.span))


def sync_threads(barrier_id=None, arrive_count=None):
    """A barrier of the block; TileLang's `T.sync_threads(barrier_id, arrive_count)` is a named
    barrier that only the `arrive_count` threads reaching it wait on (e.g. inside `if tx < n:`)."""
    b = require_kernel("T.sync_threads")
    if barrier_id is None and arrive_count is None:
        b.emit(Sync(span=b.span))
        return
    from ..ir import intrinsics as I
    block = 1
    for t in b.kernel.spec.threads:
        block *= t
    bid = 0 if barrier_id is None else barrier_id
    count = block if arrive_count is None else arrive_count
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (bid, count)) \
            or not 0 <= bid < 16 or count <= 0 or count % 32 or count > block:
        raise error(f"T.sync_threads(barrier_id={barrier_id!r}, arrive_count={arrive_count!r}): the barrier id must "
                    f"be an int in 0..15 and the count a compile-time multiple of 32 up to the block's {block} threads")
    if bid == 0 and count == block:
        b.emit(Sync(span=b.span))
        return
    b.emit(I.evaluate(I.NamedBarrierSync(bid, count), span=b.span))


def get_thread_bindings():
    return [get_thread_binding(i) for i in range(3)]

