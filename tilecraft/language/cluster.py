"""Thread-block clusters (sm_90+): `T.ClusterKernel`, `T.block_rank_in_cluster`, `T.alloc_cluster_barrier`.

A cluster is a group of `cluster_dims` consecutive blocks of the grid (blocks (x, y, z) with the same
(x // cx, y // cy, z // cz)) that the GPU runs at the same time on one GPC; its blocks may arrive on
each other's mbarriers and read each other's shared memory.  A block's rank in its cluster is
`x % cx + cx * (y % cy + cy * (z % cz))` (PTX %cluster_ctarank), which is how tilecraft computes it on
every target: from the block indices, with no intrinsic.

What a block does only with its own shared memory and mbarriers means the same with or without the
cluster, so the CPU target runs such a kernel's blocks one by one, as any kernel.  Arriving on another
block's mbarrier (`T.mbarrier_arrive(bar, cta_id)`, language/hopper.py) needs the blocks of a cluster to
run together: the CPU target then runs the kernel a cluster at a time, all its blocks' threads in one
pool (transform/cpu_threads.py, codegen/cpp_threads.py), and CUDA arrives through mapa +
mbarrier.arrive.release.cluster.  The 2-CTA MMA is refused at the user's line.  CUDA sm_90+ launches
the kernel with `__cluster_dims__` (codegen/cuda.py; compile-checked, not yet run on a GPU); sm_80
has no clusters and refuses it (transform/validate/arch.py).
"""
from __future__ import annotations

from ..ir import Expr, binary, const
from .builder import error, require_kernel
from .hopper import alloc_barrier
from .kernel import Kernel, KernelSpec

PORTABLE_CLUSTER = 8   # blocks per cluster every sm_90+ GPU launches (16 needs a non-portable opt-in)


def ClusterKernel(*grid, threads=128, cluster_dims=1, is_cpu=False, prelude=None):  # noqa: N802 - TileLang
    """`with T.ClusterKernel(gx, gy, threads=128, cluster_dims=2) as (bx, by):` -- T.Kernel whose
    blocks are grouped in clusters of `cluster_dims` (an int: (n, 1, 1), or up to 3 ints)."""
    spec = Kernel(*grid, threads=threads, is_cpu=is_cpu, prelude=prelude)
    dims = list(cluster_dims) if isinstance(cluster_dims, (list, tuple)) else [cluster_dims]
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims):
        raise error(f"T.ClusterKernel: cluster_dims must be a positive int or up to 3 of them, got {cluster_dims!r}")
    dims = tuple(dims) + (1,) * (3 - len(dims))
    size = dims[0] * dims[1] * dims[2]
    if size > PORTABLE_CLUSTER:
        raise error(f"T.ClusterKernel: a cluster of {size} blocks {dims}; clusters hold at most "
                    f"{PORTABLE_CLUSTER} blocks (the portable size)")
    for axis, (g, c) in enumerate(zip(tuple(spec.grid) + (1,) * (3 - len(spec.grid)), dims)):
        if c == 1:
            continue
        if axis >= len(spec.grid):
            raise error(f"T.ClusterKernel: cluster_dims {dims} groups blocks along grid dimension {axis}, which "
                        f"this grid of {len(spec.grid)} dimension(s) does not have")
        if isinstance(g, int) and g % c:
            raise error(f"T.ClusterKernel: grid dimension {axis} has {g} blocks, not a multiple of the cluster's "
                        f"{c}: the GPU launches only whole clusters")
        if isinstance(g, Expr):
            raise error(f"T.ClusterKernel: grid dimension {axis} is a run-time value; with clusters of {c} blocks "
                        f"along it, it must be a compile-time multiple of {c}")
    return KernelSpec(spec.grid, spec.threads, dims if size > 1 else ())


def block_rank_in_cluster():
    """This block's rank in its cluster, 0 .. cluster size - 1 (0 outside a T.ClusterKernel)."""
    b = require_kernel("T.block_rank_in_cluster")
    dims = b.kernel.spec.cluster or (1, 1, 1)
    rank, stride = None, 1
    for v, c in zip(b.kernel.block_vars, dims):
        if c > 1:
            term = binary("%", v, c) if stride == 1 else binary("*", binary("%", v, c), stride)
            rank = term if rank is None else binary("+", rank, term)
        stride *= c
    return const(0) if rank is None else rank


def alloc_cluster_barrier(arrive_count):
    """mbarriers in this block's shared memory that the other blocks of its cluster may arrive on
    (`T.mbarrier_arrive(bar, cta_id)`); arrivals from this block's own threads are T.alloc_barrier's."""
    require_kernel("T.alloc_cluster_barrier")
    return alloc_barrier(arrive_count)


__all__ = ["ClusterKernel", "block_rank_in_cluster", "alloc_cluster_barrier"]
