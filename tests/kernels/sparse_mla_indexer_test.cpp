// The CPU lightning indexer against the double-precision reference: the key cache's bytes,
// the scores on the dequantised fp8 values (DeepGEMM's calc_diff < 1e-3, as vLLM checks the
// indexer, plus an elementwise bound), causal and MTP rows, the top-k at the lengths around
// index_topk, ties, waves, thread counts and the checks of bad input.
#include <gtest/gtest.h>

#include <omp.h>

#include <bit>
#include <cstring>
#include <limits>

#include "attnsel/errors.hpp"
#include "kernels/fp8.hpp"
#include "kernels/sparse_mla/cpu/cpu_indexer.hpp"
#include "kernels/sparse_mla/cpu/top_k.hpp"
#include "kernels/sparse_mla/formats.hpp"
#include "sparse_mla_test_util.hpp"

namespace attnsel::kernel::sparse_mla {
namespace {

using testing::Buffer;
using testing::expect_top_k_of_scores;
using testing::expect_value_error;
using testing::IndexerSetup;
using testing::IndexerWorkload;
using testing::kNegInf;
using testing::Request;

std::unique_ptr<IndexerImpl> make(const IndexerLayerParams& p, bool bf16_dot = true, int threads = 0) {
  cpu::CpuIndexerOptions o;
  o.allow_bf16_dot = bf16_dot;
  o.num_threads = threads;
  return cpu::make_cpu_indexer_impl(p, o);
}

TEST(SparseMlaFormats, EncodeE4m3IsFloatToFp8) {
  // Every 2^32 / 65521-th bit pattern, and the values around each e4m3 rounding boundary.
  for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += 65521) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(bits));
    ASSERT_EQ(encode_e4m3(x), float_to_fp8(x, ScalarType::fp8_e4m3)) << "x = " << x;
  }
  for (int b = 0; b < 127; ++b) {
    const float lo = fp8_to_float(static_cast<std::uint8_t>(b), ScalarType::fp8_e4m3);
    const float hi = fp8_to_float(static_cast<std::uint8_t>(b + 1), ScalarType::fp8_e4m3);
    if (std::isnan(hi)) continue;
    const float mid = (lo + hi) / 2;
    for (float x : {lo, hi, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), -mid, -lo})
      ASSERT_EQ(encode_e4m3(x), float_to_fp8(x, ScalarType::fp8_e4m3)) << "x = " << x;
  }
  for (float x : {448.0f, 463.9f, 464.0f, 1e30f, INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f, 1e-30f})
    EXPECT_EQ(encode_e4m3(x), float_to_fp8(x, ScalarType::fp8_e4m3)) << "x = " << x;
}

TEST(SparseMlaFormats, ScaleRulesRoundUpToPowersOfTwo) {
  EXPECT_EQ(pow2_ceil(1.0f), 1.0f);
  EXPECT_EQ(pow2_ceil(0.75f), 1.0f);
  EXPECT_EQ(pow2_ceil(std::nextafter(1.0f, 2.0f)), 2.0f);
  EXPECT_EQ(pow2_ceil(3.0f), 4.0f);
  // The indexer: max(amax, 1e-4) / 448, up.
  EXPECT_EQ(indexer_key_scale(448.0f), 1.0f);
  EXPECT_EQ(indexer_key_scale(449.0f), 2.0f);
  EXPECT_EQ(indexer_key_scale(0.0f), std::ldexp(1.0f, -22));  // 1e-4 / 448 = 2.2e-7 -> 2^-22
  // fp8_ds_mla tiles: max(amax / 448, 1e-4), up (vLLM's test: 336 -> 1, zeros -> 2^-13).
  EXPECT_EQ(ds_mla_tile_scale(336.0f), 1.0f);
  EXPECT_EQ(ds_mla_tile_scale(0.0f), std::ldexp(1.0f, -13));
  EXPECT_EQ(ds_mla_tile_scale(448.0f * 3.0f), 4.0f);
  // Queries: max(amax, 1e-10) / 448, up.
  EXPECT_EQ(indexer_query_scale(1.0f), std::ldexp(1.0f, -8));  // 1 / 448 -> 2^-8
  EXPECT_EQ(indexer_query_scale(0.0f), std::ldexp(1.0f, -42));  // 1e-10 / 448 = 2.2e-13 -> 2^-42
}

