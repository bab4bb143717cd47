// Scalar conversions: fp8 (E4M3FN, E5M2), bf16 and fp16, checked against known encodings.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/fp8.hpp"
#include "kernels/half.hpp"

namespace attnsel::kernel {
namespace {

TEST(Fp8, E4M3KnownValues) {
  EXPECT_EQ(fp8_to_float(0x00, ScalarType::fp8_e4m3), 0.0f);
  EXPECT_EQ(fp8_to_float(0x38, ScalarType::fp8_e4m3), 1.0f);
  EXPECT_EQ(fp8_to_float(0x7E, ScalarType::fp8_e4m3), 448.0f);
  EXPECT_EQ(fp8_to_float(0xFE, ScalarType::fp8_e4m3), -448.0f);
  EXPECT_EQ(fp8_to_float(0x01, ScalarType::fp8_e4m3), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_to_float(0x08, ScalarType::fp8_e4m3), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_TRUE(std::isnan(fp8_to_float(0x7F, ScalarType::fp8_e4m3)));
  EXPECT_EQ(float_to_fp8(1.0f, ScalarType::fp8_e4m3), 0x38);
  EXPECT_EQ(float_to_fp8(1000.0f, ScalarType::fp8_e4m3), 0x7E);  // saturates
  EXPECT_EQ(float_to_fp8(-INFINITY, ScalarType::fp8_e4m3), 0xFE);
  EXPECT_EQ(float_to_fp8(NAN, ScalarType::fp8_e4m3) & 0x7F, 0x7F);
  // 1 + 1/16 is halfway between 1 and 1.125: ties to even (1.0).
  EXPECT_EQ(float_to_fp8(1.0625f, ScalarType::fp8_e4m3), 0x38);
  EXPECT_EQ(float_to_fp8(1.1875f, ScalarType::fp8_e4m3), 0x3A);  // halfway 1.125/1.25 -> 1.25 (even)
}

TEST(Fp8, E5M2KnownValues) {
  EXPECT_EQ(fp8_to_float(0x3C, ScalarType::fp8_e5m2), 1.0f);
  EXPECT_EQ(fp8_to_float(0x7B, ScalarType::fp8_e5m2), 57344.0f);
  EXPECT_EQ(fp8_to_float(0x01, ScalarType::fp8_e5m2), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::isinf(fp8_to_float(0x7C, ScalarType::fp8_e5m2)));
  EXPECT_EQ(float_to_fp8(1e6f, ScalarType::fp8_e5m2), 0x7B);
  EXPECT_EQ(float_to_fp8(-1.0f, ScalarType::fp8_e5m2), 0xBC);
}

TEST(Fp8, EveryFiniteCodeRoundTrips) {
  for (auto f : {ScalarType::fp8_e4m3, ScalarType::fp8_e5m2}) {
    for (int b = 0; b < 256; ++b) {
      const float x = fp8_to_float(static_cast<std::uint8_t>(b), f);
      if (!std::isfinite(x)) continue;
      const std::uint8_t back = float_to_fp8(x, f);
      if (x == 0.0f) {
        EXPECT_EQ(back & 0x7F, 0) << b;
      } else {
        EXPECT_EQ(back, b) << "format " << static_cast<int>(f) << " code " << b;
      }
    }
  }
}

TEST(Fp8, RoundsToNearest) {
  // For every adjacent pair of e4m3 codes, a value just below the midpoint rounds down.
  for (int b = 0; b < 0x7E; ++b) {
    const float lo = fp8_to_float(static_cast<std::uint8_t>(b), ScalarType::fp8_e4m3);
    const float hi = fp8_to_float(static_cast<std::uint8_t>(b + 1), ScalarType::fp8_e4m3);
    const float mid = 0.5f * (lo + hi);
    EXPECT_EQ(float_to_fp8(std::nextafter(mid, lo), ScalarType::fp8_e4m3), b);
    EXPECT_EQ(float_to_fp8(std::nextafter(mid, hi), ScalarType::fp8_e4m3), b + 1);
  }
}

TEST(Half, KnownValuesAndRounding) {
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // the midpoint to 65536 rounds to infinity
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie to even
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  for (int h = 0; h < 0x7C00; ++h) EXPECT_EQ(float_to_half(half_to_float(static_cast<std::uint16_t>(h))), h);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
}

TEST(BFloat16, KnownValuesAndRounding) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie to even
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie to even (up)
  EXPECT_EQ(bf16_to_float(0xC000), -2.0f);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

}  // namespace
}  // namespace attnsel::kernel
