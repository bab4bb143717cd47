// fp8_rows.hpp, compiled once per Highway target. An e4m3 byte placed in a half's bit
// layout reads as value / 256 (subnormals included, as the CPU attention kernel reads it);
// the 256 is folded into the scale, whose product with it is exact, so the fp32 product is
// the one of the format's rule; the rounding to bf16 is done on the bits (Highway 1.0's
// DemoteTo truncates).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/sparse_mla/cpu/fp8_rows.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstdint>

#include "hwy/highway.h"
#include "kernels/half.hpp"
#include "kernels/sparse_mla/cpu/fp8_rows.hpp"

HWY_BEFORE_NAMESPACE();
namespace attnsel::kernel::sparse_mla::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void E4m3ToBf16(const std::uint8_t* src, int n, float scale, std::uint16_t* dst) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<std::uint8_t, decltype(df)> d8;
  const hn::Rebind<std::uint16_t, decltype(df)> d16;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const hn::RebindToSigned<decltype(df)> di;
  const int L = static_cast<int>(hn::Lanes(df));
  const auto scaled = hn::Set(df, scale * 256.0f);
  const auto low7 = hn::Set(d16, 0x7F), sign = hn::Set(d16, 0x80);
  const auto round_bias = hn::Set(di, 0x7FFF), one = hn::Set(di, 1);
  int i = 0;
  for (; i + L <= n; i += L) {
    const auto b = hn::PromoteTo(d16, hn::LoadU(d8, src + i));
    const auto h = hn::Or(hn::ShiftLeft<7>(hn::And(b, low7)), hn::ShiftLeft<8>(hn::And(b, sign)));
    const auto x = hn::Mul(hn::PromoteTo(df, hn::BitCast(dh, h)), scaled);
    const auto bits = hn::BitCast(di, x);
    // Round to nearest even on the top 16 bits; the result's top half is the bf16 value.
    const auto rounded = hn::Add(bits, hn::Add(round_bias, hn::And(hn::ShiftRight<16>(bits), one)));
    const auto top = hn::BitCast(di, hn::ShiftRight<16>(hn::BitCast(hn::RebindToUnsigned<decltype(di)>(), rounded)));
    hn::StoreU(hn::DemoteTo(d16, top), d16, dst + i);
  }
  for (; i < n; ++i) {  // the same steps, one element
    const auto h = static_cast<std::uint16_t>(((src[i] & 0x7Fu) << 7) | ((src[i] & 0x80u) << 8));
    dst[i] = float_to_bf16(half_to_float(h) * (scale * 256.0f));
  }
}

}  // namespace attnsel::kernel::sparse_mla::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnsel::kernel::sparse_mla::cpu {

HWY_EXPORT(E4m3ToBf16);

void e4m3_to_bf16(const std::uint8_t* src, int n, float scale, std::uint16_t* dst) {
  HWY_DYNAMIC_DISPATCH(E4m3ToBf16)(src, n, scale, dst);
}

}  // namespace attnsel::kernel::sparse_mla::cpu
#endif