TEST(SparseMlaIndexer, CacheWriteMatchesReferenceBytes) {
  for (int block : {64, 16, 7}) {
    IndexerSetup s;
    s.block_size = block;
    s.requests = {{70, 3}, {1, 1}, {130, 5}};
    s.k_sigma = 30.0;
    IndexerWorkload w(s);
    // Padding slots in the middle: skipped.
    w.batch.slot_mapping[1] = -1;
    w.batch.slot_mapping[4] = -1;
    w.batch.bind();
    Buffer expected(ScalarType::u8, {w.batch.num_blocks, block, 132});
    std::fill(expected.bytes.begin(), expected.bytes.end(), 0x3C);
    Buffer got(ScalarType::u8, {w.batch.num_blocks, block, 132});
    std::fill(got.bytes.begin(), got.bytes.end(), 0x3C);
    reference::write_keys(w.params, w.k.view, expected.view, w.batch.slot_mapping, w.batch.tokens);
    auto impl = make(w.params);
    auto plan = impl->plan(w.batch.md, got.view, {});
    impl->write_cache(*plan, w.k.view, got.view, {});
    EXPECT_EQ(got.bytes, expected.bytes) << "block " << block;

    // The layout by hand for token 2 (slot s): values at offset · 128, the scale after every
    // value of the block, max(amax, 1e-4) / 448 rounded up to a power of two.
    const std::int64_t slot = w.batch.slot_mapping[2];
    const std::uint8_t* base = got.bytes.data() + (slot / block) * block * 132;
    float amax = 0.0f;
    for (int d = 0; d < 128; ++d) amax = std::max(amax, std::abs(static_cast<float>(kernel::reference::load(w.k.bytes.data(), w.k.view.dtype, 2 * 128 + d))));
    float scale = 0.0f;
    std::memcpy(&scale, base + block * 128 + (slot % block) * 4, 4);
    EXPECT_EQ(scale, std::exp2(std::ceil(std::log2(amax / 448.0f))));
    for (int d = 0; d < 128; ++d)
      EXPECT_EQ(base[(slot % block) * 128 + d],
                float_to_fp8(static_cast<float>(kernel::reference::load(w.k.bytes.data(), w.k.view.dtype, 2 * 128 + d)) / scale,
                             ScalarType::fp8_e4m3));
  }
}

TEST(SparseMlaIndexer, ZeroKeyGetsTheSmallestScale) {
  IndexerSetup s;
  s.requests = {{3, 1}};
  IndexerWorkload w(s);
  std::fill(w.k.bytes.begin(), w.k.bytes.end(), 0);
  auto impl = make(w.params);
  auto plan = impl->plan(w.batch.md, w.key_cache.view, {});
  impl->write_cache(*plan, w.k.view, w.key_cache.view, {});
  const std::int64_t slot = w.batch.slot_mapping[0];
  const std::uint8_t* base = w.key_cache.bytes.data() + (slot / 64) * 64 * 132;
  float scale = 0.0f;
  std::memcpy(&scale, base + 64 * 128 + (slot % 64) * 4, 4);
  EXPECT_EQ(scale, std::ldexp(1.0f, -22));
  for (int d = 0; d < 128; ++d) EXPECT_EQ(base[(slot % 64) * 128 + d], 0);
}

