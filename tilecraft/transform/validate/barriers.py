"""`T.tma_copy` (ir/hopper.py `TmaCopy`): the threads that run the copy arrive on its mbarrier after it.

On a GPU a phase of the mbarrier completes only once the copy's bytes have landed (its transaction);
tilecraft's copy has landed when the statement ends (each target, ir/hopper.py) and the phase
completes on arrivals alone, which publishes the tile exactly when the copying threads' own later
arrival is among them -- TileLang's documented use (`T.tma_copy(..., barrier=bar)` then
`T.barrier_arrive(bar)`).  A copy whose threads never arrive on that mbarrier after it, in the same
branch, could see its phase completed by other threads before the tile is written: refused here, at
the copy's line, instead of racing on the GPU.
"""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import For, If, Seq, While, collect
from ...ir.hopper import BarrierArrive, TmaCopy, WarpGroupScope


def _arrives_on(stmts, buf) -> bool:
    return any(collect(s, lambda n: isinstance(n, BarrierArrive) and n.barrier.buffer is buf) for s in stmts)


def _walk(s, after: tuple) -> None:
    """`after`: the statements the same threads run after `s` (within the innermost T.ws branch)."""
    if isinstance(s, Seq):
        for i, x in enumerate(s.stmts):
            _walk(x, s.stmts[i + 1:] + after)
    elif isinstance(s, WarpGroupScope):
        _walk(s.body, ())
    elif isinstance(s, (For, While)):
        _walk(s.body, (s.body,) + after)  # the next iteration's statements, then what follows the loop
    elif isinstance(s, If):
        _walk(s.then, after)
        if s.orelse is not None:
            _walk(s.orelse, after)
    elif isinstance(s, TmaCopy):
        buf = s.barrier.buffer
        if not _arrives_on(after, buf):
            raise TilecraftError(
                f"T.tma_copy into {s.copy.dst.buffer.name}: the threads that run it never arrive on its mbarrier "
                f"{buf.name} after it.  tilecraft's T.tma_copy has landed when the statement ends and publishes the "
                f"tile through the copying threads' next arrival on that mbarrier (a phase completes on arrivals "
                f"alone); without one, other threads could complete the phase before the tile is written", s.span,
                hint=f"arrive after the copies, in the same branch: T.barrier_arrive({buf.name}[...]), as "
                     f"TileLang's examples do")
    else:
        for name in ("body",):
            inner = getattr(s, name, None)
            if inner is not None and not isinstance(inner, (tuple, list)):
                _walk(inner, after)


def check_tma_arrivals(func, target) -> None:
    if func.body is not None and collect(func.body, lambda n: isinstance(n, TmaCopy)):
        _walk(func.body, ())
