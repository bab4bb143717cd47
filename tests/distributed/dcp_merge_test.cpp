// Partial attention over DCP shards, through CPU_ATTN's kernel with its LSE output, merged
// with the LSEs equals the reference over the whole cache: every rank count, interleave,
// cache dtype and layout, sequences whose shards are empty on some ranks, and vLLM's rules
// for -inf/NaN LSEs. Kernels that declare no LSE output are refused from their KernelInfo.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "attnsel/errors.hpp"
#include "distributed/kv_shard.hpp"
#include "distributed/merge_states.hpp"
#include "distributed/partial_attention.hpp"
#include "kernels/attention/cpu/cpu_attention.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/accuracy.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::distributed {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  int world, interleave, block_size;
  runtime::CacheLayout layout;
  CacheDType kv_cache_dtype;
};

runtime::WorkloadSpec decode_batch(const Case& c) {
  runtime::WorkloadSpec w;
  w.num_heads = 12;  // GQA 12/4 (3 per KV head), a head size that is no power of two
  w.num_kv_heads = 4;
  w.head_size = 80;
  w.dtype = kernel::ScalarType::bf16;
  w.kv_cache_dtype = c.kv_cache_dtype;
  w.block_size = c.block_size;
  w.layout = c.layout;
  // Lengths below world * interleave leave some ranks without a token.
  w.sequences = {{1, 1}, {3, 1}, {37, 1}, {130, 1}, {2 * c.block_size * c.world + 5, 1}};
  w.seed = 7;
  return w;
}

// Rank r's partial output and LSE through the kernel, as the DCP job computes them: one
// plan for the step, then two layers executed on it (they must agree: the plan is reused).
void attend_through_kernel(const kernel::LayerParams& p, runtime::PagedWorkload& full, KVShard& shard,
                           std::span<float> out, std::span<float> lse) {
  PartialAttention attention(kernel::cpu::make_cpu_attention_impl(p));
  attention.plan(shard.metadata(), shard.cache(), full.query().dtype);
  std::vector<float> first(out.size()), first_lse(lse.size());
  attention.execute(full.query(), shard.cache(), first, first_lse);
  attention.execute(full.query(), shard.cache(), out, lse);
  for (std::size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(first[i]), std::bit_cast<std::uint32_t>(out[i])) << i;
  for (std::size_t i = 0; i < lse.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(first_lse[i]), std::bit_cast<std::uint32_t>(lse[i])) << i;
}

void expect_merged_equals_reference(const Case& c) {
  const runtime::WorkloadSpec ws = decode_batch(c);
  runtime::PagedWorkload full(ws);
  const kernel::LayerParams p = runtime::layer_params_for(ws);
  const DcpLayout layout = make_dcp_layout(c.world, c.interleave, c.block_size);
  const int T = full.num_tokens(), H = ws.num_heads, D = ws.head_size;
  const std::size_t thd = static_cast<std::size_t>(T) * H * D, th = static_cast<std::size_t>(T) * H;
  // Poisoned: every element must be written (NaN outputs, +inf LSEs would show).
  std::vector<float> outs(thd * c.world, std::numeric_limits<float>::quiet_NaN()), lses(th * c.world, kInf);
  for (int r = 0; r < c.world; ++r) {
    KVShard shard(full.cache(), full.metadata(), layout, r);
    attend_through_kernel(p, full, shard, std::span(outs).subspan(thd * r, thd), std::span(lses).subspan(th * r, th));
  }
  for (float v : outs) ASSERT_FALSE(std::isnan(v));
  std::vector<float> out(thd), lse(th);
  merge_partials(outs, lses, c.world, T, H, D, out, lse);

  // The single-rank result: the reference over the whole, unsharded cache (exact outputs),
  // and its LSE.
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(T));
  for (int t = 0; t < T; ++t) tokens[static_cast<std::size_t>(t)] = t;
  const std::vector<double> want = kernel::reference::attend(p, full.query(), full.cache(), full.metadata(), tokens);
  std::vector<std::uint16_t> ref_out(thd);
  std::vector<float> want_lse(th, kInf);
  const kernel::TensorView want_lse_view =
      kernel::TensorView::contiguous(want_lse.data(), kernel::ScalarType::f32, {T, H});
  kernel::reference::forward(p, full.query(), full.cache(), full.metadata(),
                             kernel::TensorView::contiguous(ref_out.data(), ws.dtype, {T, H, D}), &want_lse_view);
  // The kernel's tolerance for its output dtype (each partial output is rounded to it once).
  const runtime::Tolerance tol = runtime::tolerance_for(ws.dtype);
  for (std::size_t i = 0; i < thd; ++i)
    ASSERT_NEAR(out[i], want[i], tol.atol + tol.rtol * std::abs(want[i])) << "element " << i << " world " << c.world;
  // The merged LSE equals the LSE over the whole cache.
  for (std::size_t i = 0; i < th; ++i) ASSERT_NEAR(lse[i], want_lse[i], 2e-3 * (1 + std::abs(want_lse[i]))) << i;
}

TEST(DcpMerge, ShardedAttentionEqualsTheWholeCache) {
  for (int world : {1, 2, 3, 4})
    for (int interleave : {1, 4})
      expect_merged_equals_reference({world, interleave, 16, runtime::CacheLayout::nhd, CacheDType::auto_});
}

TEST(DcpMerge, HndLayoutAndFp8Caches) {
  expect_merged_equals_reference({2, 2, 32, runtime::CacheLayout::hnd, CacheDType::auto_});
  expect_merged_equals_reference({3, 1, 16, runtime::CacheLayout::nhd, CacheDType::fp8_e4m3});
  expect_merged_equals_reference({4, 16, 16, runtime::CacheLayout::hnd, CacheDType::fp8_e5m2});
}

