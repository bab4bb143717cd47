// The lightning indexer on the GPU against the double-precision reference: the key cache's
// bytes (keys far from and near 1, so scales far from 1; odd block sizes; padding slots),
// the scores on the dequantised fp8 values (DeepGEMM's calc_diff < 1e-3 and an elementwise
// bound; causal, MTP and padding rows; −inf past each row), the top-k (the reference's top-k
// of the kernel's own scores exactly, at lengths around index_topk; constant scores take the
// lowest positions first; waves), and the host checks. Outputs start poisoned on the device.
// Suites named *Gpu* skip without a GPU the kernels run on (compute capability 8.x or 9.x).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "attnsel/sparse_mla.hpp"
#include "gpu_test_util.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/sparse_mla/cuda/sparse_mla_cuda.hpp"
#include "sparse_mla_test_util.hpp"

namespace attnsel::kernel::sparse_mla {
namespace {

using testing::Buffer;
using testing::expect_top_k_of_scores;
using testing::IndexerSetup;
using testing::IndexerWorkload;
using testing::kNegInf;
using testing::Request;

std::unique_ptr<IndexerImpl> make_gpu(const IndexerLayerParams& p) {
  return cuda::sparse_mla::make_cuda_indexer_impl(p);
}

/// The workload's tensors on the device; results are copied back into the workload's buffers.
struct DeviceIndexer {
  cuda::DeviceTensor q, weights, k, key_cache, logits, indices;
  explicit DeviceIndexer(const IndexerWorkload& w)
      : q(cuda::to_device(w.q.view)),
        weights(cuda::to_device(w.weights.view)),
        k(cuda::to_device(w.k.view)),
        key_cache(cuda::to_device(w.key_cache.view)),
        logits(cuda::to_device(w.logits.view)),
        indices(cuda::to_device(w.indices.view)) {}
  void logits_to(IndexerWorkload& w) const {
    cuda::synchronize("indexer");
    cuda::copy_to_host(logits, w.logits.view);
  }
  void indices_to(IndexerWorkload& w) const {
    cuda::synchronize("indexer");
    cuda::copy_to_host(indices, w.indices.view);
  }
};

// --------------------------------------------------------------------------------------
// The key cache

TEST(SparseMlaIndexerCacheGpu, WritesTheReferenceWritersBytes) {
  REQUIRE_SPARSE_GPU();
  for (ScalarType dtype : {ScalarType::bf16, ScalarType::f16, ScalarType::f32})
    for (int block : {64, 7})
      for (double sigma : {1.0, 30.0, 0.001}) {
        IndexerSetup s;
        s.dtype = dtype;
        s.block_size = block;
        s.requests = {{70, 3}, {1, 1}, {130, 5}};
        s.k_sigma = sigma;
        IndexerWorkload w(s);
        w.batch.slot_mapping[1] = -1;  // padding slots in the middle: skipped
        w.batch.slot_mapping[4] = -1;
        w.batch.bind();
        Buffer got(ScalarType::u8, {w.batch.num_blocks, block, 132});
        std::fill(got.bytes.begin(), got.bytes.end(), 0x3C);
        Buffer want(ScalarType::u8, {w.batch.num_blocks, block, 132});
        want.bytes = got.bytes;
        reference::write_keys(w.params, w.k.view, want.view, w.batch.slot_mapping, w.batch.tokens);
        DeviceIndexer d(w);
        cuda::DeviceTensor cache = cuda::to_device(got.view);
        auto impl = make_gpu(w.params);
        auto plan = impl->plan(w.batch.md, cache.view, {});
        impl->write_cache(*plan, d.k.view, cache.view, {});
        cuda::synchronize("indexer cache write");
        cuda::copy_to_host(cache, got.view);
        EXPECT_EQ(got.bytes, want.bytes) << to_string(dtype) << ", block " << block << ", keys ~ N(0, " << sigma
                                         << "²)";
      }
}

// --------------------------------------------------------------------------------------
// The scores

struct LogitsGpuCase {
  int heads, block;
  ScalarType dtype, weights_dtype;
  std::vector<Request> requests;
  double q_sigma = 1.0, k_sigma = 1.0;
};

class SparseMlaIndexerLogitsGpu : public ::testing::TestWithParam<LogitsGpuCase> {};

TEST_P(SparseMlaIndexerLogitsGpu, MatchTheReferenceOnTheDequantisedValues) {
  REQUIRE_SPARSE_GPU();
  const LogitsGpuCase& c = GetParam();
  IndexerSetup s;
  s.heads = c.heads;
  s.block_size = c.block;
  s.dtype = c.dtype;
  s.weights_dtype = c.weights_dtype;
  s.requests = c.requests;
  s.q_sigma = c.q_sigma;
  s.k_sigma = c.k_sigma;
  s.topk = 37;
  IndexerWorkload w(s);
  DeviceIndexer d(w);
  auto impl = make_gpu(w.params);
  auto plan = impl->plan(w.batch.md, d.key_cache.view, {});
  impl->logits(*plan, d.q.view, d.weights.view, d.key_cache.view, d.logits.view, {});
  d.logits_to(w);
  const std::vector<double> got = w.scores(), ref = w.reference_scores();
  EXPECT_LT(testing::calc_diff(got, ref), 1e-3) << describe(s);
  double worst = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i])) {
      ASSERT_EQ(got[i], kNegInf) << "cell " << i << " past its row's positions, " << describe(s);
      continue;
    }
    ASSERT_TRUE(std::isfinite(got[i])) << "cell " << i << ", " << describe(s);
    // The floor scales with the scores' magnitude (q · k), 1e-3 at unit scales as on the CPU.
    worst = std::max(worst, std::abs(got[i] - ref[i]) / (std::abs(ref[i]) + 1e-3 * c.q_sigma * c.k_sigma));
  }
  // The products of e4m3 values are exact; only the fp32 sums round.
  EXPECT_LT(worst, 1e-4) << describe(s);
  // The rows past the batch are not written (still poisoned).
  EXPECT_TRUE(std::isnan(reinterpret_cast<const float*>(w.logits.bytes.data())[w.batch.tokens * w.width]));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SparseMlaIndexerLogitsGpu,
    ::testing::Values(LogitsGpuCase{64, 64, ScalarType::bf16, ScalarType::f32, {{1, 1}, {200, 1}, {67, 1}}},
                      // MTP rows: 2, 3 and 4 query tokens per request.
                      LogitsGpuCase{64, 64, ScalarType::bf16, ScalarType::bf16, {{131, 2}, {70, 3}, {4, 4}}},
                      // A padding request (seq_len 0) among decodes; odd block sizes.
                      LogitsGpuCase{64, 61, ScalarType::bf16, ScalarType::f32, {{257, 1}, {0, 1}, {3, 1}}},
                      LogitsGpuCase{17, 7, ScalarType::f32, ScalarType::f32, {{97, 2}, {5, 1}}},
                      LogitsGpuCase{1, 16, ScalarType::f16, ScalarType::f16, {{33, 1}, {129, 3}}},
                      LogitsGpuCase{128, 64, ScalarType::bf16, ScalarType::f32, {{300, 1}, {90, 2}}},
                      // Prefill: many query tokens, with context.
                      LogitsGpuCase{64, 64, ScalarType::bf16, ScalarType::f32, {{5000, 37}, {23, 23}}},
                      // Key and query scales far from 1.
                      LogitsGpuCase{64, 64, ScalarType::bf16, ScalarType::f32, {{700, 2}}, 40.0, 0.002},
                      LogitsGpuCase{64, 64, ScalarType::bf16, ScalarType::f32, {{700, 2}}, 0.01, 50.0}));

