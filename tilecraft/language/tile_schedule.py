"""`T.PersistentTileScheduler`: TileLang's persistent, grid-strided tile scheduler.

A persistent block (or cluster) is one of `num_workers` workers; worker w visits the linear tile
numbers w, w + num_workers, w + 2 * num_workers, ... while they are below the number of tiles.
The scheduler's state lives in four `T.alloc_var` scalars (`m_idx`, `n_idx`, `linear_idx`,
`current_iter`), so a program drives it with an ordinary `while` loop:

    sched = T.PersistentTileScheduler(m_blocks, n_blocks, swizzle_size=8)
    sched.init(block_id)
    while sched.valid():
        bx, by = sched.m_idx, sched.n_idx          # or sched.m_idx[0]
        ...                                         # sched.current_iter: the wave number (0, 1, ...)
        sched.next_tile()

Each method emits its stores where it is called (one scheduler per warp role runs at that role's
pace).  The decode of a linear tile number into (m, n) is TileLang's: with `cluster_size` c the M
tiles are grouped in rows of c blocks and the scheduler runs over ceildiv(m_tiles, c) cluster rows
(the caller adds its rank in the cluster); `column_major` (default) makes M the fast axis,
`swizzle_size` s sweeps the fast axis once per panel of s slow-axis tiles (a narrower last panel
when s does not divide).  `stateful=False` allocates nothing and offers only `coord(tile_id)`.
"""
from __future__ import annotations

from ..ir import Load, Store, as_expr, cast, const, dtype as dt
from .builder import error, require_kernel
from .kernel import alloc_var


def _default_workers(cluster_size):
    from ..carver.arch import driver
    try:
        sms = driver.get_num_sms()
    except RuntimeError as e:
        raise error(f"T.PersistentTileScheduler: num_workers defaults to the GPU's SM count // cluster_size "
                    f"(TileLang's meaning), but {e}",
                    hint="pass num_workers= (the number of persistent blocks or clusters in the grid)") from None
    return sms // cluster_size


class PersistentTileScheduler:
    """See the module docstring.  `PersistentTileScheduler([prefix,] num_m_tiles, num_n_tiles,
    num_workers=None, swizzle_size=1, column_major=True, cluster_size=1, stateful=True, name=None)`."""

    def __init__(self, *args, num_workers=None, swizzle_size=1, column_major=True, cluster_size=1,
                 stateful=True, name=None, prefix=None):
        b = require_kernel("T.PersistentTileScheduler")
        args = list(args)
        if args and isinstance(args[0], str):   # TileLang's older spelling: the name prefix first
            prefix = args.pop(0)
        if len(args) == 3 and num_workers is None:
            num_workers = args.pop()
        if len(args) != 2:
            raise error(f"T.PersistentTileScheduler takes the tile counts (num_m_tiles, num_n_tiles"
                        f"[, num_workers]), got {len(args)} positional argument(s)")
        num_m_tiles, num_n_tiles = args
        for what, v in (("swizzle_size", swizzle_size), ("cluster_size", cluster_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise error(f"T.PersistentTileScheduler {what} must be a positive int, got {v!r}")
        for what, v in (("num_m_tiles", num_m_tiles), ("num_n_tiles", num_n_tiles), ("num_workers", num_workers)):
            if v is not None and (isinstance(v, bool) or not (isinstance(v, int) or hasattr(v, "dtype"))):
                raise error(f"T.PersistentTileScheduler {what} must be an int or a kernel integer, got {v!r}")
            if isinstance(v, int) and v < (1 if what == "num_workers" else 0):
                raise error(f"T.PersistentTileScheduler {what} must be {'positive' if what == 'num_workers' else 'non-negative'}, got {v}")
        if num_workers is None:
            num_workers = _default_workers(cluster_size)
            if num_workers < 1:
                raise error(f"T.PersistentTileScheduler: the default num_workers (SM count // cluster_size "
                            f"{cluster_size}) is 0", hint="pass num_workers=")
        self.cluster_size = cluster_size
        self.swizzle_size = swizzle_size
        self.num_workers = num_workers
        self.column_major = bool(column_major)
        from .math import ceildiv
        m_clusters = ceildiv(num_m_tiles, cluster_size) if cluster_size > 1 else num_m_tiles
        self.total_tiles = m_clusters * num_n_tiles
        self._primary, self._secondary = ((m_clusters, num_n_tiles) if self.column_major
                                          else (num_n_tiles, m_clusters))
        self.stateful = bool(stateful)
        if self.stateful:
            base = name or prefix or b.pending_name or "sched"
            saved = b.pending_name
            try:
                for field in ("m_idx", "n_idx", "linear_idx", "current_iter"):
                    b.pending_name = f"{base}_{field}"
                    setattr(self, field, alloc_var(dt.int32))
            finally:
                b.pending_name = saved

    # -- pure decode ----------------------------------------------------------------------------
    def coord(self, tile_id):
        """(m, n) of linear tile number `tile_id` (m is the cluster row when cluster_size > 1)."""
        from .math import max as t_max, min as t_min
        primary, secondary, s = self._primary, self._secondary, self.swizzle_size
        tile_id = _value(tile_id)
        if s == 1:   # the same numbers as the general decode with a panel width of 1, in fewer operations
            fast, slow = tile_id % primary, tile_id // primary
        else:
            group = tile_id // (primary * s)
            base = group * s
            width = t_max(1, t_min(s, secondary - base))   # >= 1: a tile past the end never divides by 0
            within = tile_id - group * (primary * s)
            fast, slow = within // width, base + within % width
        return (fast, slow) if self.column_major else (slow, fast)

    # -- the stateful loop ----------------------------------------------------------------------
    def valid(self):
        self._need_state("valid")
        return Load(self.linear_idx, (const(0),)) < self.total_tiles

    def init(self, worker_id):
        self._need_state("init")
        self._set(self.current_iter, 0)
        self._set(self.linear_idx, worker_id)
        self._update()

    def next_tile(self):
        self._need_state("next_tile")
        self._set(self.current_iter, Load(self.current_iter, (const(0),)) + 1)
        self._set(self.linear_idx, Load(self.linear_idx, (const(0),)) + self.num_workers)
        self._update()

    def _update(self):
        m, n = self.coord(Load(self.linear_idx, (const(0),)))
        self._set(self.m_idx, m)
        self._set(self.n_idx, n)

    def _set(self, buf, value):
        b = require_kernel("T.PersistentTileScheduler")
        b.emit(Store(buf, (const(0),), cast(as_expr(_value(value), dt.int32), dt.int32), span=b.span))

    def _need_state(self, method):
        if not self.stateful:
            raise error(f"T.PersistentTileScheduler(stateful=False) has no state: .{method}() needs the "
                        f"stateful scheduler", hint="use .coord(tile_id) in a `for w in range(waves)` loop, "
                                                    "or drop stateful=False")


def _value(v):
    """A T.alloc_var scalar stands for its value."""
    from ..ir import Buffer
    if isinstance(v, Buffer) and v.scope == "var":
        return Load(v, (const(0),))
    return v


__all__ = ["PersistentTileScheduler"]
