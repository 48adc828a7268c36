"""Fragment layouts: how a register tile is spread over the threads of a block.

A layout is written in *digits*.  The thread index is split into thread digits (mixed radix,
fastest first) and a thread's register slot into register digits (also fastest first).  Every
tile coordinate is a linear combination of digits:

    mma.sync m16n8k16 accumulator, 2x2 warps:  i = 64*wm + 16*mi + 8*h + lane_r
                                                j = 32*wn +  8*ni + 2*lane_c + e

Thread digits that no coordinate uses mean replication: a row vector produced by reducing the
tile above along j lives, identical, in every thread of the row (`project`).  Because the digits
of a projected layout are a subset of the original's, a `T.Parallel` loop driven by one layout
can address another fragment's registers with compile-time slot numbers — the property that
keeps fragments in registers.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..node import same


@dataclass(frozen=True)
class Digit:
    name: str
    extent: int


@dataclass(frozen=True)
class FragmentLayout:
    shape: tuple                # tile shape
    threads: int                # threads of the block
    thread_digits: tuple        # Digits, fastest first; product == threads
    reg_digits: tuple           # Digits, fastest first
    coords: tuple               # per dim: tuple of (digit name, coefficient)

    # ---- sizes ----------------------------------------------------------------------------
    @property
    def num_regs(self) -> int:
        n = 1
        for d in self.reg_digits:
            n *= d.extent
        return n

    def thread_stride(self, name: str) -> int:
        s = 1
        for d in self.thread_digits:
            if d.name == name:
                return s
            s *= d.extent
        raise KeyError(name)

    def reg_stride(self, name: str) -> int:
        s = 1
        for d in self.reg_digits:
            if d.name == name:
                return s
            s *= d.extent
        raise KeyError(name)

    def is_thread_digit(self, name: str) -> bool:
        return any(d.name == name for d in self.thread_digits)

    def digit(self, name: str) -> Digit:
        for d in self.thread_digits + self.reg_digits:
            if d.name == name:
                return d
        raise KeyError(name)

    # ---- evaluation -----------------------------------------------------------------------
    def reg_values(self, slot: int) -> dict:
        out = {}
        for d in self.reg_digits:
            out[d.name] = slot % d.extent
            slot //= d.extent
        return out

    def coord_of(self, dim: int, values: dict):
        """Coordinate `dim` from digit values (ints, or IR expressions for thread digits)."""
        total = 0
        for name, coef in self.coords[dim]:
            total = total + values[name] * coef
        return total

    def slot_of(self, reg_values: dict) -> int:
        slot = 0
        for d in reversed(self.reg_digits):
            slot = slot * d.extent + reg_values[d.name]
        return slot

    def max_coord(self, dim: int) -> int:
        return sum((self.digit(n).extent - 1) * c for n, c in self.coords[dim])

    def padded_dims(self) -> list:
        """Dimensions whose coordinates run past the tile: registers there hold padding."""
        return [d for d in range(len(self.shape)) if self.max_coord(d) >= self.shape[d]]

    def uses(self, dim: int) -> set:
        return {n for n, _ in self.coords[dim]}

    # ---- derived layouts ------------------------------------------------------------------
    def project(self, keep_dims) -> "FragmentLayout":
        """The layout of the tile restricted to `keep_dims` (a reduction's result): register
        digits no kept coordinate uses disappear; unused thread digits stay (replication)."""
        keep_dims = tuple(keep_dims)
        used = set()
        for d in keep_dims:
            used |= self.uses(d)
        regs = tuple(d for d in self.reg_digits if d.name in used)
        shape = tuple(self.shape[d] for d in keep_dims) or (1,)
        coords = tuple(self.coords[d] for d in keep_dims) or ((),)
        return FragmentLayout(shape, self.threads, self.thread_digits, regs, coords)

    def same_as(self, other: "FragmentLayout") -> bool:
        return (self.shape == other.shape and self.threads == other.threads and
                self.thread_digits == other.thread_digits and self.reg_digits == other.reg_digits and
                tuple(tuple(sorted(c)) for c in self.coords) == tuple(tuple(sorted(c)) for c in other.coords))

    def equivalent(self, other: "FragmentLayout") -> bool:
        """The same placement under other digit names: every (thread, register slot) holds the same
        tile element in both.  Two fragments that agree this way share register arrays slot for
        slot, so a conflict between their digit spellings is no conflict (a row vector projected
        from a [S, N] tile with a replicated outer dimension vs the default layout of [N])."""
        if self.same_as(other):
            return True
        if (self.shape != other.shape or self.threads != other.threads or self.num_regs != other.num_regs
                or len(self.coords) != len(other.coords)):
            return False
        return _placement(self) == _placement(other)

    def describe(self) -> str:
        dims = []
        for c in self.coords:
            dims.append(" + ".join(f"{k}*{n}" if k != 1 else n for n, k in c) or "0")
        t = ", ".join(f"{d.name}:{d.extent}" for d in self.thread_digits)
        r = ", ".join(f"{d.name}:{d.extent}" for d in self.reg_digits)
        return f"Fragment{self.shape} threads[{t}] regs[{r}] -> ({'; '.join(dims)})"


@lru_cache(maxsize=512)
def _placement(lay: FragmentLayout) -> tuple:
    """The element every (thread, slot) holds, threads outer: the layout's meaning without its names."""
    out = []
    for slot in range(lay.num_regs):
        regs = lay.reg_values(slot)
        for tid in range(lay.threads):
            vals, t = dict(regs), tid
            for d in lay.thread_digits:
                vals[d.name] = t % d.extent
                t //= d.extent
            out.append(tuple(lay.coord_of(k, vals) for k in range(len(lay.coords))))
    return tuple(out)


def default_layout(shape, threads: int, elem_bytes: int, vector_bytes: int = 16) -> FragmentLayout:
    """Spread a tile over the block's threads for coalesced, 16-byte vector access: the innermost
    dimension is cut into vectors, then threads, then registers; outer dimensions take any
    threads left, then registers.  Threads beyond what the tile can use replicate it."""
    vec = max(1, vector_bytes // elem_bytes)
    left = threads
    tdigits, rdigits = [], []
    coords = [[] for _ in shape]
    for dim in reversed(range(len(shape))):
        n = shape[dim]
        inner = 1
        if dim == len(shape) - 1:
            v = _gcd(vec, n)
            if v > 1:
                rdigits.append(Digit(f"v{dim}", v))
                coords[dim].append((f"v{dim}", 1))
                inner = v
        q = n // inner
        t = _gcd(q, left)
        if dim == len(shape) - 1 and 2 * t < min(q, left):
            # The row does not split evenly over the threads (e.g. 1000 columns): pad it to a
            # multiple of a power-of-two thread count; the padding is masked wherever registers
            # are visited (FragmentLayout.padded_dims), instead of one thread owning whole rows.
            t = 1
            while 2 * t <= min(q, left) and left % (2 * t) == 0:
                t *= 2
            q = -(-q // t) * t
        if dim == len(shape) - 1 and t > 32 and len(shape) > 1:
            # Keep a row inside as few warps as possible: lanes take the row, the outer dimensions
            # take the warps, so reductions along the row need shuffles but no shared memory.
            outer = 1
            for s in shape[:-1]:
                outer *= s
            t //= _gcd(outer, t // 32)
        if t > 1:
            tdigits.append(Digit(f"t{dim}", t))
            coords[dim].append((f"t{dim}", inner))
            left //= t
        rest = q // t
        if rest > 1:
            rdigits.append(Digit(f"r{dim}", rest))
            coords[dim].append((f"r{dim}", inner * t))
    if left > 1:
        tdigits.append(Digit("rep", left))
    # register digits: vectors fastest, then outer dims' registers from the innermost dim out,
    # so a thread's registers walk its elements in row-major order.
    rdigits = sorted(rdigits, key=lambda d: (0 if d.name.startswith("v") else 1, -int(d.name[1:])))
    return FragmentLayout(tuple(shape), threads, tuple(tdigits), tuple(rdigits),
                          tuple(tuple(c) for c in coords))


def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


def mma_accumulator_layout(shape, threads: int, warps_m: int, warps_n: int) -> FragmentLayout:
    """The mma.sync m16n8k16 C/D fragment over a (M, N) tile split among warps_m x warps_n warps.
    Per PTX: lane l holds rows l/4 and l/4+8, columns 2*(l%4) and 2*(l%4)+1 of each 16x8 tile."""
    m, n = shape
    tm, tn = m // warps_m, n // warps_n
    mi, ni = tm // 16, tn // 8
    tdigits = [Digit("lc", 4), Digit("lr", 8), Digit("wm", warps_m), Digit("wn", warps_n)]
    rdigits = [Digit("e", 2), Digit("h", 2), Digit("ni", ni), Digit("mi", mi)]
    used = threads // 32
    if warps_m * warps_n != used:
        raise ValueError("warp grid does not cover the block")
    ci = [("lr", 1), ("h", 8), ("mi", 16), ("wm", tm)]
    cj = [("e", 1), ("lc", 2), ("ni", 8), ("wn", tn)]
    drop = lambda ds: tuple(d for d in ds if d.extent > 1)  # noqa: E731
    keep_names = {d.name for d in drop(tdigits) + drop(rdigits)}
    return FragmentLayout(tuple(shape), threads, drop(tdigits), drop(rdigits),
                          (tuple(c for c in ci if c[0] in keep_names), tuple(c for c in cj if c[0] in keep_names)))


def warp_partition(m: int, n: int, warps: int, policy: str) -> tuple:
    """(warps_m, warps_n) for a gemm tile: every warp gets a multiple of 16 rows and 8 columns."""
    options = []
    for wm in range(1, warps + 1):
        if warps % wm:
            continue
        wn = warps // wm
        if m % (16 * wm) or n % (8 * wn):
            continue
        options.append((wm, wn))
    if not options:
        return None
    if policy == "FullRow":
        return max(options, key=lambda o: o[0])
    if policy == "FullCol":
        return max(options, key=lambda o: o[1])
    return min(options, key=lambda o: (abs(m / o[0] - n / o[1]), -o[0]))


def wgmma_accumulator_layout(shape, threads: int, wg_n: int = 1) -> FragmentLayout:
    """The wgmma m64nNk16 accumulator over an (M, N) tile, warpgroups (128 threads) along M, or
    `wg_n` of them along N (warpgroup g = gn + wg_n * gm owns rows gm*M/WGM.. and columns gn*N/wg_n..).
    Per the PTX ISA: in warpgroup g, warp w, lane l, register e + 2h + 4*(ni + (N/wg_n/8)*mi) holds
    row gm*M/WGM + 64*mi + 16*w + 8*h + l/4 and column gn*N/wg_n + 8*ni + 2*(l%4) + e."""
    m, n = shape
    wg = threads // 128
    wgm = wg // wg_n
    per, wn = m // wgm, n // wg_n
    tdigits = [Digit("lc", 4), Digit("lr", 8), Digit("w", 4), Digit("gn", wg_n), Digit("g", wgm)]
    rdigits = [Digit("e", 2), Digit("h", 2), Digit("ni", wn // 8), Digit("mi", per // 64)]
    ci = [("lr", 1), ("h", 8), ("w", 16), ("mi", 64), ("g", per)]
    cj = [("e", 1), ("lc", 2), ("ni", 8), ("gn", wn)]
    keep = {d.name for d in tdigits + rdigits if d.extent > 1}
    return FragmentLayout(tuple(shape), threads, tuple(d for d in tdigits if d.extent > 1),
                          tuple(d for d in rdigits if d.extent > 1),
                          (tuple(c for c in ci if c[0] in keep), tuple(c for c in cj if c[0] in keep)))


def wgmma_row_ok(row_elems: int, elem_bytes: int) -> bool:
    """Row lengths `tc::swizzle_offset_sm90` supports: 32, 64, 128 bytes or a multiple of 128."""
    rb = row_elems * elem_bytes
    return rb in (32, 64, 128) or (rb > 128 and rb % 128 == 0)


def extend_uniform(base: "FragmentLayout", shape, dims) -> "FragmentLayout | None":
    """The layout a `T.Parallel` nest driven by `base` (over the loop's index space) gives a
    fragment of `shape` indexed with `dims` (`ir.semantics.mixed_dims`: loop position per
    dimension, None where the index is uniform).  Loop-indexed dimensions take base's
    coordinates; each uniformly indexed dimension becomes a register digit `u<dim>` of its full
    extent, after base's own registers (so the uniform index only adds `u * stride` to a slot).
    None when a loop-indexed dimension's size differs from the loop's extent."""
    coords, used = [], set()
    for d, k in enumerate(dims):
        if k is None:
            coords.append(None)
            continue
        if shape[d] != base.shape[k]:
            return None
        coords.append(base.coords[k])
        used |= base.uses(k)
    names = {dg.name for dg in base.thread_digits + base.reg_digits}
    regs = [dg for dg in base.reg_digits if dg.name in used]
    for d, c in enumerate(coords):
        if c is not None:
            continue
        if shape[d] == 1:
            coords[d] = ()
            continue
        name = f"u{d}"
        while name in names:
            name += "_"
        names.add(name)
        regs.append(Digit(name, shape[d]))
        coords[d] = ((name, 1),)
    return FragmentLayout(tuple(shape), base.threads, base.thread_digits, tuple(regs), tuple(coords))


def extend_window(base: "FragmentLayout", shape, dims):
    """Like `extend_uniform`, for `ir.semantics.window_dims`: a window dimension `u * c + v` (v the
    loop variable at position k, whose extent must be c) takes base's coordinates of v plus a
    new register digit `w<dim>` of extent shape/c with coefficient c, so each thread holds the
    same columns of every window and `u` only adds `u * stride` to a slot.  Returns (layout,
    {new digit name: dimension}) or None when the sizes do not fit."""
    coords, used, new = [], set(), []
    for d, k in enumerate(dims):
        if k is None:
            coords.append(None)
            new.append((d, f"u{d}", shape[d], 1))
            continue
        if isinstance(k, tuple):
            k, _, c = k
            if base.shape[k] != c or shape[d] % c:
                return None
            coords.append(tuple(base.coords[k]))
            new.append((d, f"w{d}", shape[d] // c, c))
        else:
            if shape[d] != base.shape[k]:
                return None
            coords.append(tuple(base.coords[k]))
        used |= base.uses(k)
    names = {dg.name for dg in base.thread_digits + base.reg_digits}
    regs = [dg for dg in base.reg_digits if dg.name in used]
    owner = {}
    for d, name, extent, coef in new:
        if extent == 1:
            coords[d] = coords[d] or ()
            continue
        while name in names:
            name += "_"
        names.add(name)
        regs.append(Digit(name, extent))
        coords[d] = (coords[d] or ()) + ((name, coef),)
        owner[name] = d
    return FragmentLayout(tuple(shape), base.threads, base.thread_digits, tuple(regs), tuple(coords)), owner


def uniform_slot_part(lay: "FragmentLayout", dims):
    """For a fragment indexed with uniform indices in the dimensions where `dims` is None: the
    register digits those dimensions own, as [(dim, stride)] (a dimension of size 1 owns none),
    or None when such a dimension is spread over threads (then one thread does not hold it all)
    or is not a single unit-coefficient register digit of its full extent placed after the
    loop-indexed dimensions' registers."""
    loop_regs = {n for d, k in enumerate(dims) if k is not None for n in lay.uses(d)}
    out, seen = [], 0
    for d, k in enumerate(dims):
        if k is not None:
            continue
        c = lay.coords[d]
        if c == () and lay.shape[d] == 1:
            continue
        if len(c) != 1 or c[0][1] != 1 or lay.is_thread_digit(c[0][0]) or c[0][0] in loop_regs:
            return None
        if lay.digit(c[0][0]).extent != lay.shape[d]:
            return None
        out.append((d, lay.reg_stride(c[0][0])))
        seen += 1
    # the loop-indexed registers must come first (their slot numbering is the projection's)
    n_loop = len([dg for dg in lay.reg_digits if dg.name in loop_regs])
    if any(dg.name not in loop_regs for dg in lay.reg_digits[:n_loop]):
        return None
    return out


def replicated_layout(shape, threads: int) -> FragmentLayout:
    """Every thread holds the whole tile, row-major in its registers: the layout of a fragment
    read with uniform indices outside any `T.Parallel` loop (`if block_mask[k]:`), where every
    thread must see every element (TileLang gives such fragments a fully replicated layout too)."""
    regs = tuple(Digit(f"u{d}", n) for d, n in reversed(list(enumerate(shape))) if n > 1)
    coords = tuple(((f"u{d}", 1),) if n > 1 else () for d, n in enumerate(shape))
    tdigits = (Digit("rep", threads),) if threads > 1 else ()
    return FragmentLayout(tuple(shape), threads, tdigits, regs, coords)


def extend_over_loop(lay: FragmentLayout, adims, extents, spread: bool = True) -> FragmentLayout | None:
    """The layout of a `T.Parallel` nest of `extents` anchored by a fragment that the loop indexes
    with only some of its variables (a row vector `m[i]` in `for i, j in T.Parallel(M, N)`):
    `adims[d]` is the loop position indexing the fragment's dimension d.  Loop dimensions the
    fragment covers keep its coordinates; each other one (innermost first) is spread over the
    fragment's replicated thread digits where their extents divide it, the rest over new register
    digits `x<k>`, so replicas split the extra work instead of repeating it.  With `spread` False
    (the nest stores through a projection, ir.semantics.writes_a_projection) registers only: every
    replica then runs the whole extra dimension in order, as the CPU reference does.  None when a
    covered dimension's size differs from the loop's extent."""
    coords: list = [None] * len(extents)
    for d, k in enumerate(adims):
        if not same(lay.shape[d], extents[k]):
            return None
        coords[k] = tuple(lay.coords[d])
    used = set()
    for c in lay.coords:
        used |= {n for n, _ in c}
    free = [d for d in lay.thread_digits if d.name not in used] if spread else []
    names = {d.name for d in lay.thread_digits + lay.reg_digits}
    regs = list(lay.reg_digits)
    for k in reversed(range(len(extents))):
        if coords[k] is not None:
            continue
        n, stride, c = extents[k], 1, []
        for d in list(free):
            if n % d.extent == 0 and d.extent > 1:
                c.append((d.name, stride))
                stride *= d.extent
                n //= d.extent
                free.remove(d)
        if n > 1:
            name = f"x{k}"
            while name in names:
                name += "_"
            names.add(name)
            regs.append(Digit(name, n))
            c.append((name, stride))
        coords[k] = tuple(c)
    return FragmentLayout(tuple(extents), lay.threads, lay.thread_digits, tuple(regs), tuple(coords))


def _thread_values(lay: FragmentLayout, tid: int) -> dict:
    vals = {}
    for d in lay.thread_digits:
        vals[d.name] = tid % d.extent
        tid //= d.extent
    return vals


def _element(lay: FragmentLayout, tid: int, slot: int) -> tuple:
    vals = _thread_values(lay, tid)
    vals.update(lay.reg_values(slot))
    return tuple(lay.coord_of(k, vals) for k in range(len(lay.coords)))


@lru_cache(maxsize=256)
def covering_slot(lay: FragmentLayout, loop: FragmentLayout):
    """For a fragment laid out as `lay` that a `T.Parallel` loop only *reads*, the loop running
    over `loop` (the loop's layout projected onto the fragment's indices) with another placement:
    whether every thread already holds, in `lay`, each element it visits, at a slot that is
    `offset + sum(digit value * coefficient)` over the loop's register and thread digits.
    Returns (offset, ((digit name, coefficient), ...)) or None.

    This is what lets a row vector reduced from one gemm's accumulator (rows held replicated by
    the warps of a `FullCol` partition) scale another accumulator whose warps split the rows
    (`acc_o[i, j] *= scale[i]` beside a gemm whose A comes from registers): each thread reads its
    own copy, as TileLang does when the source fragment holds what the loop's thread needs.  A
    thread digit in the slot makes the register index vary by thread (the compiler may then keep
    that small array in local memory): correct, if slower than a matching layout."""
    if lay.shape != loop.shape or lay.threads != loop.threads:
        return None
    inside = lambda c: all(0 <= x < s for x, s in zip(c, lay.shape))  # noqa: E731
    held: dict = {}

    def slot_in(tid, e):  # the first slot of `lay` where thread `tid` holds element e
        m = held.get(tid)
        if m is None:
            m = held[tid] = {}
            for s in range(lay.num_regs):
                m.setdefault(_element(lay, tid, s), s)
        return m.get(e)

    def probe(tid, r):
        e = _element(loop, tid, r)
        return slot_in(tid, e) if inside(e) else None
    offset = probe(0, 0)
    if offset is None:
        return None
    coefs = []
    for d in loop.reg_digits + loop.thread_digits:
        if d.extent == 1:
            continue
        reg = not loop.is_thread_digit(d.name)
        st = loop.reg_stride(d.name) if reg else loop.thread_stride(d.name)
        s1 = probe(0, st) if reg else probe(st, 0)
        if s1 is None:
            return None
        if s1 != offset:
            coefs.append((d.name, s1 - offset))
    for tid in range(loop.threads):
        vals = _thread_values(loop, tid)
        for r in range(loop.num_regs):
            e = _element(loop, tid, r)
            if not inside(e):
                continue
            vals.update(loop.reg_values(r))
            s = offset + sum(vals[n] * c for n, c in coefs)
            if not 0 <= s < lay.num_regs or _element(lay, tid, s) != e:
                return None
    return offset, tuple(coefs)
