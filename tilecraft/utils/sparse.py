"""2:4 structured sparsity on the host (`tilelang.utils.sparse`): make semi-sparse test matrices,
compress a dense matrix into (A_sparse, E) for `T.gemm_sp`, and expand it back.

The format (the one `T.gemm_sp` reads, language/sparse.py): for a dense (M, K) matrix whose every
group of 4 consecutive k holds at most 2 non-zeros,
- A_sparse (M, K/2): each group's 2 kept values, in increasing k order;
- E (M, K/bits): bits/4 groups per element, group q in bits 4*(q % (bits/4)) upwards; a group's low
  2 bits are the position of its first kept value, the next 2 bits that of its second (positions
  strictly increasing).  A group with fewer than 2 non-zeros keeps zeros at free positions.
E's dtype follows TileLang's choice per architecture: uint8 on sm_90 (`compress_sm90`); int16 for
16-bit data and int32 for 8-bit data on sm_8x (`compress_sm80`).  E is kept in its logical row-major
order: tilecraft keeps global tensors in that order, and `make_cutlass_metadata_layout` is the
identity there (language/layout.py).  With `transposed=True` the dense matrix is given as (K, M) and
A_sparse is returned as (K/2, M); E stays (M, K/bits).
"""
from __future__ import annotations

import torch

_GROUP, _KEEP = 4, 2


def _meta_dtype(data_dtype: torch.dtype, arch: str) -> torch.dtype:
    from ..contrib.nvcc import parse_compute_version
    major_minor = parse_compute_version(arch)
    if major_minor >= (9, 0):
        return torch.uint8
    if major_minor >= (8, 0):
        return torch.int32 if data_dtype.itemsize == 1 else torch.int16
    raise ValueError(f"2:4 sparse compression needs sm_80 or newer, got compute version {arch}")


def _bits(meta_dtype: torch.dtype) -> int:
    return meta_dtype.itemsize * 8