TEST(DcpMerge, ShardsShareOneBlockTableAndWriteOnlyTheirOwnNewTokens) {
  const Case c{3, 2, 8, runtime::CacheLayout::nhd, CacheDType::auto_};
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

TEST(DcpMerge, ARankWithNoTokenOfAnySequenceGivesZeroAndMinusInfinity) {
  // Four ranks, interleave 16: a 3-token sequence lives on rank 0 only.
  runtime::WorkloadSpec w = decode_batch({4, 16, 16, runtime::CacheLayout::nhd, CacheDType::auto_});
  w.sequences = {{3, 1}, {1, 1}};
  runtime::PagedWorkload full(w);
  const kernel::LayerParams p = runtime::layer_params_for(w);
  KVShard s(full.cache(), full.metadata(), make_dcp_layout(4, 16, 16), 3);
  const std::size_t th = static_cast<std::size_t>(full.num_tokens()) * w.num_heads;
  std::vector<float> out(th * w.head_size, std::numeric_limits<float>::quiet_NaN()), lse(th, kInf);
  attend_through_kernel(p, full, s, out, lse);
  for (float v : out) EXPECT_EQ(v, 0.0f);
  for (float v : lse) EXPECT_EQ(v, -kInf);
}

TEST(DcpMerge, RefusesPrefillAndPositionDependentLayers) {
  runtime::WorkloadSpec w = decode_batch({2, 1, 16, runtime::CacheLayout::nhd, CacheDType::auto_});
  w.sequences = {{40, 4}};
  runtime::PagedWorkload full(w);
  kernel::LayerParams p = runtime::layer_params_for(w);
  KVShard s(full.cache(), full.metadata(), make_dcp_layout(2, 1, 16), 0);
  PartialAttention attention(kernel::cpu::make_cpu_attention_impl(p));
  EXPECT_THROW(attention.plan(s.metadata(), s.cache(), full.query().dtype), ValueError);
  p.sliding_window = 64;
  EXPECT_THROW(validate_dcp_layer(p), ValueError);
  EXPECT_THROW(PartialAttention(kernel::cpu::make_cpu_attention_impl(p)), ValueError);
  p.sliding_window.reset();
  p.sinks.assign(static_cast<std::size_t>(w.num_heads), 0.5f);
  EXPECT_THROW(validate_dcp_layer(p), ValueError);
}

TEST(DcpMerge, RefusesAQueryOtherThanThePlannedOne) {
  const runtime::WorkloadSpec w = decode_batch({2, 1, 16, runtime::CacheLayout::nhd, CacheDType::auto_});
  runtime::PagedWorkload full(w);
  PartialAttention attention(kernel::cpu::make_cpu_attention_impl(runtime::layer_params_for(w)));
  KVShard s(full.cache(), full.metadata(), make_dcp_layout(2, 1, 16), 1);
  attention.plan(s.metadata(), s.cache(), full.query().dtype);  // planned for bf16 queries
  const std::size_t th = static_cast<std::size_t>(full.num_tokens()) * w.num_heads;
  std::vector<float> out(th * w.head_size), lse(th), small(1);
  kernel::TensorView f16 = full.query();
  f16.dtype = kernel::ScalarType::f16;
  EXPECT_THROW(attention.execute(f16, s.cache(), out, lse), ValueError);
  EXPECT_THROW(attention.execute(full.query(), s.cache(), out, small), ValueError);  // an LSE buffer too small
  EXPECT_NO_THROW(attention.execute(full.query(), s.cache(), out, lse));
}

// What the kernel declares decides: no LSE output, or no kernel on this host, is refused with
// the backend's name and the reason; a GPU kernel with an LSE output qualifies.
TEST(DcpMerge, RefusesKernelsWithoutLseOutputFromTheirKernelInfo) {
  kernel::KernelInfo k;
  k.available = true;
  k.device = kernel::DeviceKind::cuda;
  k.isa = "CUDA sm_90a";
  k.lse_output = false;
  try {
    require_dcp_kernel(k, "FLASH_ATTN");
    FAIL() << "a kernel without LSE output was accepted";
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("FLASH_ATTN's kernel (CUDA sm_90a) does not write one"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("lse_output = false"), std::string::npos) << e.what();
  }
  k.lse_output = true;
  EXPECT_NO_THROW(require_dcp_kernel(k, "FLASH_ATTN"));  // on the GPU: the job stages its tensors
  k.available = false;
  try {
    require_dcp_kernel(k, "FLASH_ATTN");
    FAIL() << "a kernel that cannot run here was accepted";
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("FLASH_ATTN's kernel is not available in this build on this host"),
              std::string::npos)
        << e.what();
  }
  k.available = true;
  k.device = kernel::DeviceKind::cpu;
  EXPECT_NO_THROW(require_dcp_kernel(k, "CPU_ATTN"));
  k.available = false;
  EXPECT_THROW(require_dcp_kernel(k, "CPU_ATTN"), NotImplementedError);
  // CPU_ATTN's kernel itself declares its LSE output.
  const runtime::WorkloadSpec w = decode_batch({2, 1, 16, runtime::CacheLayout::nhd, CacheDType::auto_});
  EXPECT_NO_THROW(require_dcp_kernel(kernel::cpu::make_cpu_attention_impl(runtime::layer_params_for(w))->kernel_info(),
                                     "CPU_ATTN"));
}

}  // namespace
}  // namespace attnsel::distributed
