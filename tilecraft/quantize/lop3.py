"""Fast decoders of packed 4-bit weights into float16, as source text a kernel pastes in
(`T.import_source`) and calls (`T.call_extern(name, T.access_ptr(packed, "r"), T.access_ptr(out, "w"))`):
TileLang's `tilelang.quantize.get_lop3_intrin_group`.

The weights must be interleaved first (`tilelang.quantize.utils.interleave_weight(q, 4, "float16")`):
in each 32-bit word the even elements sit in the low half-word and the odd ones in the high
half-word, so one `lop3` (mask a nibble of each half, or in the exponent of 1024.0) makes two
float16 values 1024 + e at once, and one `sub.f16x2` removes the 1024 (1032 for the signed
format, whose fields hold e + 8).  Each call decodes `N` elements (a multiple of 8) from N / 2 bytes.

The source also compiles for the CPU target (plain C++ in place of the PTX), so a program that calls
it runs there too.
"""
from __future__ import annotations

from ..errors import TilecraftError

_SOURCE = r"""
// tilecraft: 4-bit -> float16 decoders for weights interleaved by interleave_weight(q, 4, "float16")
template <bool Signed, typename In, typename Out>
__device__ __forceinline__ void tc_decode_i4_to_f16(const In* packed, Out* out, const int n) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(packed);
  for (int w = 0; w < n / 8; ++w) {
    unsigned int word = (unsigned int)bytes[4 * w] | ((unsigned int)bytes[4 * w + 1] << 8) |
                        ((unsigned int)bytes[4 * w + 2] << 16) | ((unsigned int)bytes[4 * w + 3] << 24);
#ifdef __CUDA_ARCH__
    const unsigned int bias = Signed ? 0x64086408u : 0x64006400u;  // 1032.0 or 1024.0, twice
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      unsigned int v, h;
      // (word >> 4i) & 0x000f000f | 0x64006400: lut (a & b) | c = 0xea
      asm volatile("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(v) : "r"(word >> (4 * i)), "r"(0x000f000fu), "r"(0x64006400u));
      asm volatile("sub.f16x2 %0, %1, %2;\n" : "=r"(h) : "r"(v), "r"(bias));
      // element by element: `out` need not be 4-byte aligned
      out[8 * w + 2 * i] = __ushort_as_half((unsigned short)(h & 0xffffu));
      out[8 * w + 2 * i + 1] = __ushort_as_half((unsigned short)(h >> 16));
    }
#else
    for (int i = 0; i < 4; ++i) {
      const int lo = (int)((word >> (4 * i)) & 0xfu), hi = (int)((word >> (16 + 4 * i)) & 0xfu);
      out[8 * w + 2 * i] = Out((float)(Signed ? lo - 8 : lo));
      out[8 * w + 2 * i + 1] = Out((float)(Signed ? hi - 8 : hi));
    }
#endif
  }
}

template <typename In, typename Out>
__device__ __forceinline__ void decode_i4u_to_f16(const In* packed, Out* out, const int n = 8) {
  tc_decode_i4_to_f16<false>(packed, out, n);
}

template <typename In, typename Out>
__device__ __forceinline__ void decode_i4s_to_f16(const In* packed, Out* out, const int n = 8) {
  tc_decode_i4_to_f16<true>(packed, out, n);
}
"""

FORMATS = {"uint": "decode_i4u_to_f16", "int": "decode_i4s_to_f16"}


def get_lop3_intrin_group(out_dtype="float16", source_format="uint", source_bit=4, storage_dtype="int8",
                          with_scaling=False, with_zeros=False, zeros_mode="original", storage_scope="local"):
    """{"func_name", "c_source"} of the decoder for these settings (4-bit uint/int fields to float16,
    no scaling or zeros); other settings raise an error that names what is there."""
    out, storage = str(out_dtype).replace("torch.", ""), str(storage_dtype).replace("torch.", "")
    have = "4-bit 'uint' or 'int' fields, stored in int8/uint8, to float16, without scaling or zeros"
    if out != "float16" or source_bit != 4 or source_format not in FORMATS or storage not in ("int8", "uint8") \
            or with_scaling or with_zeros:
        raise TilecraftError(
            f"tilelang.quantize.get_lop3_intrin_group(out_dtype={out_dtype!r}, source_format={source_format!r}, "
            f"source_bit={source_bit}, storage_dtype={storage_dtype!r}, with_scaling={with_scaling}, "
            f"with_zeros={with_zeros}): tilecraft has decoders for {have}",
            hint="decode other formats inside the kernel with tilelang.quantize._tir_packed_int_to_int_convert / "
                 "_tir_packed_to_unsigned_convert (and multiply by the scale there)")
    return {"func_name": FORMATS[source_format], "c_source": _SOURCE}
