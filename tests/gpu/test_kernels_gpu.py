"""The GPU tier: every reference kernel of `tilecraft.kernels`, compiled for the CUDA device
(`target="auto"` picks it), checked against its torch reference.

Method (see /work/.library/device/METHOD.md): fresh random inputs (never zeros), the output
poisoned with NaN and passed explicitly wherever the kernel writes all of it (so an unwritten
element fails), sizes that are ragged / not powers of two as well as large ones, and the relative
Frobenius error ||out - ref|| / ||ref|| computed in float64 against a reference in higher
precision: fp16/bf16 outputs must be under 1e-2, fp32 element-wise results essentially exact.
Also: a CUDA error from a kernel raises a Python exception and later kernels still run.
"""
from __future__ import annotations

import dataclasses
import math

import pytest

torch = pytest.importorskip("torch")

import tilecraft.kernels as K  # noqa: E402

pytestmark = pytest.mark.gpu

DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def rel_err(out, ref) -> float:
    out, ref = out.double(), ref.double()
    assert torch.isfinite(out).all(), f"{(~torch.isfinite(out)).sum().item()} non-finite elements in the output"
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def poisoned(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def on_cuda(kernel):
    assert kernel.target.kind == "cuda", f"{kernel} was compiled for {kernel.target}, not the GPU"
    return kernel


def rand(*shape, dtype=torch.float16, scale=1.0):
    return (torch.randn(*shape, device="cuda", dtype=torch.float32) * scale).to(dtype)


# ---- element-wise ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1000, 4096, 10**6 + 3])
def test_vector_add(n):
    kernel = on_cuda(K.vector_add(n))
    a, b = rand(n, dtype=torch.float32), rand(n, dtype=torch.float32)
    c = poisoned((n,), torch.float32)
    kernel(a, b, c)
    assert rel_err(c, a.double() + b.double()) < 1e-7
    c2 = kernel(a, b)  # the allocated-output form
    torch.testing.assert_close(c2, c, rtol=0, atol=0)


@pytest.mark.parametrize("m,n", [(1000, 777), (64, 256), (4097, 1023)])
def test_axpby(m, n):
    kernel = on_cuda(K.axpby(m, n))
    x, y = rand(m, n), rand(m, n)
    z = poisoned((m, n), torch.float16)
    kernel(x, y, z)
    assert rel_err(z, 2.0 * x.double() - 0.5 * y.double()) < 1e-2


# ---- GEMM -----------------------------------------------------------------------------------
GEMM_CASES = [
    # (M, N, K, trans_A, trans_B, dtype, config)
    (77, 53, 40, False, False, "float16", {}),
    (1000, 1000, 1000, False, False, "float16", {}),
    (1000, 1000, 1000, False, False, "bfloat16", {}),
    (256, 384, 320, True, False, "float16", {}),
    (256, 384, 320, False, True, "float16", {}),
    (200, 136, 72, True, True, "bfloat16", {}),
    (1000, 1000, 1000, False, False, "float16", dict(block_M=128, block_N=256, block_K=32, num_stages=3, threads=256)),
    (1000, 1000, 1000, False, False, "float16", dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128)),
    (1000, 1000, 1000, False, False, "float16", dict(block_M=64, block_N=64, block_K=32, num_stages=2, threads=128)),
]


@pytest.mark.parametrize("m,n,k,ta,tb,dtype,cfg", GEMM_CASES,
                         ids=[f"{c[0]}x{c[1]}x{c[2]}-{'T' if c[3] else 'N'}{'T' if c[4] else 'N'}-{c[5]}"
                              + ("-" + "_".join(str(v) for v in c[6].values()) if c[6] else "") for c in GEMM_CASES])
def test_matmul(m, n, k, ta, tb, dtype, cfg):
    kernel = on_cuda(K.matmul(m, n, k, trans_A=ta, trans_B=tb, dtype=dtype, **cfg))
    td = DT[dtype]
    a = rand(*((k, m) if ta else (m, k)), dtype=td)
    b = rand(*((n, k) if tb else (k, n)), dtype=td)
    c = poisoned((m, n), td)
    kernel(a, b, c)
    ref = (a.double().t() if ta else a.double()) @ (b.double().t() if tb else b.double())
    assert rel_err(c, ref) < 1e-2


