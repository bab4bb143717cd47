// Scalar bf16 / fp16 <-> float conversions (round to nearest even), portable and exact.
// Used by the reference, the cache writers and the tests; SIMD kernels convert in
// registers and must agree with these bit for bit.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace attnsel::kernel {

inline float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t man = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

inline std::uint16_t float_to_half(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) return sign | (x > 0x7F800000u ? 0x7E00u : 0x7C00u);
  if (x >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds to infinity
  if (x < 0x38800000u) {                        // below 2^-14: a subnormal half (units of 2^-24)
    const float q = std::nearbyint(std::ldexp(std::bit_cast<float>(x), 24));
    return sign | static_cast<std::uint16_t>(q);
  }
  const std::uint32_t rounded = x + 0x0FFFu + ((x >> 13) & 1u);
  return sign | static_cast<std::uint16_t>((rounded - 0x38000000u) >> 13);
}

}  // namespace attnsel::kernel
