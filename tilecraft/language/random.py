"""TileLang's random numbers: `T.rng_init(seed, seq=None, off=0)` starts the calling thread's
Philox4x32-10 generator in cuRAND's layout (curand_init(seed, seq, off)) and `T.rng_rand()` is
its next uint32 (curand()).  Without `seq`, each thread of the grid takes its own stream
(thread + block * threads, as TileLang does; CUDA target only, it needs the thread index).

On the CPU target a block's statements run on one thread, so a block has one generator: it draws
what the CUDA target draws when a block has one thread (or each thread's elements are consumed in
the same order), which is what the examples that compare against a reference do."""
from __future__ import annotations

from ..ir import as_expr, cast, dtype as dt
from ..ir import intrinsics as I
from .builder import error, require_kernel

GENERATORS = ("curandStatePhilox4_32_10_t",)


def rng_init(seed, seq=None, off=0, generator="curandStatePhilox4_32_10_t"):
    b = require_kernel("T.rng_init")
    if generator not in GENERATORS:
        raise error(f"T.rng_init(generator={generator!r}): tilecraft has {', '.join(GENERATORS)} only")
    if seq is None:
        from .kernel import get_thread_binding
        threads = 1
        for t in b.kernel.spec.threads:
            threads *= t
        seq = get_thread_binding(0) + b.kernel.block_vars[0] * threads
    args = [cast(as_expr(v, dt.uint64), dt.uint64) for v in (seed, seq, off)]
    b.kernel.rng = True
    b.emit(I.evaluate(I.RngInit(), *args, span=b.span))


def rng_rand():
    b = require_kernel("T.rng_rand")
    if not getattr(b.kernel, "rng", False):
        raise error("T.rng_rand() before T.rng_init(...) in this kernel: the generator has no seed",
                    hint="call T.rng_init(seed, seq, offset) first")
    return I.call(I.RngRand(), dtype=dt.uint32, span=b.span)
