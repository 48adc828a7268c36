// tilecraft/random.h — T.rng_init / T.rng_rand: a per-thread Philox4x32-10 counter-based generator
// with cuRAND's stream layout (curand_init(seed, subsequence, offset) then curand()), so that a
// kernel draws the numbers TileLang's (cuRAND-backed) kernels draw.  Key = the 64-bit seed;
// counter = (offset / 4 as the low 64 bits, subsequence as the high 64 bits); each 128-bit
// output block is consumed x, y, z, w before the counter advances.  Our own implementation of
// the published Philox algorithm (Salmon et al., SC'11): no cuRAND header is parsed.
#pragma once

#include "common.h"

#ifdef TC_RNG  // defined by generated code that draws random numbers
namespace tc {

struct Philox4x32 {
  uint32_t ctr[4], key[2], out[4];
  uint32_t pos;  // next output word (0..3)

  TC_DEVICE void block() {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
#pragma unroll
    for (int r = 0; r < 10; ++r) {
      if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
      const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
      const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
      c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
  }
  TC_DEVICE void advance(uint64_t n) {  // counter += n (128-bit)
    const uint64_t lo = ((uint64_t)ctr[1] << 32 | ctr[0]) + n;
    const uint32_t carry = lo < n ? 1u : 0u;
    ctr[0] = (uint32_t)lo; ctr[1] = (uint32_t)(lo >> 32);
    if (carry && ++ctr[2] == 0) ++ctr[3];
  }
  TC_DEVICE void init(uint64_t seed, uint64_t subsequence, uint64_t offset) {
    key[0] = (uint32_t)seed; key[1] = (uint32_t)(seed >> 32);
    ctr[0] = ctr[1] = 0; ctr[2] = (uint32_t)subsequence; ctr[3] = (uint32_t)(subsequence >> 32);
    pos = (uint32_t)(offset & 3);
    advance(offset >> 2);
    block();
  }
  TC_DEVICE uint32_t next() {
    const uint32_t r = out[pos];
    if (++pos == 4) { pos = 0; advance(1); block(); }
    return r;
  }
};
TC_DEVICE void rng_init(Philox4x32& g, uint64_t seed, uint64_t seq, uint64_t off) { g.init(seed, seq, off); }
TC_DEVICE uint32_t rng_rand(Philox4x32& g) { return g.next(); }

}  // namespace tc
#endif  // TC_RNG
