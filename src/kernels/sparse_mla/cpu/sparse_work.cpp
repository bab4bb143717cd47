#include "kernels/sparse_mla/cpu/sparse_work.hpp"

#include <algorithm>
#include <cmath>

namespace attnsel::kernel::sparse_mla::cpu {

namespace {

using kernel::cpu::kMaxRows;
using kernel::cpu::kTileKeys;
using kernel::cpu::SplitGroup;
using kernel::cpu::WorkItem;

// Split until every core has this many items (the CPU MLA decode's rule).
constexpr int kItemsPerCore = 4;

double item_cost(std::int64_t keys, int rows) { return static_cast<double>(keys) * (rows + 8) + 64.0 * rows; }

}  // namespace

SparseWork plan_sparse_work(const std::vector<std::int64_t>& keys, int topk, int num_heads,
                            const SparseSplitOptions& options) {
  kernel::cpu::WorkPlan plan;
  const int head_groups = (num_heads + kMaxRows - 1) / kMaxRows;
  const int heads_per_item = (num_heads + head_groups - 1) / head_groups;
  const int T = static_cast<int>(keys.size());
  double total = 0.0;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < num_heads; h += heads_per_item) {
      WorkItem it;
      it.seq = t;
      it.head_begin = h;
      it.head_end = std::min(num_heads, h + heads_per_item);
      it.token_begin = t;
      it.token_end = t + 1;
      it.key_begin = 0;
      it.key_end = topk;
      it.cost = item_cost(keys[static_cast<std::size_t>(t)], it.num_rows());
      total += it.cost;
      plan.items.push_back(it);
    }

  const int target = kItemsPerCore * options.cores;
  const bool balance = !options.batch_invariant && options.cores > 1 &&
                       static_cast<int>(plan.items.size()) < target && total > 0.0;
  std::vector<WorkItem> out;
  for (const WorkItem& it : plan.items) {
    const std::int64_t expected = keys[static_cast<std::size_t>(it.seq)];
    const std::int64_t tiles = (expected + kTileKeys - 1) / kTileKeys;
    std::int64_t parts = 1;
    if (balance) {
      parts = static_cast<std::int64_t>(std::ceil(it.cost / (total / target)));
      parts = std::min({parts, expected / std::max(options.min_split_keys, 1), tiles});
    }
    if (parts < 2) {
      out.push_back(it);
      continue;
    }
    // Split on tile boundaries of the expected entries; the last part keeps the rest of the row.
    plan.splits.push_back(SplitGroup{it, plan.num_partial_slots, static_cast<int>(parts)});
    for (std::int64_t i = 0; i < parts; ++i) {
      WorkItem part = it;
      part.key_begin = tiles * i / parts * kTileKeys;
      part.key_end = i + 1 == parts ? topk : tiles * (i + 1) / parts * kTileKeys;
      part.partial = plan.num_partial_slots++;
      part.cost = item_cost(std::min<std::int64_t>(expected, part.key_end) - part.key_begin, it.num_rows());
      out.push_back(part);
    }
  }
  // Units: a token's items over one key range (its groups of heads), the largest first.
  std::stable_sort(out.begin(), out.end(), [](const WorkItem& a, const WorkItem& b) {
    return a.seq != b.seq ? a.seq < b.seq : a.key_begin < b.key_begin;
  });
  std::vector<std::vector<WorkItem>> units;
  for (const WorkItem& it : out) {
    if (units.empty() || units.back().front().seq != it.seq || units.back().front().key_begin != it.key_begin)
      units.emplace_back();
    units.back().push_back(it);
  }
  auto cost = [](const std::vector<WorkItem>& u) {
    double c = 0.0;
    for (const WorkItem& it : u) c += it.cost;
    return c;
  };
  std::stable_sort(units.begin(), units.end(), [&](const auto& a, const auto& b) { return cost(a) > cost(b); });
  SparseWork work;
  plan.items.clear();
  work.unit_starts.push_back(0);
  for (const auto& u : units) {
    plan.items.insert(plan.items.end(), u.begin(), u.end());
    work.unit_starts.push_back(static_cast<int>(plan.items.size()));
  }
  work.plan = std::move(plan);
  return work;
}

}  // namespace attnsel::kernel::sparse_mla::cpu
