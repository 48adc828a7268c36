"""`tilelang.quantize`: the packed-integer converters inside a kernel on the CPU target against a
numpy reference of the same bit manipulation (signed and unsigned 4-bit and 2-bit fields of int8 /
uint8 storage, with zeros), compiled for sm_80 and sm_90a too; `utils.interleave_weight` and
`utils.general_compress` against a field-by-field reference; `get_lop3_intrin_group` outside its
4-bit float16 decoders is a clear error.  The GPU run is tests/gpu/test_quantize_gpu.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError
from tilecraft.quantize import (_tir_packed_int_to_int_convert, _tir_packed_to_unsigned_convert,
                                _tir_packed_to_unsigned_convert_with_zeros, get_lop3_intrin_group)
from tilecraft.quantize.utils import general_compress, interleave_weight

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90a"}


def unpack(N, K, nbits, storage, signed, out_dtype="float16", zero=None):
    """Out (N, K) = field j % per of B[i, j // per], per = 8 // nbits fields a byte."""
    per = 8 // nbits
    stype = "".join(c for c in storage if not c.isdigit())
    if signed:
        conv = _tir_packed_int_to_int_convert(stype, 8)
    elif zero is None:
        conv = _tir_packed_to_unsigned_convert(stype, 8)
    else:
        convz = _tir_packed_to_unsigned_convert_with_zeros(stype, 8)

    @T.prim_func
    def main(B: T.Tensor((N, K // per), storage), Out: T.Tensor((N, K), out_dtype)):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(N, K):
                if zero is None:
                    Out[i, j] = conv(nbits, B[i, j // per], j % per, out_dtype)
                else:
                    Out[i, j] = convz(nbits, B[i, j // per], j % per, zero, out_dtype)
    return main


def reference(b: np.ndarray, nbits, signed, zero=None):
    per = 8 // nbits
    u = b.view(np.uint8).astype(np.int64)
    fields = np.stack([(u >> (nbits * k)) & ((1 << nbits) - 1) for k in range(per)], axis=-1)
    fields = fields.reshape(b.shape[0], -1)
    if signed:
        fields = np.where(fields >= (1 << (nbits - 1)), fields - (1 << nbits), fields)
    if zero is not None:
        fields = fields - zero
    return fields


CASES = [(4, "int8", True, None), (4, "uint8", False, None), (2, "int8", True, None),
         (4, "int8", False, None), (4, "uint8", False, 7)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_converters_on_the_cpu_target(case):
    nbits, storage, signed, zero = case
    N, K = 8, 64
    b = torch.randint(-128 if storage == "int8" else 0, 128 if storage == "int8" else 256,
                      (N, K * nbits // 8), dtype=getattr(torch, storage))
    k = tilelang.compile(unpack(N, K, nbits, storage, signed, zero=zero), out_idx=[1], target="cpu")
    out = k(b)
    ref = torch.from_numpy(reference(b.numpy(), nbits, signed, zero)).half()
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@pytest.mark.cuda_compile
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90a"])
def test_converters_compile_for_cuda(target):
    k = tilelang.compile(unpack(8, 64, 4, "int8", True), out_idx=[1], target=target)
    assert ">>" in k.get_kernel_source()


def test_interleave_weight_moves_each_field():
    rng = np.random.default_rng()
    for nbits, target in ((4, "float16"), (4, "int8"), (2, "int8")):
        q = rng.integers(-128, 128, size=(4, 16), dtype=np.int8)
        got = interleave_weight(q, nbits, target).view(np.uint32)
        words = q.view(np.uint32)
        stride = 8 if target == "int8" else 16
        groups = 32 // stride
        for r in range(words.shape[0]):
            for c in range(words.shape[1]):
                w, g = int(words[r, c]), int(got[r, c])
                for o in range(32 // nbits):
                    dest = (o % groups) * stride + (o // groups) * nbits
                    assert (g >> dest) & ((1 << nbits) - 1) == (w >> (nbits * o)) & ((1 << nbits) - 1)
        t = interleave_weight(torch.from_numpy(q), nbits, target)  # torch in, torch out
        assert isinstance(t, torch.Tensor) and np.array_equal(t.numpy(), got.view(np.int8))
    with pytest.raises(NotImplementedError):
        interleave_weight(q, 1, "int8")


def test_general_compress_round_trips():
    w = np.random.default_rng().integers(0, 16, size=(3, 32)).astype(np.int8)
    packed = general_compress(w, 4)
    assert packed.shape == (3, 16)
    assert np.array_equal(reference(packed, 4, signed=False), w)


def test_lop3_sources_outside_what_is_there_are_a_clear_error():
    # the 4-bit float16 decoders themselves: tests/language/test_lowlevel.py
    with pytest.raises(TilecraftError, match="tilecraft has decoders for 4-bit"):
        get_lop3_intrin_group(out_dtype="float16", source_format="uint", source_bit=4, storage_dtype="int8",
                              with_scaling=True)


def test_wrong_storage_type_is_an_error():
    with pytest.raises(TilecraftError, match="must be uint8"):
        tilelang.compile(_wrong_storage(), target="cpu")


def _wrong_storage():
    conv = _tir_packed_to_unsigned_convert("uint", 8)

    @T.prim_func
    def main(B: T.Tensor((4, 8), "int8"), Out: T.Tensor((4, 16), "float16")):
        with T.Kernel(1, threads=32) as bx:
            for i, j in T.Parallel(4, 16):
                Out[i, j] = conv(4, B[i, j // 2], j % 2, "float16")
    return main
