// The CPU kernels' work plan: which items a batch becomes and in what order they run.
#include "kernels/attention/cpu/work_plan.hpp"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

namespace attnsel::kernel::cpu {
namespace {

LayerParams gqa_layer() {
  LayerParams p;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.head_size = 128;
  p.scale = 0.088f;
  return p;
}

struct Batch {
  std::vector<std::int32_t> qsl, seq_lens, block_table;
  AttentionMetadata md;
  explicit Batch(const std::vector<std::pair<int, int>>& seqs) {  // (seq_len, query_len)
    qsl.push_back(0);
    for (auto [len, q] : seqs) {
      qsl.push_back(qsl.back() + q);
      seq_lens.push_back(len);
    }
    md.num_seqs = static_cast<int>(seqs.size());
    md.num_actual_tokens = qsl.back();
    md.query_start_loc = qsl;
    md.seq_lens = seq_lens;
  }
};

TEST(WorkPlan, PrefillItemsOfOneSequencesKvHeadRunTogetherLargestFirst) {
  // Eight equal causal prompts: a plain largest-first order would interleave all 64
  // (sequence, KV head) pairs, each 2 MiB of K/V at 4096 tokens.
  const LayerParams p = gqa_layer();
  Batch b(std::vector<std::pair<int, int>>(8, {4096, 4096}));
  const WorkPlan plan = plan_work(p, b.md, MaskRule::from(p), 2);
  ASSERT_GT(plan.items.size(), 64u * 2);
  std::set<std::pair<int, int>> finished;  // groups the order has moved on from
  std::pair<int, int> current{plan.items.front().seq, plan.items.front().kv_head};
  double last_cost = plan.items.front().cost;
  for (const WorkItem& it : plan.items) {
    const std::pair<int, int> g{it.seq, it.kv_head};
    if (g != current) {
      finished.insert(current);
      EXPECT_EQ(finished.count(g), 0u) << "group (" << g.first << ", " << g.second << ") resumes after another";
      current = g;
    } else {
      EXPECT_LE(it.cost, last_cost) << "items of a group run largest first";
    }
    last_cost = it.cost;
  }
  EXPECT_EQ(finished.size() + 1, 64u);
}

TEST(WorkPlan, LargerGroupsRunFirst) {
  // A long prompt's KV heads come before a short prompt's and before decode rows.
  const LayerParams p = gqa_layer();
  Batch b({{300, 300}, {2000, 2000}, {5000, 1}});
  const WorkPlan plan = plan_work(p, b.md, MaskRule::from(p), 2);
  ASSERT_FALSE(plan.items.empty());
  EXPECT_EQ(plan.items.front().seq, 1);
  EXPECT_NE(plan.items.back().seq, 1);
  int first_short = -1, last_long = -1;
  for (int i = 0; i < static_cast<int>(plan.items.size()); ++i) {
    if (plan.items[static_cast<std::size_t>(i)].seq == 1) last_long = i;
    if (plan.items[static_cast<std::size_t>(i)].seq == 0 && first_short < 0) first_short = i;
  }
  EXPECT_LT(last_long, first_short);
}

}  // namespace
}  // namespace attnsel::kernel::cpu
