"""The torch reference of tests/cuda/test_overlap_gemms.py's two-gemm loop (shared with the GPU twin)."""
from __future__ import annotations


def two_gemm_reference(q, k, v, block: int):
    """Per query block: O = sum_j exp(S_j - m_final) V_j with S_j = Q K_j^T, computed as the loop does
    (a running max and rescale), in float32 from the float16 inputs; that equals
    exp(S - rowmax(S)) @ V over all keys."""
    s = q.float() @ k.float().t()
    return (s - s.amax(dim=1, keepdim=True)).exp() @ v.float()
