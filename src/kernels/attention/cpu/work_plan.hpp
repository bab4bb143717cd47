// Splits a batch into work items for the CPU kernels: per sequence and KV head, query rows
// (tokens × the heads sharing that KV head) in groups of at most kMaxRows, each with the
// key range its rows can see; when there are too few items to keep every thread busy, the
// largest are split along the keys (split-KV), to be merged by log-sum-exp.
#pragma once

#include <vector>

#include "attnsel/kernel.hpp"
#include "kernels/attention/cpu/work.hpp"
#include "kernels/attention/semantics.hpp"

namespace attnsel::kernel::cpu {

/// One split-KV group: `count` consecutive partial slots from `first_slot`, all for the
/// rows of `rows` (an item whose key range is the union of the splits').
struct SplitGroup {
  WorkItem rows;
  int first_slot = 0;
  int count = 0;
};

struct WorkPlan {
  /// Grouped by the K/V they read (sequence, KV head), groups by decreasing total cost,
  /// items within a group by decreasing cost.
  std::vector<WorkItem> items;
  std::vector<SplitGroup> splits;
  int num_partial_slots = 0;
};

/// `threads`: workers that will run the plan; `min_split_keys`: the fewest keys per split.
WorkPlan plan_work(const LayerParams& p, const AttentionMetadata& md, const MaskRule& mask, int threads,
                   int min_split_keys = 512);

}  // namespace attnsel::kernel::cpu