// --------------------------------------------------------------------------------------
// The top-k

TEST(SparseMlaIndexerTopKGpu, IsTheOrderOfItsScoresAroundIndexTopk) {
  REQUIRE_SPARSE_GPU();
  for (int L : {1, 2047, 2048, 2049, 4099}) {
    IndexerSetup s;
    s.requests = {{L, 1}, {L + 1, 2}};  // rows of L, L and L + 1 positions
    s.topk = 2048;
    IndexerWorkload w(s);
    DeviceIndexer d(w);
    auto impl = make_gpu(w.params);
    IndexerPlanOptions o;
    o.decode_query_len = 2;
    auto plan = impl->plan(w.batch.md, d.key_cache.view, {}, o);
    impl->logits(*plan, d.q.view, d.weights.view, d.key_cache.view, d.logits.view, {});
    impl->top_k(*plan, d.q.view, d.weights.view, d.key_cache.view, d.indices.view, {});
    d.logits_to(w);
    d.indices_to(w);
    const std::vector<std::int32_t> got = w.index_rows();
    expect_top_k_of_scores(w, got, fmt::format("L = {}", L));
    // The chosen set is the reference's top-k up to scores closer than the kernel's rounding.
    const std::vector<std::int64_t> lengths = reference::row_lengths(w.batch.md);
    const std::vector<double> ref = w.reference_scores();
    for (int t = 0; t < w.batch.tokens; ++t) {
      const std::int64_t n = lengths[static_cast<std::size_t>(t)];
      if (n <= 2048) continue;
      std::vector<char> chosen(static_cast<std::size_t>(n), 0);
      for (int i = 0; i < 2048; ++i) chosen[static_cast<std::size_t>(got[static_cast<std::size_t>(t) * 2048 + i])] = 1;
      double lowest_chosen = INFINITY, highest_left = -INFINITY;
      for (std::int64_t p = 0; p < n; ++p) {
        const double r = ref[static_cast<std::size_t>(t * w.width + p)];
        if (chosen[static_cast<std::size_t>(p)])
          lowest_chosen = std::min(lowest_chosen, r);
        else
          highest_left = std::max(highest_left, r);
      }
      EXPECT_GE(lowest_chosen, highest_left - 1e-5 * std::abs(highest_left) - 1e-6) << "L " << L << " token " << t;
    }
  }
}

