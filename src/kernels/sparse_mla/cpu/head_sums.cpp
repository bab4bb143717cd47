// head_sums.hpp, compiled once per Highway target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/sparse_mla/cpu/head_sums.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/sparse_mla/cpu/head_sums.hpp"

HWY_BEFORE_NAMESPACE();
namespace attnsel::kernel::sparse_mla::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void ReluWeightedHeadSums(const float* products, int rows, int heads, const float* weights, const float* scale,
                          float* out) {
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  const auto zero = hn::Zero(df);
  for (int i = 0; i < rows; ++i) {
    const float* p = products + static_cast<long>(i) * heads;
    auto acc = zero;
    for (int h = 0; h < heads; h += L)
      acc = hn::MulAdd(hn::Max(hn::LoadU(df, p + h), zero), hn::LoadU(df, weights + h), acc);
    out[i] = hn::GetLane(hn::SumOfLanes(df, acc)) * scale[i];
  }
}

}  // namespace attnsel::kernel::sparse_mla::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnsel::kernel::sparse_mla::cpu {

HWY_EXPORT(ReluWeightedHeadSums);

void relu_weighted_head_sums(const float* products, int rows, int heads, const float* weights, const float* scale,
                             float* out) {
  HWY_DYNAMIC_DISPATCH(ReluWeightedHeadSums)(products, rows, heads, weights, scale, out);
}

}  // namespace attnsel::kernel::sparse_mla::cpu
#endif