@pytest.mark.parametrize("m,n,k", [(256, 384, 256), (100, 130, 72)])
def test_matmul_bias_gelu(m, n, k):
    kernel = on_cuda(K.matmul_bias_gelu(m, n, k))
    a, b, bias = rand(m, k), rand(k, n), rand(n)
    c = poisoned((m, n), torch.float16)
    kernel(a, b, bias, c)
    x = a.double() @ b.double() + bias.double()
    ref = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    assert rel_err(c, ref) < 1e-2


@pytest.mark.parametrize("m,n,k,split_k", [(256, 256, 1024, 4), (200, 130, 512, 4), (64, 64, 256, 2)])
def test_splitk_matmul(m, n, k, split_k):
    kernel = on_cuda(K.splitk_matmul(m, n, k, split_k=split_k))
    a, b = rand(m, k), rand(k, n)
    c = torch.zeros(m, n, dtype=torch.float32, device="cuda")  # accumulated into: must start at 0
    kernel(a, b, c)
    assert rel_err(c, a.double() @ b.double()) < 1e-4  # fp32 accumulation, fp16 inputs exact


# ---- reductions -----------------------------------------------------------------------------
@pytest.mark.parametrize("m,n", [(37, 1000), (128, 1024), (4096, 8192)])
def test_softmax(m, n):
    kernel = on_cuda(K.softmax(m, n))
    x = rand(m, n, scale=3.0)
    y = poisoned((m, n), torch.float16)
    kernel(x, y)
    assert rel_err(y, x.double().softmax(-1)) < 1e-2


@pytest.mark.parametrize("m,n", [(37, 1000), (256, 4096), (1001, 768)])
def test_rmsnorm(m, n):
    kernel = on_cuda(K.rmsnorm(m, n))
    x, w = rand(m, n, dtype=torch.bfloat16), rand(n, dtype=torch.bfloat16)
    y = poisoned((m, n), torch.bfloat16)
    kernel(x, w, y)
    xd = x.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    assert rel_err(y, ref) < 1e-2


# ---- attention ------------------------------------------------------------------------------
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("b,h,s,d", [(2, 3, 200, 64), (1, 2, 200, 128), (1, 4, 512, 128)])
def test_flash_attention(b, h, s, d, causal):
    kernel = on_cuda(K.flash_attention(b, h, s, d, is_causal=causal))
    q, k, v = (rand(b, s, h, d) for _ in range(3))
    o = poisoned((b, s, h, d), torch.float16)
    kernel(q, k, v, o)
    qt, kt, vt = (t.transpose(1, 2).double() for t in (q, k, v))
    scores = qt @ kt.transpose(-1, -2) / math.sqrt(d)
    if causal:
        mask = torch.ones(s, s, dtype=torch.bool, device="cuda").tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    ref = (scores.softmax(-1) @ vt).transpose(1, 2)
    assert rel_err(o, ref) < 1e-2


# ---- errors must not poison the process -----------------------------------------------------
def test_cuda_error_raises_and_later_kernels_still_work():
    from tilecraft.runtime.cuda_driver import CudaError
    from tilecraft.runtime.kernel import JITKernel
    n = 4096
    good = on_cuda(K.vector_add(n))
    # The same cubin launched with an illegal block (4096 threads): the driver rejects it.
    bad_artifact = dataclasses.replace(good.artifact, meta=dict(good.artifact.meta, block=[4096, 1, 1]))
    bad = JITKernel(good.func, bad_artifact, out_idx=good.out_idx)
    a, b = rand(n, dtype=torch.float32), rand(n, dtype=torch.float32)
    with pytest.raises(CudaError, match=good.artifact.meta.get("kernel_name", good.name)):
        bad(a, b)  # the generated call
    with pytest.raises(CudaError, match=good.artifact.meta.get("kernel_name", good.name)):
        bad._call_checked((a, b), None)  # the general path
    # A shape error is caught before any launch.
    with pytest.raises(ValueError):
        good(a[:100], b[:100])
    # The process is still usable: this kernel, another kernel, and torch itself.
    c = poisoned((n,), torch.float32)
    good(a, b, c)
    torch.cuda.synchronize()
    assert rel_err(c, a.double() + b.double()) < 1e-7
    x = rand(37, 1000)
    assert rel_err(on_cuda(K.softmax(37, 1000))(x), x.double().softmax(-1)) < 1e-2
    assert torch.isfinite((a @ a.new_ones(n)).sum())
