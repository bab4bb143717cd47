// The CPU sparse MLA attention against the double-precision reference: the fp8_ds_mla record
// (hand-built and written), the latent kernel over bf16 and fp8_ds_mla caches with -1
// scattered and trailing, rows with no entry, heads 16 to 128, index rows covering the
// sequence against the dense CPU MLA decode, the layer (absorbed) against the un-absorbed
// reference, request positions to cache rows, splits and thread counts, the indexer and the
// attention chained, and the checks of bad input.
#include <gtest/gtest.h>

#include <omp.h>

#include <cstring>
#include <limits>

#include "attnsel/errors.hpp"
#include "attnsel/mla.hpp"
#include "kernels/fp8.hpp"
#include "kernels/half.hpp"
#include "kernels/mla/cpu/cpu_mla.hpp"
#include "kernels/sparse_mla/cpu/cpu_indexer.hpp"
#include "kernels/sparse_mla/cpu/cpu_sparse_mla.hpp"
#include "kernels/sparse_mla/formats.hpp"
#include "sparse_mla_test_util.hpp"

namespace attnsel::kernel::sparse_mla {
namespace {

using testing::Buffer;
using testing::expect_value_error;
using testing::kLayerOutput;
using testing::kNegInf;
using testing::LayerCase;
using testing::Request;
using testing::SparseSetup;
using testing::SparseWorkload;
using testing::with_lse;
using Tol = mla::testing::Tolerance;

std::unique_ptr<SparseMlaImpl> make(const SparseMlaLayerParams& p, int threads = 0, bool bf16_dot = true) {
  cpu::CpuSparseMlaOptions o;
  o.num_threads = threads;
  o.allow_bf16_dot = bf16_dot;
  return cpu::make_cpu_sparse_mla_impl(p, o);
}

Tol latent_tolerance(ScalarType dtype) { return mla::testing::latent_tolerance(dtype); }

// Runs attend_latent on the workload's physical rows; returns the latent output and LSE.
std::pair<std::vector<double>, std::vector<double>> run_latent(SparseWorkload& w, const SparseMlaImpl& impl,
                                                               const StepPlan& plan) {
  w.poison_outputs();
  impl.attend_latent(plan, w.q_latent.view, w.physical_buf.view, w.cache.view, w.latent_out.view, {}, &w.lse.view);
  return {mla::testing::read(w.latent_out.view, w.batch.tokens), mla::testing::read(w.lse.view, w.batch.tokens)};
}

// --------------------------------------------------------------------------------------
// The fp8_ds_mla record

TEST(SparseMlaDsMla, HandBuiltRecordIsReadAsFlashMlaDequantisesIt) {
  SparseMlaLayerParams p;
  p.dims.num_heads = 3;
  p.scale = 0.125f;
  p.kv_cache_dtype = CacheDType::fp8_ds_mla;
  p.topk = 5;
  // One block of 4 tokens; token 2 is the record, the others NaN.
  Buffer cache(ScalarType::u8, {1, 4, 656});
  std::fill(cache.bytes.begin(), cache.bytes.end(), 0xFF);
  std::uint8_t* rec = cache.bytes.data() + 2 * 656;
  const float scales[4] = {1.0f, 0.75f, std::ldexp(1.0f, -13), 4.0f};  // 0.75: the older writer's raw scale
  for (int e = 0; e < 512; ++e) rec[e] = static_cast<std::uint8_t>((e * 37 + 11) % 64 | (e % 3 == 0 ? 0x80 : 0));
  for (int t = 0; t < 4; ++t) std::memcpy(rec + 512 + 4 * t, &scales[t], 4);
  std::vector<std::uint16_t> rope(64);
  for (int e = 0; e < 64; ++e) rope[static_cast<std::size_t>(e)] = float_to_bf16(0.01f * static_cast<float>(e - 31));
  std::memcpy(rec + 528, rope.data(), 128);

  std::vector<double> expected(576);
  for (int e = 0; e < 512; ++e)
    expected[static_cast<std::size_t>(e)] = bf16_to_float(float_to_bf16(fp8_to_float(rec[e], ScalarType::fp8_e4m3) * scales[e / 128]));
  for (int e = 0; e < 64; ++e) expected[512 + static_cast<std::size_t>(e)] = bf16_to_float(rope[static_cast<std::size_t>(e)]);
  for (int e = 0; e < 576; ++e) ASSERT_EQ(reference::latent_entry(p, cache.view, 2, e), expected[static_cast<std::size_t>(e)]) << e;

  // One query token whose row holds only that record: its output is the record's latent.
  std::vector<std::int32_t> qsl{0, 1}, lens{4}, table{0};
  std::vector<std::int64_t> slots{-1};
  AttentionMetadata md;
  md.num_seqs = 1;
  md.num_actual_tokens = 1;
  md.query_start_loc = qsl;
  md.seq_lens = lens;
  md.block_table = table;
  md.max_blocks_per_seq = 1;
  md.slot_mapping = slots;
  md.max_query_len = 1;
  md.max_seq_len = 4;
  Buffer q(ScalarType::bf16, {1, 3, 576}), out(ScalarType::bf16, {1, 3, 512}), lse(ScalarType::f32, {1, 3});
  for (int i = 0; i < 3 * 576; ++i) kernel::reference::store(q.bytes.data(), ScalarType::bf16, i, 0.01 * ((i * 7) % 13 - 6));
  Buffer rows(ScalarType::i32, {1, 5});
  const std::int32_t row[5] = {-1, 2, -1, -1, -1};
  std::memcpy(rows.bytes.data(), row, sizeof(row));
  out.poison();
  auto impl = make(p);
  auto plan = impl->plan(md, cache.view, {}, with_lse());
  impl->attend_latent(*plan, q.view, rows.view, cache.view, out.view, {}, &lse.view);
  for (int n = 0; n < 3; ++n) {
    for (int e = 0; e < 512; ++e)
      ASSERT_EQ(kernel::reference::load(out.bytes.data(), ScalarType::bf16, n * 512 + e), expected[static_cast<std::size_t>(e)])
          << "head " << n << " entry " << e;
    double logit = 0.0;
    for (int e = 0; e < 576; ++e) logit += kernel::reference::load(q.bytes.data(), ScalarType::bf16, n * 576 + e) * expected[static_cast<std::size_t>(e)];
    // One key: the LSE is its logit.
    EXPECT_NEAR(reinterpret_cast<const float*>(lse.bytes.data())[n], 0.125 * logit, 1e-5 * std::max(1.0, std::abs(logit)));
  }
}

TEST(SparseMlaDsMla, WriterUsesPowerOfTwoTileScales) {
  SparseSetup s;
  s.kv_cache_dtype = CacheDType::fp8_ds_mla;
  s.requests = {{3, 2}};
  SparseWorkload w(s);
  // Token 0: tiles 0-2 with amax 336 (scale 1), tile 3 all zeros (scale 2^-13).
  auto* c = reinterpret_cast<std::uint16_t*>(w.kv_c.bytes.data());
  for (int e = 0; e < 512; ++e) c[e] = float_to_bf16(e >= 384 ? 0.0f : (e % 128 == 5 ? -336.0f : 0.5f * static_cast<float>(e % 97) - 20.0f));
  auto impl = make(w.params);
  auto plan = impl->plan(w.batch.md, w.cache.view, {}, {});
  impl->write_cache(*plan, w.kv_c.view, w.k_pe.view, w.cache.view, {});
  const std::uint8_t* rec = w.cache.bytes.data() + w.batch.slot_of(0, 1) * 656;
  float scales[4];
  std::memcpy(scales, rec + 512, 16);
  EXPECT_EQ(scales[0], 1.0f);
  EXPECT_EQ(scales[1], 1.0f);
  EXPECT_EQ(scales[2], 1.0f);
  EXPECT_EQ(scales[3], std::ldexp(1.0f, -13));
  for (int e = 0; e < 512; ++e)
    ASSERT_EQ(rec[e], float_to_fp8(bf16_to_float(c[e]), ScalarType::fp8_e4m3)) << e;  // x / 1 (and 0 / 2^-13)
  EXPECT_EQ(std::memcmp(rec + 528, w.k_pe.bytes.data(), 128), 0);  // the rope key verbatim

  // Random latents: the reference writer's bytes.
  SparseWorkload r(s);
  Buffer mine(ScalarType::u8, {r.batch.num_blocks, 64, 656}), theirs(ScalarType::u8, {r.batch.num_blocks, 64, 656});
  std::fill(mine.bytes.begin(), mine.bytes.end(), 0x11);
  std::fill(theirs.bytes.begin(), theirs.bytes.end(), 0x11);
  auto p2 = impl->plan(r.batch.md, mine.view, {}, {});
  impl->write_cache(*p2, r.kv_c.view, r.k_pe.view, mine.view, {});
  reference::write_latent(r.params, r.kv_c.view, r.k_pe.view, theirs.view, r.batch.slot_mapping, r.batch.tokens);
  EXPECT_EQ(mine.bytes, theirs.bytes);
}

TEST(SparseMlaDsMla, BF16CacheWriteIsACopyAndSkipsPadding) {
  SparseSetup s;
  s.requests = {{5, 3}, {2, 2}};
  SparseWorkload w(s);
  w.batch.slot_mapping[1] = -1;
  w.batch.bind();
  Buffer mine(ScalarType::bf16, {w.batch.num_blocks, 64, 576}), theirs(ScalarType::bf16, {w.batch.num_blocks, 64, 576});
  std::fill(mine.bytes.begin(), mine.bytes.end(), 0x22);
  std::fill(theirs.bytes.begin(), theirs.bytes.end(), 0x22);
  auto impl = make(w.params);
  auto plan = impl->plan(w.batch.md, mine.view, {}, {});
  impl->write_cache(*plan, w.kv_c.view, w.k_pe.view, mine.view, {});
  reference::write_latent(w.params, w.kv_c.view, w.k_pe.view, theirs.view, w.batch.slot_mapping, w.batch.tokens);
  EXPECT_EQ(mine.bytes, theirs.bytes);
}

// --------------------------------------------------------------------------------------
// The latent kernel

struct LatentCase {
  int heads, block, topk;
  ScalarType dtype;
  CacheDType kv;
  std::vector<Request> requests;
};

class SparseMlaLatent : public ::testing::TestWithParam<LatentCase> {};

TEST_P(SparseMlaLatent, MatchesTheReference) {
  const LatentCase& c = GetParam();
  SparseSetup s;
  s.heads = c.heads;
  s.block_size = c.block;
  s.topk = c.topk;
  s.dtype = c.dtype;
  s.kv_cache_dtype = c.kv;
  s.requests = c.requests;
  SparseWorkload w(s);
  // Token 0's row: all -1.
  std::vector<std::int32_t> rows = w.physical;
  std::fill(rows.begin(), rows.begin() + c.topk, -1);
  w.set_physical(rows);
  for (int threads : {0, 1, 3}) {
    auto impl = make(w.params, threads);
    auto plan = impl->plan(w.batch.md, w.cache.view, {}, with_lse());
    const auto [out, lse] = run_latent(w, *impl, *plan);
    const reference::Result ref = w.latent_reference();
    EXPECT_EQ(mla::testing::compare(out, ref.out, latent_tolerance(c.dtype)), "") << describe(s) << ", " << plan->describe();
    EXPECT_EQ(mla::testing::compare(lse, ref.lse, mla::testing::lse_tolerance(c.dtype)), "") << describe(s);
    for (int i = 0; i < c.heads; ++i) {
      EXPECT_EQ(lse[static_cast<std::size_t>(i)], kNegInf) << "an all -1 row's LSE";
      for (int e = 0; e < 512; ++e) ASSERT_EQ(out[static_cast<std::size_t>(i) * 512 + static_cast<std::size_t>(e)], 0.0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SparseMlaLatent,
    ::testing::Values(LatentCase{16, 64, 64, ScalarType::bf16, CacheDType::auto_, {{1, 1}, {200, 1}, {70, 1}}},
                      LatentCase{32, 64, 128, ScalarType::bf16, CacheDType::fp8_ds_mla, {{300, 1}, {64, 2}}},
                      LatentCase{64, 61, 97, ScalarType::bf16, CacheDType::auto_, {{150, 4}, {3, 1}}},
                      LatentCase{128, 64, 64, ScalarType::bf16, CacheDType::fp8_ds_mla, {{90, 1}, {40, 1}}},
                      LatentCase{128, 16, 300, ScalarType::bf16, CacheDType::auto_, {{700, 1}}},
                      LatentCase{16, 64, 600, ScalarType::bf16, CacheDType::fp8_ds_mla, {{2000, 1}, {33, 1}}},
                      // Rows longer than one dequantised chunk (2048): folded chunk by chunk.
                      LatentCase{16, 64, 2500, ScalarType::bf16, CacheDType::fp8_ds_mla, {{3000, 1}}},
                      LatentCase{7, 5, 41, ScalarType::f32, CacheDType::auto_, {{60, 2}, {9, 1}}},
                      LatentCase{12, 64, 50, ScalarType::f16, CacheDType::float16, {{80, 1}}}));

TEST(SparseMlaLatentKernel, FP32ProductsMatchTheReferenceToo) {
  SparseSetup s;
  s.heads = 16;
  s.topk = 80;
  s.kv_cache_dtype = CacheDType::fp8_ds_mla;
  s.requests = {{100, 1}, {50, 1}};
  SparseWorkload w(s);
  auto impl = make(w.params, 0, false);
  auto plan = impl->plan(w.batch.md, w.cache.view, {}, with_lse());
  const auto [out, lse] = run_latent(w, *impl, *plan);
  const reference::Result ref = w.latent_reference();
  EXPECT_EQ(mla::testing::compare(out, ref.out, mla::testing::kLatentHalf), "");
}

TEST(SparseMlaLatentKernel, RawScaleRecordsAreReadCorrectly) {
  // The older vLLM writer stored max(amax / 448, FLT_MIN) as is: scales that are not powers of two.
  SparseSetup s;
  s.heads = 16;
  s.topk = 300;
  s.kv_cache_dtype = CacheDType::fp8_ds_mla;
  s.requests = {{400, 1}, {257, 2}};
  SparseWorkload w(s);
  for (int seq = 0; seq < 2; ++seq)
    for (int pos = 0; pos < w.batch.seq_lens[static_cast<std::size_t>(seq)]; pos += 3) {
      std::uint8_t* rec = w.cache.bytes.data() + w.batch.slot_of(seq, pos) * 656;
      for (int t = 0; t < 4; ++t) {
        float scale = 0.0f;
        std::memcpy(&scale, rec + 512 + 4 * t, 4);
        scale *= t == 2 ? 0.75f : 1.3f;
        std::memcpy(rec + 512 + 4 * t, &scale, 4);
      }
    }
  auto impl = make(w.params);
  auto plan = impl->plan(w.batch.md, w.cache.view, {}, with_lse());
  const auto [out, lse] = run_latent(w, *impl, *plan);
  const reference::Result ref = w.latent_reference();
  EXPECT_EQ(mla::testing::compare(out, ref.out, mla::testing::kLatentHalf), "");
  EXPECT_EQ(mla::testing::compare(lse, ref.lse, mla::testing::kLse), "");
}

TEST(SparseMlaLatentKernel, RowsCoveringTheSequenceEqualDenseDecode) {
  for (int heads : {16, 128}) {
    SparseSetup s;
    s.heads = heads;
    s.topk = 512;
    s.invalid = 0.0;
    s.trailing = 0;
    s.requests = {{300, 1}, {512, 1}, {37, 4}, {129, 2}};  // k >= L for every row
    SparseWorkload w(s);
    auto impl = make(w.params);
    auto plan = impl->plan(w.batch.md, w.cache.view, {}, with_lse());
    const auto [sparse_out, sparse_lse] = run_latent(w, *impl, *plan);

    MlaLayerParams dense;
    dense.dims.num_heads = heads;
    dense.dtype = ScalarType::bf16;
    dense.scale = w.params.scale;
    auto mla = mla::cpu::make_cpu_mla_impl(dense);
    MlaPlanOptions o;
    o.decode_query_len = 4;
    o.lse = true;
    auto dense_plan = mla->plan(w.batch.md, w.cache.view, {}, o);
    Buffer out(ScalarType::bf16, {w.batch.tokens, heads, 512}), lse(ScalarType::f32, {w.batch.tokens, heads});
    mla->decode_latent(*dense_plan, w.q_latent.view, w.cache.view, out.view, {}, &lse.view);
    const std::vector<double> dense_out = mla::testing::read(out.view, w.batch.tokens),
                              dense_lse = mla::testing::read(lse.view, w.batch.tokens);
    EXPECT_EQ(mla::testing::compare(sparse_out, dense_out, mla::testing::kLatentHalf), "") << heads << " heads";
    EXPECT_EQ(mla::testing::compare(sparse_lse, dense_lse, mla::testing::kLse), "") << heads << " heads";
    const reference::Result ref = w.latent_reference();
    EXPECT_EQ(mla::testing::compare(sparse_out, ref.out, mla::testing::kLatentHalf), "");
  }
}

TEST(SparseMlaLatentKernel, APlanGivesTheSameBitsOnAnyTeamAndSplitsAgree) {
  SparseSetup s;
  s.heads = 16;
  s.topk = 2048;
  s.requests = {{3000, 1}, {2100, 1}};
  for (CacheDType kv : {CacheDType::auto_, CacheDType::fp8_ds_mla}) {
    s.kv_cache_dtype = kv;
    SparseWorkload w(s);
    auto split_impl = make(w.params, 7);  // 7 cores: split the 2 tokens' rows
    auto plan = split_impl->plan(w.batch.md, w.cache.view, {}, with_lse());
    ASSERT_NE(plan->describe().find(", 2 split groups"), std::string::npos) << plan->describe();
    const int team = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one = run_latent(w, *split_impl, *plan);
    omp_set_num_threads(std::max(team, 2));
    const auto many = run_latent(w, *split_impl, *plan);
    omp_set_num_threads(team);
    EXPECT_EQ(one.first, many.first);
    EXPECT_EQ(one.second, many.second);
    auto unsplit = make(w.params, 1);
    auto plan1 = unsplit->plan(w.batch.md, w.cache.view, {}, with_lse());
    const auto single = run_latent(w, *unsplit, *plan1);
    EXPECT_EQ(mla::testing::compare(single.first, many.first, mla::testing::kLatentHalf), "");
    EXPECT_EQ(mla::testing::compare(single.second, many.second, Tol{1e-5, 1e-5, 0.0}), "");
  }
}

TEST(SparseMlaLatentKernel, BatchInvariantLayersDoNotSplit) {
  SparseSetup s;
  s.topk = 2048;
  s.requests = {{3000, 1}};
  SparseWorkload w(s);
  w.params.batch_invariant = true;
  auto impl = make(w.params, 16);
  auto plan = impl->plan(w.batch.md, w.cache.view, {}, with_lse());
  EXPECT_NE(plan->describe().find(", 0 split groups"), std::string::npos) << plan->describe();
}

// --------------------------------------------------------------------------------------
// The layer, request positions and the chain

TEST(SparseMlaIndices, RequestPositionsBecomeCacheRows) {
  SparseSetup s;
  s.block_size = 16;
  s.topk = 40;
  s.requests = {{33, 1}, {70, 2}, {0, 1}};
  SparseWorkload w(s);
  // Add positions past each request's length and past its block table: -1.
  std::vector<std::int32_t> local = w.local;
  local[5] = 33;                             // request 0 holds 33 positions
  local[6] = w.batch.md.max_blocks_per_seq * 16 + 3;  // past the block table
  local[7] = -7;
  Buffer in = w.indices_buffer(local), out(ScalarType::i32, {w.batch.tokens + 2, 40});
  SparseMlaPlanOptions o;
  o.decode_query_len = 2;
  auto impl = make(w.params);
  auto plan = impl->plan(w.batch.md, w.cache.view, {}, o);
  impl->physical_indices(*plan, in.view, out.view, {});
  const std::vector<std::int32_t> want = reference::physical_indices(w.batch.md, 16, local, 40);
  for (int t = 0; t < w.batch.tokens; ++t)
    for (int k = 0; k < 40; ++k) {
      const std::size_t i = static_cast<std::size_t>(t) * 40 + static_cast<std::size_t>(k);
      ASSERT_EQ(reinterpret_cast<const std::int32_t*>(out.bytes.data())[i], want[i]) << t << ", " << k;
      const std::int32_t p = local[i];
      const int seq = w.batch.seq_of(t);
      const std::int32_t expected = p >= 0 && p < w.batch.seq_lens[static_cast<std::size_t>(seq)]
                                        ? static_cast<std::int32_t>(w.batch.slot_of(seq, p))
                                        : -1;
      ASSERT_EQ(want[i], expected);
    }
  EXPECT_EQ(want[5], -1);
  EXPECT_EQ(want[6], -1);
  EXPECT_EQ(want[7], -1);
}

class SparseMlaLayer : public ::testing::TestWithParam<LayerCase> {};

TEST_P(SparseMlaLayer, MatchesTheUnabsorbedReference) {
  const LayerCase& c = GetParam();
  SparseSetup s;
  s.heads = c.heads;
  s.kv_cache_dtype = c.kv;
  s.requests = c.requests;
  s.topk = c.topk;
  s.block_size = 32;
  SparseWorkload w(s);
  SparseMlaPlanOptions o;
  o.decode_query_len = 4;
  auto impl = make(w.params);
  auto plan = impl->plan(w.batch.md, w.cache.view, {}, o);
  impl->execute(*plan, w.q.view, w.local_buf.view, w.cache.view, w.output.view, {});
  const std::vector<double> got = mla::testing::read(w.output.view, w.batch.tokens);
  EXPECT_EQ(mla::testing::compare(got, w.reference().out, kLayerOutput), "") << describe(s);
  // The rows past the batch are not written.
  EXPECT_TRUE(std::isnan(kernel::reference::load(w.output.bytes.data(), ScalarType::bf16,
                                                 static_cast<std::int64_t>(w.batch.tokens) * c.heads * 128)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SparseMlaLayer,
                         ::testing::Values(LayerCase{16, CacheDType::auto_, {{100, 1}, {37, 3}}, 48},
                                           LayerCase{16, CacheDType::fp8_ds_mla, {{80, 2}, {5, 1}}, 40},
                                           LayerCase{32, CacheDType::fp8_ds_mla, {{65, 1}}, 64},
                                           LayerCase{3, CacheDType::auto_, {{50, 4}, {20, 20}}, 24}));

TEST(SparseMlaChain, IndexerThenAttentionMatchesTheReferenceChain) {
  const std::vector<Request> requests = {{900, 1}, {300, 2}, {40, 1}};
  testing::IndexerSetup is;
  is.requests = requests;
  is.topk = 256;
  testing::IndexerWorkload iw(is);
  SparseSetup s;
  s.heads = 16;
  s.topk = 256;
  s.kv_cache_dtype = CacheDType::fp8_ds_mla;
  s.requests = requests;
  s.seed = 7;  // another block table than the indexer's cache
  SparseWorkload w(s);
  IndexerPlanOptions io;
  io.decode_query_len = 2;
  auto indexer = cpu::make_cpu_indexer_impl(iw.params);
  auto iplan = indexer->plan(iw.batch.md, iw.key_cache.view, {}, io);
  indexer->top_k(*iplan, iw.q.view, iw.weights.view, iw.key_cache.view, iw.indices.view, {});
  const std::vector<std::int32_t> local = iw.index_rows();
  SparseMlaPlanOptions o;
  o.decode_query_len = 2;
  auto impl = make(w.params);
  auto plan = impl->plan(w.batch.md, w.cache.view, {}, o);
  impl->execute(*plan, w.q.view, iw.indices.view, w.cache.view, w.output.view, {});
  const std::vector<std::int32_t> rows = reference::physical_indices(w.batch.md, s.block_size, local, s.topk);
  const reference::Result ref = reference::attend(w.params, w.q.view, rows, w.cache.view, w.batch.tokens);
  EXPECT_EQ(mla::testing::compare(mla::testing::read(w.output.view, w.batch.tokens), ref.out, kLayerOutput), "");
  // Rows shorter than top-k hold every position they see: 40 of request 2's 256 entries.
  EXPECT_EQ(std::count(local.begin() + 3 * 256, local.begin() + 4 * 256, -1), 256 - 40);
}

TEST(SparseMlaLayerChecks, BadInputIsRefusedBeforeAnythingIsWritten) {
  SparseSetup s;
  s.requests = {{40, 1}, {30, 1}};
  s.topk = 32;
  SparseWorkload w(s);
  auto impl = make(w.params);
  auto plan = impl->plan(w.batch.md, w.cache.view, {}, with_lse());
  std::vector<std::int32_t> rows = w.physical;
  rows[35] = w.batch.num_blocks * 64;
  Buffer bad = w.indices_buffer(rows);
  w.poison_outputs();
  expect_value_error([&] { impl->attend_latent(*plan, w.q_latent.view, bad.view, w.cache.view, w.latent_out.view, {}, &w.lse.view); },
               "indices[1][3]");
  rows[35] = -2;
  Buffer negative = w.indices_buffer(rows);
  expect_value_error([&] { impl->attend_latent(*plan, w.q_latent.view, negative.view, w.cache.view, w.latent_out.view, {}); },
               "indices[1][3] = -2");
  EXPECT_TRUE(std::isnan(kernel::reference::load(w.latent_out.bytes.data(), ScalarType::bf16, 0)));  // untouched

  SparseMlaLayerParams p = w.params;
  p.dtype = ScalarType::f16;
  p.kv_b_proj = {};
  p.kv_cache_dtype = CacheDType::fp8_ds_mla;
  expect_value_error([&] { make(p); }, "fp8_ds_mla");
  p = w.params;
  p.kv_cache_dtype = CacheDType::fp8;
  expect_value_error([&] { make(p); }, "fp8_ds_mla");
  p = w.params;
  p.topk = 0;
  expect_value_error([&] { make(p); }, "topk");
  p = w.params;
  p.dims.kv_lora_rank = 256;
  p.kv_b_proj = {};
  expect_value_error([&] { make(p); }, "kv_lora_rank");
  // Blocks with padding between them: a physical row would not address a token.
  std::vector<std::uint16_t> padded(static_cast<std::size_t>(w.batch.num_blocks) * (64 * 576 + 64));
  const std::int64_t shape[3] = {w.batch.num_blocks, 64, 576}, strides[3] = {64 * 576 + 64, 576, 1};
  const TensorView gap = TensorView::strided(padded.data(), ScalarType::bf16, shape, strides);
  expect_value_error([&] { impl->plan(w.batch.md, gap, {}, {}); }, "packed");
  auto no_lse = impl->plan(w.batch.md, w.cache.view, {}, {});
  expect_value_error([&] { impl->attend_latent(*no_lse, w.q_latent.view, w.physical_buf.view, w.cache.view, w.latent_out.view, {}, &w.lse.view); },
               "SparseMlaPlanOptions::lse");
  Buffer short_rows(ScalarType::i32, {2, 31});
  expect_value_error([&] { impl->execute(*plan, w.q.view, short_rows.view, w.cache.view, w.output.view, {}); }, "indices");
  SparseMlaLayerParams latent_only = w.params;
  latent_only.kv_b_proj = {};
  auto lonely = make(latent_only);
  auto lonely_plan = lonely->plan(w.batch.md, w.cache.view, {}, {});
  expect_value_error([&] { lonely->execute(*lonely_plan, w.q.view, w.local_buf.view, w.cache.view, w.output.view, {}); },
               "kv_b_proj");
  MlaLayerParams dense;
  dense.dims.num_heads = w.params.dims.num_heads;
  dense.scale = w.params.scale;
  auto mla = mla::cpu::make_cpu_mla_impl(dense);
  auto dense_plan = mla->plan(w.batch.md, w.cache.view, {}, {});
  expect_value_error([&] { impl->attend_latent(*dense_plan, w.q_latent.view, w.physical_buf.view, w.cache.view, w.latent_out.view, {}); },
               "not made by a CPU sparse MLA");
}

// Every tensor a call writes gives each element its own memory (the dense MLA kernels'
// rule): an output whose heads, a latent output whose rows, an lse whose rows and physical
// index rows that share addresses are refused before anything is written, and so is a cache
// whose tokens overlap.
TEST(SparseMlaLayerChecks, WrittenTensorsWhoseElementsShareMemoryAreRefused) {
  SparseSetup s;
  s.requests = {{40, 1}, {30, 2}};
  s.topk = 32;
  SparseWorkload w(s);
  auto impl = make(w.params);
  SparseMlaPlanOptions o = with_lse();
  o.decode_query_len = 2;
  auto plan = impl->plan(w.batch.md, w.cache.view, {}, o);
  w.poison_outputs();

  TensorView heads_alias = w.output.view;  // every head of a token at one address
  heads_alias.stride[1] = 0;
  expect_value_error([&] { impl->execute(*plan, w.q.view, w.local_buf.view, w.cache.view, heads_alias, {}); },
               "output is written, but its strides make elements share memory");
  TensorView rows_alias = w.latent_out.view;  // tokens interleaved with the heads of the one before
  rows_alias.stride[0] = rows_alias.stride[1];
  expect_value_error([&] { impl->attend_latent(*plan, w.q_latent.view, w.physical_buf.view, w.cache.view, rows_alias, {}, &w.lse.view); },
               "out is written, but its strides make elements share memory");
  TensorView lse_alias = w.lse.view;  // each token's row one element after the last one's
  lse_alias.stride[0] = 1;
  expect_value_error([&] { impl->attend_latent(*plan, w.q_latent.view, w.physical_buf.view, w.cache.view, w.latent_out.view, {}, &lse_alias); },
               "lse is written, but its strides make elements share memory");
  for (const Buffer* b : {&w.output, &w.latent_out, &w.lse})
    for (std::size_t i = 0; i < b->bytes.size() / element_size(b->view.dtype); ++i)
      ASSERT_TRUE(std::isnan(kernel::reference::load(b->bytes.data(), b->view.dtype, static_cast<std::int64_t>(i))));

  Buffer physical = w.indices_buffer(w.local);
  const std::vector<std::uint8_t> physical_before = physical.bytes;
  TensorView index_rows_alias = physical.view;  // each token's row one entry after the last one's
  index_rows_alias.stride[0] = 1;
  expect_value_error([&] { impl->physical_indices(*plan, w.local_buf.view, index_rows_alias, {}); },
               "physical is written, but its strides make elements share memory");
  EXPECT_EQ(physical.bytes, physical_before);

  // The cache write's cache: token rows that overlap their neighbours.
  const std::vector<std::uint8_t> cache_before = w.cache.bytes;
  TensorView tokens_alias = w.cache.view;
  tokens_alias.stride[1] = 64;
  expect_value_error([&] { impl->write_cache(*plan, w.kv_c.view, w.k_pe.view, tokens_alias, {}); }, "cache rows overlap");
  EXPECT_EQ(w.cache.bytes, cache_before);
}

}  // namespace
}  // namespace attnsel::kernel::sparse_mla
