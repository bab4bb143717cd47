#include "kernels/mla/cpu/decode_work.hpp"

#include <algorithm>
#include <cmath>

namespace attnsel::kernel::mla::cpu {

namespace {

using kernel::cpu::kMaxRows;
using kernel::cpu::kTileKeys;
using kernel::cpu::SplitGroup;
using kernel::cpu::WorkItem;

// The fewest keys a split reads (its partial output and merge cost about as much as 64 keys).
constexpr std::int64_t kMinSplitKeys = 256;
// Batch-invariant plans split a request every this many keys, whatever the batch.
constexpr std::int64_t kInvariantSplitKeys = 4096;

}  // namespace

double item_cost(std::int64_t keys, int rows) { return static_cast<double>(keys) * (rows + 8) + 64.0 * rows; }

int heads_per_item(int num_heads) {
  const int head_groups = (num_heads + kMaxRows - 1) / kMaxRows;
  return (num_heads + head_groups - 1) / head_groups;
}

void append_split(kernel::cpu::WorkPlan& plan, const WorkItem& it, std::int64_t keys_read, std::int64_t parts,
                  std::vector<WorkItem>& out) {
  if (parts < 2) {
    out.push_back(it);
    return;
  }
  const std::int64_t tiles = (keys_read + kTileKeys - 1) / kTileKeys;
  plan.splits.push_back(SplitGroup{it, plan.num_partial_slots, static_cast<int>(parts)});
  for (std::int64_t i = 0; i < parts; ++i) {
    WorkItem part = it;
    part.key_begin = it.key_begin + tiles * i / parts * kTileKeys;
    part.key_end = i + 1 == parts ? it.key_end : it.key_begin + tiles * (i + 1) / parts * kTileKeys;
    part.partial = plan.num_partial_slots++;
    part.cost = item_cost(std::min(it.key_begin + keys_read, part.key_end) - part.key_begin, it.num_rows());
    out.push_back(part);
  }
}

kernel::cpu::WorkPlan plan_decode_work(const MlaBatch& batch, int num_heads, const DecodeSplitOptions& options) {
  kernel::cpu::WorkPlan plan;
  // Heads per item: all of them up to kMaxRows, else even groups; tokens per item: as many as fit.
  const int heads = heads_per_item(num_heads);
  const int tokens_per_item = std::max(1, kMaxRows / heads);
  for (int s = 0; s < batch.split.num_decodes; ++s) {
    const int t0 = batch.query_start_loc[static_cast<std::size_t>(s)];
    const int s_q = batch.query_len(s);
    const std::int64_t L = batch.seq_lens[static_cast<std::size_t>(s)];
    for (int h = 0; h < num_heads; h += heads)
      for (int j = 0; j < s_q; j += tokens_per_item) {
        WorkItem it;
        it.seq = s;
        it.head_begin = h;
        it.head_end = std::min(num_heads, h + heads);
        it.token_begin = t0 + j;
        it.token_end = t0 + std::min(s_q, j + tokens_per_item);
        it.pos_begin = L - s_q + j;
        it.key_begin = 0;
        it.key_end = L == 0 ? 0 : L - s_q + (it.token_end - t0);  // the last token's keys
        it.cost = item_cost(it.key_end - it.key_begin, it.num_rows());
        plan.items.push_back(it);
      }
  }

  double total = 0.0;
  for (const WorkItem& it : plan.items) total += it.cost;
  const int target_items = kItemsPerCore * options.cores;
  const bool balance = options.cores > 1 && static_cast<int>(plan.items.size()) < target_items && total > 0.0;
  std::vector<WorkItem> out;
  for (const WorkItem& it : plan.items) {
    const std::int64_t keys = it.key_end - it.key_begin;
    const std::int64_t tiles = (keys + kTileKeys - 1) / kTileKeys;
    std::int64_t parts = 1;
    if (options.forced_splits > 0) {
      parts = options.forced_splits;
    } else if (options.batch_invariant) {
      parts = std::min<std::int64_t>((keys + kInvariantSplitKeys - 1) / kInvariantSplitKeys, target_items);
    } else if (balance) {
      parts = static_cast<std::int64_t>(std::ceil(it.cost / (total / target_items)));
      parts = std::min(parts, keys / kMinSplitKeys);
    }
    append_split(plan, it, keys, std::min(parts, tiles), out);
  }
  // Largest first: the dynamic schedule then ends with the small items.
  std::stable_sort(out.begin(), out.end(), [](const WorkItem& a, const WorkItem& b) { return a.cost > b.cost; });
  plan.items = std::move(out);
  return plan;
}

}  // namespace attnsel::kernel::mla::cpu
