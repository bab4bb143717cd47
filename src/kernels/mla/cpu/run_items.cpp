#include "kernels/mla/cpu/run_items.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "kernels/attention/cpu/split_merge.hpp"

namespace attnsel::kernel::mla::cpu {

namespace {

using kernel::cpu::LayerCtx;
using kernel::cpu::SplitGroup;
using kernel::cpu::WorkItem;

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
        kernel::cpu::merge_group(c, groups[g], memory.partials);
    }
  }
}

}  // namespace attnsel::kernel::mla::cpu