TEST(SparseMlaIndexer, OutOfRangeSlotIsRefusedBeforeWriting) {
  IndexerSetup s;
  s.requests = {{5, 2}};
  IndexerWorkload w(s);
  const std::vector<std::uint8_t> before = w.key_cache.bytes;
  w.batch.slot_mapping[1] = static_cast<std::int64_t>(w.batch.num_blocks) * 64;
  w.batch.bind();
  auto impl = make(w.params);
  try {
    impl->plan(w.batch.md, w.key_cache.view, {});
    FAIL() << "an out-of-range slot was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("slot_mapping[1]"), std::string::npos) << e.what();
  }
  EXPECT_EQ(w.key_cache.bytes, before);
}

struct LogitsCase {
  int heads, block;
  ScalarType dtype, weights_dtype;
  std::vector<Request> requests;
  bool bf16_dot = true;
};

class SparseMlaIndexerLogits : public ::testing::TestWithParam<LogitsCase> {};

TEST_P(SparseMlaIndexerLogits, MatchTheReferenceOnTheDequantisedValues) {
  const LogitsCase& c = GetParam();
  IndexerSetup s;
  s.heads = c.heads;
  s.block_size = c.block;
  s.dtype = c.dtype;
  s.weights_dtype = c.weights_dtype;
  s.requests = c.requests;
  s.topk = 37;
  IndexerWorkload w(s);
  auto impl = make(w.params, c.bf16_dot);
  auto plan = impl->plan(w.batch.md, w.key_cache.view, {});
  impl->logits(*plan, w.q.view, w.weights.view, w.key_cache.view, w.logits.view, {});
  const std::vector<double> got = w.scores(), ref = w.reference_scores();
  EXPECT_LT(testing::calc_diff(got, ref), 1e-3) << describe(s);
  // Far tighter in fact: the products of e4m3 values are exact in fp32.
  double worst = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i])) {
      ASSERT_EQ(got[i], kNegInf) << "cell " << i << " past its row's positions, " << describe(s);
      continue;
    }
    ASSERT_TRUE(std::isfinite(got[i])) << "cell " << i << ", " << describe(s);
    worst = std::max(worst, std::abs(got[i] - ref[i]) / (std::abs(ref[i]) + 1e-3));
  }
  EXPECT_LT(worst, 1e-4) << describe(s);
  // Causal rows: query j of a request with L cached tokens and s_q new ones sees L - s_q + j + 1.
  const std::vector<std::int64_t> lengths = reference::row_lengths(w.batch.md);
  for (int t = 0; t < w.batch.tokens; ++t) {
    const std::int64_t n = lengths[static_cast<std::size_t>(t)];
    if (n > 0) {
      EXPECT_TRUE(std::isfinite(got[static_cast<std::size_t>(t * w.width + n - 1)])) << t;
    }
    EXPECT_EQ(got[static_cast<std::size_t>(t * w.width + n)], kNegInf) << t;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SparseMlaIndexerLogits,
    ::testing::Values(LogitsCase{64, 64, ScalarType::bf16, ScalarType::f32, {{1, 1}, {200, 1}, {67, 1}}},
                      // MTP rows: 2, 3 and 4 query tokens per request.
                      LogitsCase{64, 64, ScalarType::bf16, ScalarType::bf16, {{131, 2}, {70, 3}, {4, 4}}},
                      // A padding request (seq_len 0) among decodes; odd block sizes.
                      LogitsCase{64, 61, ScalarType::bf16, ScalarType::f32, {{257, 1}, {0, 1}, {3, 1}}},
                      LogitsCase{17, 7, ScalarType::f32, ScalarType::f32, {{97, 2}, {5, 1}}},
                      LogitsCase{1, 16, ScalarType::f16, ScalarType::f16, {{33, 1}, {129, 3}}},
                      LogitsCase{128, 64, ScalarType::bf16, ScalarType::f32, {{300, 1}, {90, 2}}},
                      // Prefill: many query tokens (groups and items), with context.
                      LogitsCase{64, 64, ScalarType::bf16, ScalarType::f32, {{5000, 37}, {23, 23}}},
                      // fp32 products (no AVX-512-BF16).
                      LogitsCase{64, 64, ScalarType::bf16, ScalarType::f32, {{300, 2}, {45, 45}}, false}));

