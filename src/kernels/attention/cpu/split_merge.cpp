#include "kernels/attention/cpu/split_merge.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/element_access.hpp"

namespace attnsel::kernel::cpu {

void merge_partials(const LayerCtx& c, const WorkItem& rows, int kv_head, float* first, int count) {
  const int D = c.value_size();  // at most kMaxHeadSize
  float acc[kMaxHeadSize];
  const std::size_t slot_floats = partial_slot_floats(D);
  auto part = [&](int i) { return partial_for(first + static_cast<std::size_t>(i) * slot_floats, D, kv_head); };
  const int heads = rows.head_end - rows.head_begin;
  for (int r = 0; r < rows.num_rows(); ++r) {
    const int token = rows.token_begin + r / heads;
    const int head = rows.head_begin + r % heads;
    float M = -HUGE_VALF;
    for (int i = 0; i < count; ++i)
      if (part(i).l[r] > 0.0f) M = std::max(M, part(i).m[r]);
    if (c.sinks) M = std::max(M, c.sinks[head]);
    std::fill(acc, acc + D, 0.0f);
    float denom = 0.0f;
    for (int i = 0; i < count; ++i) {
      const PartialView pv = part(i);
      if (pv.l[r] <= 0.0f) continue;
      const float w = std::exp(pv.m[r] - M);
      denom += pv.l[r] * w;
      const float* o = pv.o + static_cast<std::size_t>(r) * static_cast<std::size_t>(D);
      for (int d = 0; d < D; ++d) acc[d] += o[d] * w;
    }
    if (c.sinks) denom += std::exp(c.sinks[head] - M);
    const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
    const std::int64_t base = token * c.o_stride[0] + head * c.o_stride[1];
    for (int d = 0; d < D; ++d) store_activation(c.out_type, c.out, base + d, acc[d] * inv);
    if (c.lse) c.lse[token * c.lse_stride + head] = denom > 0.0f ? M + std::log(denom) : -HUGE_VALF;
  }
}

void merge_group(const LayerCtx& c, const SplitGroup& g, float* partials) {
  const std::size_t slot_floats = partial_slot_floats(c.value_size());
  for (int j = 0; j < g.rows.kv_heads; ++j)
    merge_partials(c, g.rows.head(j, c.group), j, partials + static_cast<std::size_t>(g.first_slot) * slot_floats,
                   g.count);
}

}  // namespace attnsel::kernel::cpu
