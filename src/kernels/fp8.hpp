// Scalar fp8 <-> float conversions: OCP E4M3FN (bias 7, no infinities, max 448, 0x7F/0xFF
// are NaN) and E5M2 (bias 15, IEEE-like, max 57344). Encoding rounds to nearest even and
// saturates to the largest finite value, as vLLM's cache writers do (SATFINITE).
// `f` is ScalarType::fp8_e4m3 or fp8_e5m2. Header-only so kernels (CPU and CUDA host code) can share it.
#pragma once

#include <cmath>
#include <cstdint>

#include "attnsel/scalar_type.hpp"

namespace attnsel::kernel {

namespace fp8_detail {
struct Format {
  int man_bits;
  int bias;
  int max_biased_exp;  // largest exponent field of a finite value
  int max_man;         // largest mantissa at max_biased_exp
};
constexpr Format kE4M3{3, 7, 15, 6};
constexpr Format kE5M2{2, 15, 30, 3};
/// fp8_e4m3 → E4M3FN; any other type is read as fp8_e5m2 (callers pass one of the two).
constexpr const Format& format(ScalarType f) { return f == ScalarType::fp8_e4m3 ? kE4M3 : kE5M2; }
}  // namespace fp8_detail

inline float fp8_to_float(std::uint8_t b, ScalarType f) {
  const auto& F = fp8_detail::format(f);
  const bool neg = (b & 0x80u) != 0;
  const int exp = (b & 0x7F) >> F.man_bits;
  const int man = b & ((1 << F.man_bits) - 1);
  float v;
  if (f == ScalarType::fp8_e4m3 && exp == 15 && man == 7) {
    v = NAN;
  } else if (f == ScalarType::fp8_e5m2 && exp == 31) {
    v = man == 0 ? INFINITY : NAN;
  } else if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), 1 - F.bias - F.man_bits);
  } else {
    v = std::ldexp(static_cast<float>((1 << F.man_bits) + man), exp - F.bias - F.man_bits);
  }
  return neg ? -v : v;
}

inline std::uint8_t float_to_fp8(float x, ScalarType f) {
  const auto& F = fp8_detail::format(f);
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | 0x7F;  // the NaN encoding of both formats
  const std::uint8_t max_finite = static_cast<std::uint8_t>((F.max_biased_exp << F.man_bits) | F.max_man);
  const float a = std::fabs(x);
  if (std::isinf(a)) return sign | max_finite;
  const int min_normal_exp = 1 - F.bias;
  if (a < std::ldexp(1.0f, min_normal_exp)) {  // subnormal: units of 2^(min_normal_exp - man_bits)
    const float q = std::nearbyint(std::ldexp(a, F.man_bits - min_normal_exp));
    return sign | static_cast<std::uint8_t>(q);  // q == 2^man_bits is the smallest normal: same bits
  }
  int e2 = 0;
  const float fr = std::frexp(a, &e2);  // a = fr * 2^e2, fr in [0.5, 1)
  int e = e2 - 1;
  int man = static_cast<int>(std::nearbyint((std::ldexp(fr, 1) - 1.0f) * static_cast<float>(1 << F.man_bits)));
  if (man == (1 << F.man_bits)) {
    man = 0;
    ++e;
  }
  const int biased = e + F.bias;
  if (biased > F.max_biased_exp || (biased == F.max_biased_exp && man > F.max_man)) return sign | max_finite;
  return sign | static_cast<std::uint8_t>((biased << F.man_bits) | man);
}

}  // namespace attnsel::kernel