TEST(SparseMlaIndexer, TopKAroundIndexTopk) {
  for (int L : {1, 2047, 2048, 2049, 4099}) {
    IndexerSetup s;
    s.requests = {{L, 1}, {L + 1, 2}};  // rows of L, L and L + 1 positions
    s.topk = 2048;
    IndexerWorkload w(s);
    auto impl = make(w.params);
    auto plan = impl->plan(w.batch.md, w.key_cache.view, {});
    impl->logits(*plan, w.q.view, w.weights.view, w.key_cache.view, w.logits.view, {});
    impl->top_k(*plan, w.q.view, w.weights.view, w.key_cache.view, w.indices.view, {});
    const std::vector<std::int32_t> got = w.index_rows();
    expect_top_k_of_scores(w, got, fmt::format("L = {}", L));
    const std::vector<std::int64_t> lengths = reference::row_lengths(w.batch.md);
    const std::vector<double> ref = w.reference_scores();
    for (int t = 0; t < w.batch.tokens; ++t) {
      const std::int32_t* row = got.data() + static_cast<std::size_t>(t) * 2048;
      const std::int64_t n = lengths[static_cast<std::size_t>(t)], take = std::min<std::int64_t>(n, 2048);
      // k = min(index_topk, positions), distinct, in range, -1 after; highest score first.
      std::vector<char> seen(static_cast<std::size_t>(n), 0);
      for (std::int64_t i = 0; i < 2048; ++i) {
        if (i >= take) {
          ASSERT_EQ(row[i], -1) << "L " << L << " token " << t << " entry " << i;
          continue;
        }
        ASSERT_GE(row[i], 0);
        ASSERT_LT(row[i], n);
        ASSERT_FALSE(seen[static_cast<std::size_t>(row[i])]) << "duplicate " << row[i];
        seen[static_cast<std::size_t>(row[i])] = 1;
        if (i > 0) {
          ASSERT_GE(reinterpret_cast<const float*>(w.logits.bytes.data())[t * w.width + row[i - 1]],
                    reinterpret_cast<const float*>(w.logits.bytes.data())[t * w.width + row[i]]);
        }
      }
      // The chosen set is the reference's top-k up to scores closer than the kernel's rounding.
      if (take < n) {
        double lowest_chosen = INFINITY, highest_left = -INFINITY;
        for (std::int64_t p = 0; p < n; ++p) {
          const double r = ref[static_cast<std::size_t>(t * w.width + p)];
          if (seen[static_cast<std::size_t>(p)]) lowest_chosen = std::min(lowest_chosen, r);
          else highest_left = std::max(highest_left, r);
        }
        EXPECT_GE(lowest_chosen, highest_left - 1e-5 * std::abs(highest_left) - 1e-6) << "L " << L << " token " << t;
      }
    }
  }
}

TEST(SparseMlaIndexer, ConstantScoresSelectTheLowestPositionsFirst) {
  IndexerSetup s;
  s.requests = {{3000, 1}, {100, 2}};
  s.topk = 2048;
  IndexerWorkload w(s);
  std::fill(w.weights.bytes.begin(), w.weights.bytes.end(), 0);  // every score 0
  auto impl = make(w.params);
  auto plan = impl->plan(w.batch.md, w.key_cache.view, {});
  impl->top_k(*plan, w.q.view, w.weights.view, w.key_cache.view, w.indices.view, {});
  const std::vector<std::int32_t> got = w.index_rows();
  const std::int64_t lengths[3] = {3000, 99, 100};
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 2048; ++i)
      ASSERT_EQ(got[static_cast<std::size_t>(t) * 2048 + static_cast<std::size_t>(i)], i < lengths[t] ? i : -1)
          << "token " << t << " entry " << i;
}

