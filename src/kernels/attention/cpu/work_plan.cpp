#include "kernels/attention/cpu/work_plan.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace attnsel::kernel::cpu {

namespace {

// Split-KV until every thread has this many items: enough for the dynamic schedule to
// even out a thread that is slowed down (by other processes, or a longer item).
constexpr int kItemsPerThread = 4;

// The keys any row of `it` may see.
void visible_keys(const MaskRule& mask, std::int64_t seq_len, std::int64_t first_pos, std::int64_t last_pos,
                  std::int64_t& begin, std::int64_t& end) {
  std::int64_t b0, e0, b1, e1;
  mask.key_range(first_pos, seq_len, b0, e0);
  mask.key_range(last_pos, seq_len, b1, e1);
  begin = std::min(b0, b1);
  end = std::max(e0, e1);
  if (end < begin) end = begin;
}

double item_cost(const WorkItem& it) {
  // Decode-like rows cost about one K/V row read each; wide items are padded to 16 lanes.
  const int rows = it.num_rows() <= kFewRows ? it.num_rows() : std::max(16, (it.num_rows() + 15) / 16 * 16);
  return it.kv_heads * (static_cast<double>(it.key_end - it.key_begin) * (rows + 8) + 64.0 * rows);
}

}  // namespace

WorkPlan plan_work(const LayerParams& p, const AttentionMetadata& md, const MaskRule& mask, int threads,
                   int min_split_keys) {
  WorkPlan plan;
  const int group = p.num_heads / p.num_kv_heads;
  const int heads_per_item = std::min(group, kMaxRows);
  const int tokens_per_item = std::max(1, kMaxRows / heads_per_item);
  for (int s = 0; s < md.num_seqs; ++s) {
    const int t0 = md.query_start_loc[static_cast<std::size_t>(s)];
    const int t1 = md.query_start_loc[static_cast<std::size_t>(s) + 1];
    const std::int64_t seq_len = md.seq_lens[static_cast<std::size_t>(s)];
    const std::int64_t q_len = t1 - t0;
    // Decode-like rows (a few tokens × a small group): one item walks the cache blocks once
    // for several KV heads, so each block is read whole and in order.
    const bool few_rows = q_len * group <= kFewRows;
    const int kv_step = few_rows ? kMaxItemKvHeads : 1;
    for (int kvh = 0; kvh < p.num_kv_heads; kvh += kv_step)
      for (int h = 0; h < group; h += heads_per_item)
        for (int t = t0; t < t1; t += tokens_per_item) {
          WorkItem it;
          it.seq = s;
          it.kv_head = kvh;
          it.kv_heads = std::min(kv_step, p.num_kv_heads - kvh);
          it.head_begin = kvh * group + h;
          it.head_end = kvh * group + std::min(group, h + heads_per_item);
          it.token_begin = t;
          it.token_end = std::min(t1, t + tokens_per_item);
          it.pos_begin = query_position(seq_len, q_len, t - t0);
          visible_keys(mask, seq_len, it.pos_begin, it.pos_begin + (it.token_end - it.token_begin) - 1, it.key_begin,
                       it.key_end);
          it.cost = item_cost(it);
          plan.items.push_back(it);
        }
  }

  // Split-KV: with fewer than kItemsPerThread items per thread, split the large items so
  // that each part costs about that fraction of a thread's share (and reads at least
  // min_split_keys keys).
  double total = 0.0;
  for (const WorkItem& it : plan.items) total += it.cost;
  if (threads > 1 && plan.items.size() < static_cast<std::size_t>(kItemsPerThread * threads) && total > 0.0) {
    const double target = total / (static_cast<double>(kItemsPerThread) * threads);
    std::vector<WorkItem> out;
    for (const WorkItem& it : plan.items) {
      const std::int64_t keys = it.key_end - it.key_begin;
      auto parts = static_cast<std::int64_t>(std::ceil(it.cost / target));
      parts = std::min<std::int64_t>(parts, keys / std::max(1, min_split_keys));
      if (parts < 2) {
        out.push_back(it);
        continue;
      }
      // Split on tile boundaries so that every part streams whole tiles.
      const std::int64_t tiles = (keys + kTileKeys - 1) / kTileKeys;
      parts = std::min(parts, tiles);
      SplitGroup g{it, plan.num_partial_slots, static_cast<int>(parts)};
      for (std::int64_t i = 0; i < parts; ++i) {
        WorkItem part = it;
        part.key_begin = it.key_begin + std::min(keys, tiles * i / parts * kTileKeys);
        part.key_end = it.key_begin + std::min(keys, tiles * (i + 1) / parts * kTileKeys);
        part.partial = plan.num_partial_slots++;
        part.cost = item_cost(part);
        out.push_back(part);
      }
      plan.splits.push_back(g);
    }
    plan.items = std::move(out);
  }
  // Items that read the same keys and values (one sequence's KV head) run one after
  // another, largest first, and such groups run largest first. Running items then share
  // their head's K/V in the caches: a 4096-token head is 2 MiB, and a plain largest-first
  // order interleaves every sequence and head of the batch, re-reading each from memory.
  std::vector<double> group_cost(static_cast<std::size_t>(md.num_seqs) * static_cast<std::size_t>(p.num_kv_heads));
  auto head_group = [&](const WorkItem& it) {
    return static_cast<std::size_t>(it.seq) * static_cast<std::size_t>(p.num_kv_heads) +
           static_cast<std::size_t>(it.kv_head);
  };
  for (const WorkItem& it : plan.items) group_cost[head_group(it)] += it.cost;
  std::stable_sort(plan.items.begin(), plan.items.end(), [&](const WorkItem& a, const WorkItem& b) {
    const std::size_t ga = head_group(a), gb = head_group(b);
    if (ga == gb) return a.cost > b.cost;
    if (group_cost[ga] != group_cost[gb]) return group_cost[ga] > group_cost[gb];
    return ga < gb;
  });
  return plan;
}

}  // namespace attnsel::kernel::cpu
