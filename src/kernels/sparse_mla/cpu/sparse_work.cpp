#include "kernels/sparse_mla/cpu/sparse_work.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/mla/cpu/decode_work.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

namespace {

using kernel::cpu::WorkItem;
using mla::cpu::item_cost;

}  // namespace

SparseWork plan_sparse_work(const std::vector<std::int64_t>& keys, int topk, int num_heads,
                            const SparseSplitOptions& options) {
  kernel::cpu::WorkPlan plan;
  const int heads = mla::cpu::heads_per_item(num_heads);
  const int T = static_cast<int>(keys.size());
  double total = 0.0;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < num_heads; h += heads) {
      WorkItem it;
      it.seq = t;
      it.head_begin = h;
      it.head_end = std::min(num_heads, h + heads);
      it.token_begin = t;
      it.token_end = t + 1;
      it.key_begin = 0;
      it.key_end = topk;
      it.cost = item_cost(keys[static_cast<std::size_t>(t)], it.num_rows());
      total += it.cost;
      plan.items.push_back(it);
    }

  const int target = mla::cpu::kItemsPerCore * options.cores;
  const bool balance = !options.batch_invariant && options.cores > 1 &&
                       static_cast<int>(plan.items.size()) < target && total > 0.0;
  std::vector<WorkItem> out;
  for (const WorkItem& it : plan.items) {
    const std::int64_t expected = keys[static_cast<std::size_t>(it.seq)];
    std::int64_t parts = 1;
    if (balance) {
      const std::int64_t tiles = (expected + kernel::cpu::kTileKeys - 1) / kernel::cpu::kTileKeys;
      parts = static_cast<std::int64_t>(std::ceil(it.cost / (total / target)));
      parts = std::min({parts, expected / std::max(options.min_split_keys, 1), tiles});
    }
    // The last part keeps the rest of the row (past the expected entries).
    mla::cpu::append_split(plan, it, expected, parts, out);
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
