"""Host-side packing of low-bit weights (`tilelang.quantize.utils`), for numpy arrays and torch tensors.

`general_compress(w, source_bits, storage_dtype)`: packs each run of 8 / source_bits values of the
last dimension into one byte, the first value in the least significant bits.

`interleave_weight(qweight, nbits, target_dtype)`: permutes the nbits-wide fields inside every 32-bit
word of packed weights into the order fast lop3 decoders read them in: with a stride of 16 bits
(float16 targets) or 8 bits (int8 targets) and G = 32 // stride groups, field o of the word moves to
bit (o % G) * stride + (o // G) * nbits.  So for 4-bit weights decoded to float16, fields 0..7 land
at bits 0, 16, 4, 20, 8, 24, 12, 28: every 16-bit half holds every other weight.  The extra
shuffles TileLang applies for 1-bit and for 2-bit-to-float16 weights are not provided (an error).
"""
from __future__ import annotations

import numpy as np


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def general_compress(lowprecision_weight, source_bits=4, storage_dtype=np.int8):
    w = np.asarray(lowprecision_weight)
    if w.dtype == np.float16:
        w = w.astype(np.int8)
    per = 8 // source_bits
    if w.shape[-1] % per:
        raise ValueError(f"general_compress: the last dimension ({w.shape[-1]}) must be a multiple of {per}")
    fields = (w.astype(np.int64) & ((1 << source_bits) - 1)).reshape(*w.shape[:-1], w.shape[-1] // per, per)
    packed = np.zeros(fields.shape[:-1], dtype=np.int64)
    for k in range(per):
        packed |= fields[..., k] << (source_bits * k)
    return packed.astype(np.uint8).view(np.int8).view(storage_dtype)


def interleave_weight(qweight, nbits=4, target_dtype="float16"):
    target = str(target_dtype).replace("torch.", "")
    if target not in ("float16", "int8"):
        raise ValueError(f"interleave_weight: target_dtype must be float16 or int8, got {target_dtype!r}")
    if (nbits, target) not in ((4, "float16"), (4, "int8"), (2, "int8"), (8, "int8")):
        raise NotImplementedError(f"interleave_weight: {nbits}-bit weights for {target} need TileLang's extra "
                                  f"shuffles, which tilecraft does not provide")
    torch_in = _is_torch(qweight)
    if torch_in:
        import torch
        device = qweight.device
        words = qweight.detach().cpu().contiguous().view(torch.int32).numpy().view(np.uint32)
    else:
        words = np.ascontiguousarray(qweight).view(np.uint32)
    stride = 8 if target == "int8" else 16
    groups = 32 // stride
    mask = np.uint32((1 << nbits) - 1)
    out = np.zeros_like(words)
    for o in range(32 // nbits):
        dest = (o % groups) * stride + (o // groups) * nbits
        out |= ((words >> np.uint32(nbits * o)) & mask) << np.uint32(dest)
    out = out.view(np.int8)
    if torch_in:
        return torch.from_numpy(out.copy()).to(device)
    return out
