// The byte tables of the CPU kernels' fp8 -> bfloat16 widening in AVX-512 registers
// (attention_body-inl.h describes the method), built once per format. No include guard:
// included inside each AVX-512 region's namespace, after <immintrin.h>, kernels/fp8.hpp and
// <bit>.

struct Fp8Bf16 {
  __m512i lo0, lo1, hi0, hi1;  // low / high byte of the bfloat16 of magnitudes 0-63, 64-127
  __m512i perm_k;              // input order for words in natural order (K rows)
  __m512i perm_v;              // input order for (key, key + 1) dword pairs in natural order
  __m512i sign;                // 0x80 in every byte
};

template <ScalarType K>
HWY_INLINE const Fp8Bf16& Fp8Bf16Tables() {
  static const Fp8Bf16 tables = [] {
    HWY_ALIGN std::uint8_t lo[128], hi[128], pk[64], pv[64];
    const ScalarType f = K == ScalarType::fp8_e4m3 ? ScalarType::fp8_e4m3 : ScalarType::fp8_e5m2;
    for (int b = 0; b < 128; ++b) {
      const float v = fp8_to_float(static_cast<std::uint8_t>(b), f) / (K == ScalarType::fp8_e4m3 ? 256.0f : 1.0f);
      const std::uint16_t bits = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v) >> 16);  // exact
      lo[b] = static_cast<std::uint8_t>(bits & 0xFF);
      hi[b] = static_cast<std::uint8_t>(bits >> 8);
    }
    // unpack{lo,hi}_epi8 read bytes 0-7 / 8-15 of each 128-bit lane L: word w of lane L of
    // the first result is input byte 16L + w, of the second 16L + 8 + w.
    for (int L = 0; L < 4; ++L)
      for (int w = 0; w < 8; ++w) {
        pk[16 * L + w] = static_cast<std::uint8_t>(8 * L + w);            // words 0-31
        pk[16 * L + 8 + w] = static_cast<std::uint8_t>(32 + 8 * L + w);   // words 32-63
      }
    // Then unpack{lo,hi}_epi16 of two keys' words: dword i of lane L is word 4q + i of lane L,
    // q = 0, 1 (first words vector) and 2, 3 (second); it must hold element 16q + 4L + i.
    for (int L = 0; L < 4; ++L)
      for (int q = 0; q < 4; ++q)
        for (int i = 0; i < 4; ++i) pv[16 * L + 4 * q + i] = static_cast<std::uint8_t>(16 * q + 4 * L + i);
    Fp8Bf16 t;
    t.lo0 = _mm512_load_si512(lo);
    t.lo1 = _mm512_load_si512(lo + 64);
    t.hi0 = _mm512_load_si512(hi);
    t.hi1 = _mm512_load_si512(hi + 64);
    t.perm_k = _mm512_load_si512(pk);
    t.perm_v = _mm512_load_si512(pv);
    t.sign = _mm512_set1_epi8(static_cast<char>(0x80));
    return t;
  }();
  return tables;
}
