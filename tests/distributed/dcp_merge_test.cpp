// Partial attention over DCP shards merged with the LSEs equals attention over the whole
// cache: every rank count, interleave, cache dtype and layout, sequences whose shards are
// empty on some ranks, and vLLM's rules for -inf/NaN LSEs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attnsel/errors.hpp"
#include "distributed/kv_shard.hpp"
#include "distributed/merge_states.hpp"
#include "distributed/partial_attention.hpp"
#include "kernels/reference.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::distributed {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  int world, interleave, block_size;
  runtime::CacheLayout layout;
  std::string kv_cache_dtype;
};

runtime::WorkloadSpec decode_batch(const Case& c) {
  runtime::WorkloadSpec w;
  w.num_heads = 12;  // GQA 12/4 (3 per KV head) and a prime head size
  w.num_kv_heads = 4;
  w.head_size = 67;
  w.dtype = kernel::ScalarType::bf16;
  w.kv_cache_dtype = c.kv_cache_dtype;
  w.block_size = c.block_size;
  w.layout = c.layout;
  // Lengths below world * interleave leave some ranks without a token.
  w.sequences = {{1, 1}, {3, 1}, {37, 1}, {130, 1}, {2 * c.block_size * c.world + 5, 1}};
  w.seed = 7;
  return w;
}

void expect_merged_equals_reference(const Case& c) {
  const runtime::WorkloadSpec ws = decode_batch(c);
  runtime::PagedWorkload full(ws);
  const kernel::LayerParams p = runtime::layer_params_for(ws);
  const DcpLayout layout = make_dcp_layout(c.world, c.interleave, c.block_size);
  const int T = full.num_tokens(), H = ws.num_heads, D = ws.head_size;
  const std::size_t thd = static_cast<std::size_t>(T) * H * D, th = static_cast<std::size_t>(T) * H;
  std::vector<float> outs(thd * c.world, std::numeric_limits<float>::quiet_NaN()), lses(th * c.world, kInf);
  for (int r = 0; r < c.world; ++r) {
    KVShard shard(full.cache(), full.metadata(), layout, r);
    attend_shard(p, full.query(), shard.cache(), shard.metadata(), std::span(outs).subspan(thd * r, thd),
                 std::span(lses).subspan(th * r, th));
  }
  std::vector<float> out(thd), lse(th);
  merge_partials(outs, lses, c.world, T, H, D, out, lse);

  std::vector<std::int32_t> tokens(static_cast<std::size_t>(T));
  for (int t = 0; t < T; ++t) tokens[static_cast<std::size_t>(t)] = t;
  const std::vector<double> want = kernel::reference::attend(p, full.query(), full.cache(), full.metadata(), tokens);
  for (std::size_t i = 0; i < thd; ++i)
    ASSERT_NEAR(out[i], want[i], 2e-5 + 2e-4 * std::abs(want[i])) << "element " << i << " world " << c.world;

  // The merged LSE equals one rank's LSE over the whole cache.
  KVShard whole(full.cache(), full.metadata(), make_dcp_layout(1, 1, c.block_size), 0);
  std::vector<float> out1(thd), lse1(th);
  attend_shard(p, full.query(), whole.cache(), whole.metadata(), out1, lse1);
  for (std::size_t i = 0; i < th; ++i) ASSERT_NEAR(lse[i], lse1[i], 1e-4 * (1 + std::abs(lse1[i]))) << i;
}

TEST(DcpMerge, ShardedAttentionEqualsTheWholeCache) {
  for (int world : {1, 2, 3, 4})
    for (int interleave : {1, 4})
      expect_merged_equals_reference({world, interleave, 16, runtime::CacheLayout::nhd, "auto"});
}

TEST(DcpMerge, HndLayoutAndFp8Caches) {
  expect_merged_equals_reference({2, 2, 8, runtime::CacheLayout::hnd, "auto"});
  expect_merged_equals_reference({3, 1, 16, runtime::CacheLayout::nhd, "fp8_e4m3"});
  expect_merged_equals_reference({4, 16, 16, runtime::CacheLayout::hnd, "fp8_e5m2"});
}

TEST(DcpMerge, ShardsShareOneBlockTableAndWriteOnlyTheirOwnNewTokens) {
  const Case c{3, 2, 8, runtime::CacheLayout::nhd, "auto"};
  runtime::PagedWorkload full(decode_batch(c));
  const DcpLayout layout = make_dcp_layout(c.world, c.interleave, c.block_size);
  KVShard r0(full.cache(), full.metadata(), layout, 0);
  const auto md0 = r0.metadata();
  int writers_total = 0;
  for (int r = 0; r < c.world; ++r) {
    KVShard s(full.cache(), full.metadata(), layout, r);
    const auto md = s.metadata();
    EXPECT_TRUE(std::equal(md.block_table.begin(), md.block_table.end(), md0.block_table.begin()));
    for (std::int64_t slot : md.slot_mapping) writers_total += slot >= 0;
  }
  EXPECT_EQ(writers_total, full.num_tokens());  // every new token has exactly one owner
}

