#include "kernels/mla/cpu/run_items.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "kernels/element_access.hpp"

namespace attnsel::kernel::mla::cpu {

namespace {

using kernel::cpu::LayerCtx;
using kernel::cpu::PartialView;
using kernel::cpu::SplitGroup;
using kernel::cpu::WorkItem;

void merge_group(const LayerCtx& c, const SplitGroup& g, float* partials) {
  const std::size_t slot_floats = kernel::cpu::partial_slot_floats(c.value_size());
  for (int j = 0; j < g.rows.kv_heads; ++j)
    merge_partials(c, g.rows.head(j, c.group), j, partials + static_cast<std::size_t>(g.first_slot) * slot_floats,
                   g.count);
}

}  // namespace

void bind_rows(LayerCtx& c, const TensorView& q, const TensorView& out, float* lse, std::int64_t lse_stride) {
  c.q_type = q.dtype;
  c.query = static_cast<const std::uint8_t*>(q.data);
  c.q_stride[0] = q.stride[0];
  c.q_stride[1] = q.stride[1];
  c.out_type = out.dtype;
  c.out = static_cast<std::uint8_t*>(out.data);
  c.o_stride[0] = out.stride[0];
  c.o_stride[1] = out.stride[1];
  c.lse = lse;
  c.lse_stride = lse_stride;
}

void merge_partials(const LayerCtx& c, const WorkItem& rows, int kv_head, float* first, int count) {
  const int D = c.value_size();  // at most kMaxHeadSize
  float acc[kernel::cpu::kMaxHeadSize];
  const std::size_t slot_floats = kernel::cpu::partial_slot_floats(D);
  auto part = [&](int i) {
    return kernel::cpu::partial_for(first + static_cast<std::size_t>(i) * slot_floats, D, kv_head);
  };
  const int heads = rows.head_end - rows.head_begin;
  for (int r = 0; r < rows.num_rows(); ++r) {
    const int token = rows.token_begin + r / heads;
    const int head = rows.head_begin + r % heads;
    float M = -HUGE_VALF;
    for (int i = 0; i < count; ++i)
      if (part(i).l[r] > 0.0f) M = std::max(M, part(i).m[r]);
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
    const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
    const std::int64_t base = token * c.o_stride[0] + head * c.o_stride[1];
    for (int d = 0; d < D; ++d) store_activation(c.out_type, c.out, base + d, acc[d] * inv);
    if (c.lse) c.lse[token * c.lse_stride + head] = denom > 0.0f ? M + std::log(denom) : -HUGE_VALF;
  }
}

void run_items(const LayerCtx& c, const kernel::cpu::WorkPlan& work, const ItemMemory& memory, ItemKernel compute) {
  const auto n_items = static_cast<std::int64_t>(work.items.size());
  if (n_items == 0) return;
  const std::size_t slot_floats = kernel::cpu::partial_slot_floats(c.value_size());
  const int team = std::max(1, std::min(memory.threads, omp_get_max_threads()));
  const WorkItem* items = work.items.data();
  const std::vector<SplitGroup>& groups = work.splits;
  for (std::size_t g = 0; g < groups.size(); ++g)
    memory.parts_left[g].store(groups[g].count, std::memory_order_relaxed);
  // One parallel region: the thread that finishes a group's last split merges the group, so
  // that a call waits for its team once (on a shared machine every wait can cost a time slice).
#pragma omp parallel num_threads(team) if (team > 1 && n_items > 1)
  {
    void* scratch = memory.scratch + static_cast<std::size_t>(omp_get_thread_num()) * memory.scratch_stride;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < n_items; ++i) {
      const WorkItem& it = items[i];
      float* slot = it.partial >= 0 ? memory.partials + static_cast<std::size_t>(it.partial) * slot_floats : nullptr;
      compute(c, it, slot, scratch);
      if (it.partial < 0) continue;
      // Groups own consecutive slots in group order.
      const auto g = static_cast<std::size_t>(
          std::upper_bound(groups.begin(), groups.end(), it.partial,
                           [](int slot_id, const SplitGroup& group) { return slot_id < group.first_slot; }) -
          groups.begin() - 1);
      if (memory.parts_left[g].fetch_sub(1, std::memory_order_acq_rel) == 1)
        merge_group(c, groups[g], memory.partials);
    }
  }
}

}  // namespace attnsel::kernel::mla::cpu