TEST(SparseMlaIndexerTopKGpu, ConstantScoresSelectTheLowestPositionsFirst) {
  REQUIRE_SPARSE_GPU();
  IndexerSetup s;
  s.requests = {{3000, 1}, {100, 2}};
  s.topk = 2048;
  IndexerWorkload w(s);
  std::fill(w.weights.bytes.begin(), w.weights.bytes.end(), 0);  // every score 0
  DeviceIndexer d(w);
  auto impl = make_gpu(w.params);
  IndexerPlanOptions o;
  o.decode_query_len = 2;
  auto plan = impl->plan(w.batch.md, d.key_cache.view, {}, o);
  impl->top_k(*plan, d.q.view, d.weights.view, d.key_cache.view, d.indices.view, {});
  d.indices_to(w);
  const std::vector<std::int32_t> got = w.index_rows();
  const std::int64_t lengths[3] = {3000, 99, 100};
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 2048; ++i)
      ASSERT_EQ(got[static_cast<std::size_t>(t) * 2048 + static_cast<std::size_t>(i)], i < lengths[t] ? i : -1)
          << "token " << t << " entry " << i;
}

TEST(SparseMlaIndexerTopKGpu, TiesAtTheThresholdTakeTheLowestPositions) {
  REQUIRE_SPARSE_GPU();
  // Every key the same, except a few positions whose keys are zero (score 0, below the
  // others): the k highest are all ties, so the lowest positions among the non-zero keys
  // win, highest score first.
  IndexerSetup s;
  s.requests = {{600, 1}};
  s.topk = 256;
  IndexerWorkload w(s);
  const std::int64_t B = s.block_size;
  std::vector<std::uint8_t> key(132, 0);
  for (int i = 0; i < 128; ++i) key[static_cast<std::size_t>(i)] = 0x38;  // 1.0 in e4m3
  const float one = 1.0f;
  for (std::int64_t pos = 0; pos < 600; ++pos) {
    const std::int64_t slot = w.batch.slot_of(0, pos);
    std::uint8_t* block = w.key_cache.bytes.data() + (slot / B) * B * 132;
    const bool zero = pos % 7 == 3;  // scores 0
    for (int i = 0; i < 128; ++i) block[(slot % B) * 128 + i] = zero ? 0 : key[static_cast<std::size_t>(i)];
    std::memcpy(block + B * 128 + (slot % B) * 4, &one, 4);
  }
  // Positive weights, queries all 1: every non-zero key scores the same positive value.
  for (int h = 0; h < s.heads; ++h) reinterpret_cast<float*>(w.weights.bytes.data())[h] = 0.5f;
  for (int i = 0; i < s.heads * 128; ++i) kernel::reference::store(w.q.bytes.data(), ScalarType::bf16, i, 1.0);
  DeviceIndexer d(w);
  auto impl = make_gpu(w.params);
  auto plan = impl->plan(w.batch.md, d.key_cache.view, {});
  impl->top_k(*plan, d.q.view, d.weights.view, d.key_cache.view, d.indices.view, {});
  d.indices_to(w);
  const std::vector<std::int32_t> got = w.index_rows();
  std::vector<std::int32_t> want;
  for (std::int32_t pos = 0; static_cast<int>(want.size()) < 256; ++pos)
    if (pos % 7 != 3) want.push_back(pos);
  EXPECT_EQ(got, want);
}

