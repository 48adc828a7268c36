"""`Layout` and `Fragment`: TileLang's explicit layout objects, as `T.annotate_layout` values.

- `Layout(shape, forward_fn)`: maps a logical index of a tile (or tensor) of `shape` to a physical
  index: `forward_fn(*index) -> list of ints`.
- `Fragment(shape, forward_thread_fn=..., replicate=1, forward_index_fn=...)`: maps a logical index
  of a register tile to (thread, register slot).

Both evaluate their maps on Python ints (`map_forward_index`, `map_forward_thread`), so a factory
can inspect them.  What `T.annotate_layout` does with them (language/annotations.py): a layout never
changes what a program computes, only where elements live; tilecraft keeps its own placement for
shared and register tiles (its layout inference picks bank-conflict-free / mma-ready ones), and
keeps global tensors in their logical (row-major) order.  It says so once per kind of annotation
(a `UserWarning`), because a global tensor read by torch in the annotated order would differ.
"""
from __future__ import annotations

import itertools
from typing import Callable, Sequence


def _shape(shape) -> tuple:
    try:
        return tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"a layout needs a static shape of ints, got {shape!r}") from None


class Layout:
    def __init__(self, shape: Sequence[int], forward_fn: Callable | None = None):
        self.shape = _shape(shape)
        self.forward_fn = forward_fn if forward_fn is not None else (lambda *idx: list(idx))

    def map_forward_index(self, indices: Sequence[int]) -> list:
        if len(indices) != len(self.shape):
            raise ValueError(f"layout over {self.shape} takes {len(self.shape)} indices, got {len(indices)}")
        out = self.forward_fn(*indices)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def get_input_shape(self) -> list:
        return list(self.shape)

    def get_output_shape(self) -> list:
        """The extent of each output dimension over every input index (evaluated exhaustively for
        tiles up to 2**16 elements, else over the corners of the input box)."""
        n = 1
        for s in self.shape:
            n *= s
        ranges = [range(s) for s in self.shape] if n <= 1 << 16 else [sorted({0, s - 1}) for s in self.shape]
        hi = None
        for idx in itertools.product(*ranges):
            out = self.map_forward_index(idx)
            hi = out if hi is None else [max(a, b) for a, b in zip(hi, out)]
        return [h + 1 for h in (hi or [])]

    def is_identity(self) -> bool:
        ranges = [range(min(s, 8)) for s in self.shape]
        return all(self.map_forward_index(i) == list(i) for i in itertools.product(*ranges))

    def __repr__(self):
        return f"Layout(shape={self.shape})"


class Fragment(Layout):
    def __init__(self, shape: Sequence[int], forward_fn: Callable | None = None,
                 forward_thread_fn: Callable | None = None, replicate: int = 1,
                 forward_index_fn: Callable | None = None):
        if forward_fn is not None and forward_thread_fn is None:
            # TileLang's forward_fn(*idx[, rep]) -> (thread, index), the index one expression or a
            # list of them (the replica number is passed only when replicate > 1)
            nrep = int(replicate)

            def forward_thread_fn(*idx, _f=forward_fn):
                return _f(*idx)[0]

            def forward_index_fn(*idx, _f=forward_fn):
                out = _f(*idx, 0)[1] if nrep > 1 else _f(*idx)[1]
                return list(out) if isinstance(out, (list, tuple)) else [out]
        if forward_thread_fn is None:
            raise TypeError("Fragment needs forward_thread_fn (index -> thread) or forward_fn")
        super().__init__(shape, forward_index_fn)
        self.forward_thread_fn = forward_thread_fn
        self.replicate = int(replicate)

    def map_forward_thread(self, indices: Sequence[int], rep: int = 0) -> int:
        return int(self.forward_thread_fn(*indices)) if self.replicate == 1 else \
            int(self.forward_thread_fn(*indices, rep))

    def get_thread_size(self) -> int:
        ranges = [range(s) for s in self.shape]
        return 1 + max(self.map_forward_thread(i) for i in itertools.product(*ranges))

    def __repr__(self):
        return f"Fragment(shape={self.shape}, replicate={self.replicate})"


def make_cutlass_metadata_layout(buffer, mma_dtype="float16", arch=None, block_k=None, **kwargs) -> Layout:
    """The layout of a `T.gemm_sp` metadata tensor E (or its shared tile).  In TileLang it places E
    in the interleaved order CUTLASS's compressors write; tilecraft's `tilelang.utils.sparse.compress`
    writes E in its logical row-major order instead and `T.gemm_sp` reads it in that order (global
    tensors stay logical, language/layout.py), so the layout is the identity over the buffer's shape:
    annotating with it changes nothing, as a program written for either order expects."""
    from ..ir import Buffer
    from .builder import error
    if not isinstance(buffer, Buffer) or buffer.ndim != 2:
        raise error(f"make_cutlass_metadata_layout: expects the 2-D metadata buffer E, got {buffer!r}")
    if not buffer.dtype.is_int:
        raise error(f"make_cutlass_metadata_layout: the metadata {buffer.name} must be an integer buffer, "
                    f"got {buffer.dtype}")
    if block_k is not None and (not isinstance(block_k, int) or block_k <= 0 or block_k % buffer.dtype.bits):
        raise error(f"make_cutlass_metadata_layout: block_k={block_k!r} must be a positive multiple of "
                    f"{buffer.dtype.bits} (one {buffer.dtype} element of {buffer.name} covers {buffer.dtype.bits} k)")
    return Layout(tuple(buffer.shape))
