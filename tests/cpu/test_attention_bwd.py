"""FlashAttention backward (tilecraft.kernels.attention_bwd) on the CPU target against torch autograd
through SDPA in fp32, at ragged sequence lengths (not multiples of either block): the forward's LSE, the
preprocess (Delta), the backward (dK, dV, atomically accumulated dQ) and the dQ cast, full and causal,
D64 and D128.  The sm_90a plans are checked in tests/cuda/test_new_kernels_sm90.py, the GPU run in
tests/gpu/test_new_kernels_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
from tilecraft.kernels import attention_bwd as A
from tilecraft.kernels.attention import ref_attention
from tilecraft.target import default_target


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    assert torch.isfinite(out).all()
    return ((out - ref).norm() / ref.norm()).item()


def cpu(factory, *args, **kwargs):
    kw = factory.compile_kwargs
    return tilelang.compile(factory.fn(*args, **kwargs), out_idx=kw["out_idx"], target="cpu",
                            pass_configs=kw["pass_configs"])


@pytest.mark.parametrize("seq,dim,causal", [(100, 64, False), (100, 64, True), (72, 128, True)])
def test_forward_lse_and_backward_match_autograd(seq, dim, causal):
    b, h = 2, 2
    q, k, v, do = (torch.randn(b, seq, h, dim).half() for _ in range(4))
    o, lse = cpu(A.flash_attention_fwd_lse, b, h, seq, dim, causal)(q, k, v)
    assert lse.shape == (b, h, seq) and lse.dtype == torch.float32
    assert rel_err(o, ref_attention(q, k, v, causal)) < 2e-3
    torch.testing.assert_close(lse, A.ref_attention_lse(q, k, v, causal), rtol=1e-4, atol=1e-4)

    delta = cpu(A.flash_attention_bwd_preprocess, b, h, seq, dim)(o, do)
    torch.testing.assert_close(delta, (o.float() * do.float()).sum(-1).transpose(1, 2), rtol=1e-5, atol=1e-4)
    dq_acc = torch.zeros(b, h, seq, dim, dtype=torch.float32)   # head-major, the backward's own layout
    dk, dv = (torch.full_like(k, float("nan")) for _ in range(2))   # every element must be written
    # 64-row key blocks, 32-row query blocks: neither divides seq, and causal starts mid-block
    cpu(A.flash_attention_bwd, b, h, seq, dim, causal, block_M=64, block_N=32)(q, k, v, do, lse, delta, dq_acc, dk, dv)
    dq = cpu(A.flash_attention_bwd_postprocess, b, h, seq, dim)(dq_acc)
    rq, rk, rv = A.ref_attention_backward(q, k, v, do, causal)
    for name, ours, ref in (("dQ", dq, rq), ("dK", dk, rk), ("dV", dv, rv)):
        assert ours.dtype == torch.float16
        assert rel_err(ours, ref) < 2e-3, name


def test_backward_helper_chains_the_kernels():
    b, h, seq, dim = 1, 3, 50, 64
    q, k, v, do = (torch.randn(b, seq, h, dim).half() for _ in range(4))
    with default_target("cpu"):
        o, lse = A.flash_attention_fwd_lse(b, h, seq, dim)(q, k, v)
        grads = A.flash_attention_backward(q, k, v, o, do, lse, block_M=64, block_N=32)
    for ours, ref in zip(grads, A.ref_attention_backward(q, k, v, do)):
        assert rel_err(ours, ref) < 2e-3


def test_preprocess_refuses_a_wrong_shaped_gradient():
    """A wrong-shaped dO is refused at the call, naming the parameter."""
    b, h, seq, dim = 1, 1, 64, 64
    q = torch.randn(b, seq, h, dim).half()
    kern = cpu(A.flash_attention_bwd_preprocess, b, h, seq, dim)
    with pytest.raises((TypeError, ValueError), match="dO"):
        kern(q, q[:, :32])