TEST(SparseMlaIndexer, TopKRowRanksTiesAndNaN) {
  const float scores[] = {1.0f, 3.0f, 3.0f, -0.0f, 0.0f, NAN, -INFINITY, 3.0f, 2.0f};
  std::uint64_t keys[9];
  std::int32_t out[12];
  cpu::top_k_row(scores, 9, 12, out, keys);
  const std::int32_t want[12] = {1, 2, 7, 8, 0, 3, 4, 6, 5, -1, -1, -1};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], want[i]) << i;
  cpu::top_k_row(scores, 9, 3, out, keys);
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 2);
  EXPECT_EQ(out[2], 7);
}

TEST(SparseMlaIndexer, WavesAndThreadCountsGiveTheSameBits) {
  IndexerSetup s;
  s.requests = {{4000, 1}, {0, 1}, {2500, 3}, {700, 40}};
  s.topk = 512;
  IndexerWorkload w(s);
  auto reference_impl = make(w.params, true, 1);
  auto plan = reference_impl->plan(w.batch.md, w.key_cache.view, {});
  reference_impl->top_k(*plan, w.q.view, w.weights.view, w.key_cache.view, w.indices.view, {});
  const std::vector<std::int32_t> want = w.index_rows();
  for (int threads : {2, 3, 8})
    for (std::int64_t budget : {std::int64_t{0}, std::int64_t{4000 * 4}, std::int64_t{16 * 4000 * 4}}) {
      auto impl = make(w.params, true, threads);
      IndexerPlanOptions o;
      o.logits_bytes = budget;
      auto p = impl->plan(w.batch.md, w.key_cache.view, {}, o);
      w.poison_outputs();
      impl->top_k(*p, w.q.view, w.weights.view, w.key_cache.view, w.indices.view, {});
      EXPECT_EQ(w.index_rows(), want) << threads << " threads, budget " << budget << ": " << p->describe();
    }
  // The padding request's row selects nothing.
  for (int i = 0; i < 512; ++i) EXPECT_EQ(want[static_cast<std::size_t>(512 + i)], -1);
}

TEST(SparseMlaIndexer, UpdateRebuildsThePlanForANewBatch) {
  IndexerSetup s;
  s.requests = {{300, 1}, {50, 2}};
  s.topk = 64;
  IndexerWorkload w(s);
  IndexerSetup s2 = s;
  s2.requests = {{10, 1}};
  IndexerWorkload small(s2);
  auto impl = make(w.params);
  auto plan = impl->plan(small.batch.md, w.key_cache.view, {});
  impl->update(*plan, w.batch.md, {});
  impl->logits(*plan, w.q.view, w.weights.view, w.key_cache.view, w.logits.view, {});
  EXPECT_LT(testing::calc_diff(w.scores(), w.reference_scores()), 1e-6);
}