TEST(SparseMlaIndexerTopKGpu, WavesGiveTheSameIndices) {
  REQUIRE_SPARSE_GPU();
  IndexerSetup s;
  s.requests = {{4000, 1}, {0, 1}, {2500, 3}, {700, 40}};
  s.topk = 512;
  IndexerWorkload w(s);
  DeviceIndexer d(w);
  auto impl = make_gpu(w.params);
  auto plan = impl->plan(w.batch.md, d.key_cache.view, {});
  impl->top_k(*plan, d.q.view, d.weights.view, d.key_cache.view, d.indices.view, {});
  d.indices_to(w);
  const std::vector<std::int32_t> want = w.index_rows();
  for (std::int64_t budget : {std::int64_t{4000 * 4}, std::int64_t{16 * 4000 * 4}}) {
    IndexerPlanOptions o;
    o.logits_bytes = budget;
    auto p = impl->plan(w.batch.md, d.key_cache.view, {}, o);
    d.indices.buffer.fill_bytes(0x5A);
    impl->top_k(*p, d.q.view, d.weights.view, d.key_cache.view, d.indices.view, {});
    d.indices_to(w);
    EXPECT_EQ(w.index_rows(), want) << "budget " << budget << ": " << p->describe();
  }
  // The padding request's row selects nothing.
  for (int i = 0; i < 512; ++i) EXPECT_EQ(want[static_cast<std::size_t>(512 + i)], -1);
}

// --------------------------------------------------------------------------------------
// The host checks

TEST(SparseMlaIndexerChecksGpu, BadInputIsRefusedNamingTheArgument) {
  REQUIRE_SPARSE_GPU();
  IndexerSetup s;
  s.requests = {{40, 2}};
  s.topk = 16;
  IndexerWorkload w(s);
  DeviceIndexer d(w);
  auto expect_error = [](auto&& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one naming " << needle;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  IndexerLayerParams bad = w.params;
  bad.head_dim = 64;
  expect_error([&] { make_gpu(bad); }, "head_dim");
  bad = w.params;
  bad.topk = cuda::sparse_mla::cuda_indexer_limits().max_topk + 1;
  expect_error([&] { make_gpu(bad); }, "topk");
  auto impl = make_gpu(w.params);
  expect_error([&] { impl->plan(w.batch.md, w.key_cache.view, {}); }, "cuda");  // a host cache
  auto plan = impl->plan(w.batch.md, d.key_cache.view, {});
  expect_error([&] { impl->top_k(*plan, w.q.view, d.weights.view, d.key_cache.view, d.indices.view, {}); }, "q");
  Buffer narrow(ScalarType::f32, {2, 39});
  cuda::DeviceTensor narrow_dev = cuda::to_device(narrow.view);
  expect_error([&] { impl->logits(*plan, d.q.view, d.weights.view, d.key_cache.view, narrow_dev.view, {}); }, "logits");
  Buffer short_rows(ScalarType::i32, {2, 15});
  cuda::DeviceTensor short_dev = cuda::to_device(short_rows.view);
  expect_error([&] { impl->top_k(*plan, d.q.view, d.weights.view, d.key_cache.view, short_dev.view, {}); }, "indices");
}

}  // namespace
}  // namespace attnsel::kernel::sparse_mla
