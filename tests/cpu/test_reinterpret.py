"""`T.reinterpret` on every target (see conftest.py), against torch's `Tensor.view(dtype)`: the bits
of a value read as another type of the same width (float32 <-> uint32/int32, float16/bfloat16 <->
uint16/int16, fp8 <-> uint8), used as the corpus's radix-select key (topk_selector), and the
error for types of different widths."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

PAIRS = [("float32", "uint32"), ("float32", "int32"), ("int32", "float32"), ("float16", "uint16"),
         ("bfloat16", "int16"), ("uint16", "float16"), ("float8_e4m3fn", "uint8"), ("float8_e5m2", "int8")]


@tilelang.jit(out_idx=[-1])
def bits_of(N, src, dst):
    @T.prim_func
    def main(X: T.Tensor((N,), src), Y: T.Tensor((N,), dst)):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = T.reinterpret(X[bx * 128 + i], dst)
    return main


def _random(n, dtype):
    if dtype.startswith(("float", "bfloat")):
        return (torch.randn(n) * 100).to(getattr(torch, dtype))
    info = torch.iinfo(getattr(torch, dtype))
    x = torch.randint(max(info.min, -2 ** 31), min(info.max, 2 ** 31 - 1), (n,), dtype=torch.int64)
    if dtype == "uint16":  # keep the bits finite when read as float16 (NaN payloads compare badly)
        x = x & 0x7BFF
    if dtype == "int32":
        x = x & 0x7F7FFFFF
    return x.to(getattr(torch, dtype))


@pytest.mark.parametrize("src,dst", PAIRS)
def test_reinterpret_matches_torch_view(build, device, src, dst):
    x = _random(512, src)
    y = build(bits_of, 512, src, dst)(x.to(device)).cpu()
    ref = x.view(getattr(torch, dst))
    assert torch.equal(y.view(torch.uint8), ref.view(torch.uint8))


def _key16(x):
    """topk_selector's order-preserving 8-bit key of a float: the top byte of its float16 bits,
    sign-flipped so that unsigned order matches float order."""
    h = T.cast(x, "float16")
    b = T.reinterpret(h, T.uint16)
    b = T.if_then_else(x < 0, ~b & 0xFFFF, b | 0x8000)
    return b >> 8


@tilelang.jit(out_idx=[-1])
def radix_key(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), K: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                K[i] = T.cast(_key16(X[i]), "int32")
                # TVM's argument order, and the round trip back to the value
                X[i] = T.reinterpret("float32", T.reinterpret(X[i], "int32") ^ 0)
    return main


def test_radix_key_of_topk_selector(build, device):
    x = torch.randn(256) * 10
    k = build(radix_key, 256)(x.to(device)).cpu()
    bits = x.half().view(torch.int16).to(torch.int32) & 0xFFFF
    ref = torch.where(x.half() < 0, (~bits) & 0xFFFF, bits | 0x8000) >> 8
    assert torch.equal(k, ref)
    order = torch.argsort(x.half().float(), stable=True)
    assert (k[order][1:] >= k[order][:-1]).all(), "the key is monotone in the value"


def test_reinterpret_of_different_widths_is_an_error():
    with pytest.raises(TilecraftError, match=r"cannot reinterpret a float32 value as float16.*32 vs 16"):
        @T.prim_func
        def main(X: T.Tensor((16,), "float32"), Y: T.Tensor((16,), "float16")):
            with T.Kernel(1, threads=16) as bx:
                for i in T.Parallel(16):
                    Y[i] = T.reinterpret(X[i], "float16")