TEST(SparseMlaIndexer, BadInputIsRefusedNamingTheArgument) {
  IndexerSetup s;
  s.requests = {{40, 2}};
  s.topk = 16;
  IndexerWorkload w(s);
  IndexerLayerParams bad = w.params;
  bad.head_dim = 64;
  expect_value_error([&] { make(bad); }, "head_dim");
  bad = w.params;
  bad.num_heads = 0;
  expect_value_error([&] { make(bad); }, "num_heads");
  bad = w.params;
  bad.topk = 0;
  expect_value_error([&] { make(bad); }, "topk");
  auto impl = make(w.params);
  Buffer wrong_cache(ScalarType::u8, {4, 64, 128});
  expect_value_error([&] { impl->plan(w.batch.md, wrong_cache.view, {}); }, "key_cache");
  Buffer bf16_cache(ScalarType::bf16, {4, 64, 132});
  expect_value_error([&] { impl->plan(w.batch.md, bf16_cache.view, {}); }, "key_cache");
  IndexerPlanOptions o;
  o.decode_query_len = 0;
  expect_value_error([&] { impl->plan(w.batch.md, w.key_cache.view, {}, o); }, "decode_query_len");
  auto plan = impl->plan(w.batch.md, w.key_cache.view, {});
  Buffer narrow(ScalarType::f32, {2, 39});
  expect_value_error([&] { impl->logits(*plan, w.q.view, w.weights.view, w.key_cache.view, narrow.view, {}); }, "logits");
  Buffer wrong_weights(ScalarType::f16, {2, 64});
  expect_value_error([&] { impl->top_k(*plan, w.q.view, wrong_weights.view, w.key_cache.view, w.indices.view, {}); },
               "weights");
  Buffer short_rows(ScalarType::i32, {2, 15});
  expect_value_error([&] { impl->top_k(*plan, w.q.view, w.weights.view, w.key_cache.view, short_rows.view, {}); },
               "indices");
  Buffer wrong_q(ScalarType::bf16, {2, 63, 128});
  expect_value_error([&] { impl->top_k(*plan, wrong_q.view, w.weights.view, w.key_cache.view, w.indices.view, {}); }, "q");
  Buffer other_cache(ScalarType::u8, {w.batch.num_blocks + 1, 64, 132});
  expect_value_error([&] { impl->top_k(*plan, w.q.view, w.weights.view, other_cache.view, w.indices.view, {}); },
               "key_cache");
  // Indices written into the queries' memory.
  TensorView aliased = TensorView::contiguous(w.q.bytes.data(), ScalarType::i32, {2, 16});
  expect_value_error([&] { impl->top_k(*plan, w.q.view, w.weights.view, w.key_cache.view, aliased, {}); }, "overlaps");
  // A plan without slots cannot write.
  AttentionMetadata no_slots = w.batch.md;
  no_slots.slot_mapping = {};
  auto read_only = impl->plan(no_slots, w.key_cache.view, {});
  expect_value_error([&] { impl->write_cache(*read_only, w.k.view, w.key_cache.view, {}); }, "slot_mapping");
}

// Every tensor a call writes gives each element its own memory (the dense MLA kernels'
// rule): scores whose rows and index rows that share addresses are refused before anything
// is written, and so is a key cache whose tokens share addresses.
TEST(SparseMlaIndexer, WrittenTensorsWhoseElementsShareMemoryAreRefused) {
  IndexerSetup s;
  s.requests = {{40, 2}, {9, 1}};
  s.topk = 16;
  IndexerWorkload w(s);
  auto impl = make(w.params);
  auto plan = impl->plan(w.batch.md, w.key_cache.view, {});
  const std::vector<std::uint8_t> logits_before = w.logits.bytes, indices_before = w.indices.bytes;

  TensorView scores_alias = w.logits.view;  // every token's scores in one row
  scores_alias.stride[0] = 0;
  expect_value_error([&] { impl->logits(*plan, w.q.view, w.weights.view, w.key_cache.view, scores_alias, {}); },
               "logits is written, but its strides make elements share memory");
  TensorView rows_alias = w.indices.view;  // each token's row one entry after the last one's
  rows_alias.stride[0] = 1;
  expect_value_error([&] { impl->top_k(*plan, w.q.view, w.weights.view, w.key_cache.view, rows_alias, {}); },
               "indices is written, but its strides make elements share memory");
  EXPECT_EQ(w.logits.bytes, logits_before);
  EXPECT_EQ(w.indices.bytes, indices_before);

  // The key cache write's cache: every token of a block at one address.
  const std::vector<std::uint8_t> cache_before = w.key_cache.bytes;
  TensorView tokens_alias = w.key_cache.view;
  tokens_alias.stride[1] = 0;
  expect_value_error([&] { impl->write_cache(*plan, w.k.view, tokens_alias, {}); }, "key_cache blocks must be contiguous");
  EXPECT_EQ(w.key_cache.bytes, cache_before);
}

}  // namespace
}  // namespace attnsel::kernel::sparse_mla