TEST(DcpMerge, EmptyShardsAndNaNLsesCarryNoWeight) {
  // 2 tokens x 1 head x 2 dims, 3 ranks: rank 1 is empty (-inf, garbage NaN output),
  // rank 2 reports NaN / +inf LSEs (vLLM treats both as -inf).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> outs = {1, 2, 3, 4, nan, nan, nan, nan, 5, 6, 7, 8};
  const std::vector<float> lses = {0.5f, -1.0f, -kInf, -kInf, nan, kInf};
  std::vector<float> out(4), lse(2);
  merge_partials(outs, lses, 3, 2, 1, 2, out, lse);
  EXPECT_FLOAT_EQ(out[0], 1);
  EXPECT_FLOAT_EQ(out[1], 2);
  EXPECT_FLOAT_EQ(out[2], 3);
  EXPECT_FLOAT_EQ(out[3], 4);
  EXPECT_FLOAT_EQ(lse[0], 0.5f);
  EXPECT_FLOAT_EQ(lse[1], -1.0f);
}

TEST(DcpMerge, ATokenNoRankSawGetsZeroAndMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> outs = {nan, nan, nan, nan};
  const std::vector<float> lses = {-kInf, -kInf};
  std::vector<float> out(2, 9.0f), lse(1);
  merge_partials(outs, lses, 2, 1, 1, 2, out, lse);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(lse[0], -kInf);
}

TEST(DcpMerge, WeightsAreTheSoftmaxOfTheLses) {
  // Two ranks with LSEs log 1 and log 3: weights 1/4 and 3/4; huge LSEs do not overflow.
  for (float shift : {0.0f, 80.0f, -80.0f, 1000.0f}) {
    const std::vector<float> outs = {4, 8};
    const std::vector<float> lses = {shift, shift + std::log(3.0f)};
    std::vector<float> out(1), lse(1);
    merge_partials(outs, lses, 2, 1, 1, 1, out, lse);
    // At 1000 the float LSE itself is only good to ~6e-5 (its ulp), which the weights inherit.
    EXPECT_NEAR(out[0], 4 * 0.25 + 8 * 0.75, 1e-3) << shift;
    EXPECT_NEAR(lse[0], shift + std::log(4.0f), 1e-3) << shift;
  }
}

TEST(DcpMerge, ReduceScatterOverHeadsGivesEachRankItsHeads) {
  // vLLM's path: correct each rank's output, then sum block r of every rank on rank r.
  const int world = 2, T = 3, H = 4, D = 5;
  const std::size_t thd = static_cast<std::size_t>(T) * H * D, th = static_cast<std::size_t>(T) * H;
  std::vector<float> outs(thd * world), lses(th * world);
  for (std::size_t i = 0; i < outs.size(); ++i) outs[i] = std::sin(0.37f * static_cast<float>(i));
  for (std::size_t i = 0; i < lses.size(); ++i) lses[i] = std::cos(1.3f * static_cast<float>(i)) * 3;
  std::vector<float> merged(thd), lse(th);
  merge_partials(outs, lses, world, T, H, D, merged, lse);
  std::vector<std::vector<float>> packed(world, std::vector<float>(thd));
  for (int r = 0; r < world; ++r) {
    std::vector<float> mine(outs.begin() + static_cast<std::ptrdiff_t>(thd * r),
                            outs.begin() + static_cast<std::ptrdiff_t>(thd * (r + 1)));
    correct_partial_output(lses, world, r, T, H, D, mine, {});
    pack_heads_by_rank(mine, world, T, H, D, packed[static_cast<std::size_t>(r)]);
  }
  const int hpr = H / world;
  for (int r = 0; r < world; ++r)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < hpr; ++h)
        for (int d = 0; d < D; ++d) {
          const std::size_t at = ((static_cast<std::size_t>(r) * T + t) * hpr + h) * D + d;
          const float sum = packed[0][at] + packed[1][at];
          EXPECT_NEAR(sum, merged[(static_cast<std::size_t>(t) * H + r * hpr + h) * D + d], 1e-6);
        }
  std::vector<float> odd(thd);
  EXPECT_THROW(pack_heads_by_rank(outs, 3, T, H, D, odd), ValueError);
}

TEST(DcpMerge, RefusesPrefillAndPositionDependentLayers) {
  runtime::WorkloadSpec w = decode_batch({2, 1, 16, runtime::CacheLayout::nhd, "auto"});
  w.sequences = {{40, 4}};
  runtime::PagedWorkload full(w);
  kernel::LayerParams p = runtime::layer_params_for(w);
  KVShard s(full.cache(), full.metadata(), make_dcp_layout(2, 1, 16), 0);
  std::vector<float> out(static_cast<std::size_t>(full.num_tokens()) * w.num_heads * w.head_size),
      lse(static_cast<std::size_t>(full.num_tokens()) * w.num_heads);
  EXPECT_THROW(attend_shard(p, full.query(), s.cache(), s.metadata(), out, lse), ValueError);
  p.sliding_window = 64;
  EXPECT_THROW(validate_dcp_layer(p), ValueError);
  p.sliding_window.reset();
  p.sinks.assign(static_cast<std::size_t>(w.num_heads), 0.5f);
  EXPECT_THROW(validate_dcp_layer(p), ValueError);
}

}  // namespace
}  // namespace attnsel::distributed