def compress_with_meta_dtype(A: torch.Tensor, meta_dtype: torch.dtype, transposed: bool = False):
    """(A_sparse, E) of the semi-sparse matrix A with E of `meta_dtype` (see the module docstring).
    ValueError when a group of 4 holds more than 2 non-zeros or the shape does not divide."""
    if A.dim() != 2:
        raise ValueError(f"compress: expected a 2-D matrix, got shape {tuple(A.shape)}")
    if A.dtype.itemsize not in (1, 2):
        raise ValueError(f"compress: 2:4 sparsity takes 16-bit or 8-bit data, got {A.dtype}")
    dense = A.t() if transposed else A
    m, k = dense.shape
    bits = _bits(meta_dtype)
    if k % bits:
        raise ValueError(f"compress: K={k} must be a multiple of {bits} (one {meta_dtype} metadata element "
                         f"covers {bits} k-values)")
    groups = dense.reshape(m, k // _GROUP, _GROUP)
    nonzero = groups != 0
    count = nonzero.sum(-1)
    if bool((count > _KEEP).any()):
        row, g = [int(x) for x in (count > _KEEP).nonzero()[0]]
        raise ValueError(f"compress: A is not 2:4 sparse: row {row}, k {g * _GROUP}..{g * _GROUP + 3} holds "
                         f"{int(count[row, g])} non-zeros")
    # the non-zero positions first (in order), then free zero positions; then the 2 chosen in order
    rank = (~nonzero).to(torch.int64) * _GROUP + torch.arange(_GROUP, device=A.device)
    pos = rank.argsort(-1)[..., :_KEEP].sort(-1).values                        # (m, k/4, 2)
    sparse = groups.gather(-1, pos).reshape(m, k // 2)
    nibble = pos[..., 0] | (pos[..., 1] << 2)                                  # (m, k/4)
    per = bits // 4
    shifts = torch.arange(per, device=A.device, dtype=torch.int64) * 4
    word = (nibble.reshape(m, k // bits, per) << shifts).sum(-1)               # (m, k/bits), unsigned value
    if meta_dtype.is_signed:
        word = torch.where(word >= (1 << (bits - 1)), word - (1 << bits), word)  # two's complement
    E = word.to(meta_dtype)
    if transposed:
        sparse = sparse.t()
    return sparse.contiguous(), E.contiguous()


def compress_sm90(A: torch.Tensor, block_k: int | None = None, transposed: bool = False):
    """(A_sparse, E) with uint8 metadata (8 k-values per element), as for sm_90."""
    _check_block_k(A, block_k, transposed)
    return compress_with_meta_dtype(A, torch.uint8, transposed)


def compress_sm80(A: torch.Tensor, transposed: bool = False):
    """(A_sparse, E) with int16 metadata for 16-bit data, int32 for 8-bit data, as for sm_8x."""
    return compress_with_meta_dtype(A, _meta_dtype(A.dtype, "8.0"), transposed)


def compress(A: torch.Tensor, transposed: bool = False, arch: str | None = None, **kwargs):
    """(A_sparse, E) for `T.gemm_sp` on compute version `arch` ("9.0", "8.0", ...; default: this
    machine's GPU); `block_k` (sm_90) is checked to divide K and does not change the format."""
    if arch is None:
        from ..contrib.nvcc import get_target_compute_version
        arch = get_target_compute_version()
    _check_block_k(A, kwargs.get("block_k"), transposed)
    return compress_with_meta_dtype(A, _meta_dtype(A.dtype, arch), transposed)


def _check_block_k(A, block_k, transposed):
    k = A.shape[0] if transposed else A.shape[-1]
    if block_k is not None and (block_k <= 0 or k % block_k):
        raise ValueError(f"compress: block_k={block_k} must divide K={k}")


def decompress(A_sparse: torch.Tensor, E: torch.Tensor, transposed: bool = False) -> torch.Tensor:
    """The dense matrix (M, K) (or (K, M) when transposed) that (A_sparse, E) stands for."""
    sparse = A_sparse.t() if transposed else A_sparse
    m, half = sparse.shape
    k = 2 * half
    bits = _bits(E.dtype)
    per = bits // 4
    word = E.to(torch.int64) & ((1 << bits) - 1)
    shifts = torch.arange(per, device=E.device, dtype=torch.int64) * 4
    nibble = ((word.unsqueeze(-1) >> shifts) & 15).reshape(m, k // _GROUP)
    pos = torch.stack((nibble & 3, (nibble >> 2) & 3), -1)
    dense = torch.zeros(m, k // _GROUP, _GROUP, dtype=sparse.dtype, device=sparse.device)
    dense.scatter_(-1, pos, sparse.reshape(m, k // _GROUP, _KEEP))
    dense = dense.reshape(m, k)
    return (dense.t() if transposed else dense).contiguous()


def _semi_sparse(values: torch.Tensor, dtype, transposed: bool) -> torch.Tensor:
    """Zero 2 random positions of every group of 4 along the last dimension of `values`."""
    m, k = values.shape
    if k % _GROUP:
        raise ValueError(f"a 2:4 semi-sparse matrix needs K divisible by 4, got K={k}")
    drop = torch.rand(m, k // _GROUP, _GROUP, device=values.device).argsort(-1)[..., :_GROUP - _KEEP]
    out = values.reshape(m, k // _GROUP, _GROUP).scatter(-1, drop, 0).reshape(m, k)
    if transposed:
        out = out.t().contiguous()
    return out.to(dtype)


def randn_semi_sparse(M: int, K: int, dtype=torch.float16, device="cuda", transposed: bool = False):
    """A random normal (M, K) matrix ((K, M) when transposed) with 2:4 sparsity along K."""
    return _semi_sparse(torch.randn(M, K, device=device), dtype, transposed)


def randint_semi_sparse(M: int, K: int, low: int, high: int, dtype=torch.int32, device="cuda",
                        transposed: bool = False):
    """Random integers in [low, high) with 2:4 sparsity along K."""
    return _semi_sparse(torch.randint(low, high, (M, K), device=device), dtype, transposed)


def arange_semi_sparse(M: int, K: int, dtype=torch.float16, device="cuda", transposed: bool = False):
    """0, 1, 2, ... row by row, with 2:4 sparsity along K (easy to read when debugging)."""
    return _semi_sparse(torch.arange(M * K, device=device).reshape(M, K).float(), dtype, transposed)
