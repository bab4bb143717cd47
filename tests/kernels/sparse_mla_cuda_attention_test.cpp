// The sparse MLA attention on the GPU against the double-precision reference: the latent
// kernel over bf16 / f16 and fp8_ds_mla caches (power-of-two and raw tile scales, small and
// large latents) with -1 scattered and trailing, rows with no entry, heads 8 to 128 (counts
// that are no multiple of the 16-head group), odd block sizes and lengths shorter and longer
// than top-k, split and unsplit index rows; the layer (absorbed) against the un-absorbed
// reference; the cache writers' bytes; request positions to cache rows; the GPU indexer and
// the attention chained; the host checks. Every output starts NaN-poisoned on the device and
// the rows past the batch must stay so. Suites named *Gpu* skip without a GPU the kernels run
// on (compute capability 8.x or 9.x).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "attnsel/sparse_mla.hpp"
#include "gpu_test_util.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/sparse_mla/cpu/cpu_sparse_mla.hpp"
#include "kernels/sparse_mla/cuda/sparse_mla_cuda.hpp"
#include "sparse_mla_test_util.hpp"

namespace attnsel::kernel::sparse_mla {
namespace {

using testing::Buffer;
using testing::kLayerOutput;
using testing::LayerCase;
using testing::Request;
using testing::SparseSetup;
using testing::SparseWorkload;
using testing::with_lse;
using Tol = mla::testing::Tolerance;

/// A host tensor's device copy, and reading it back as doubles.
struct OnDevice {
  cuda::DeviceTensor dev;
  explicit OnDevice(const Buffer& host) : dev(cuda::to_device(host.view)) {}
  const TensorView& view() const { return dev.view; }
  std::vector<double> read(Buffer& host, std::int64_t rows) const {
    cuda::copy_to_host(dev, host.view);
    return mla::testing::read(host.view, rows);
  }
};

/// The workload's tensors on the device (its outputs NaN-poisoned as on the host), and its
/// layer with kv_b_proj on the device.
struct DeviceWorkload {
  OnDevice weights, q, q_latent, kv_c, k_pe, cache, output, latent_out, lse, local, physical;
  SparseMlaLayerParams params;
  explicit DeviceWorkload(const SparseWorkload& w)
      : weights(w.weights),
        q(w.q),
        q_latent(w.q_latent),
        kv_c(w.kv_c),
        k_pe(w.k_pe),
        cache(w.cache),
        output(w.output),
        latent_out(w.latent_out),
        lse(w.lse),
        local(w.local_buf),
        physical(w.physical_buf),
        params(w.params) {
    params.kv_b_proj = weights.view();
  }
};

std::unique_ptr<SparseMlaImpl> make_gpu(const SparseMlaLayerParams& p) {
  return cuda::sparse_mla::make_cuda_sparse_mla_impl(p);
}

/// Runs attend_latent on the device copies; returns the latent output and LSE.
std::pair<std::vector<double>, std::vector<double>> run_latent(SparseWorkload& w, DeviceWorkload& d,
                                                               const SparseMlaImpl& impl, const StepPlan& plan,
                                                               const OnDevice& rows) {
  impl.attend_latent(plan, d.q_latent.view(), rows.view(), d.cache.view(), d.latent_out.view(), {}, &d.lse.view());
  cuda::synchronize("sparse MLA latent attention");
  return {d.latent_out.read(w.latent_out, w.batch.tokens), d.lse.read(w.lse, w.batch.tokens)};
}

void expect_rows_past_the_batch_untouched(const SparseWorkload& w) {
  const std::int64_t first = static_cast<std::int64_t>(w.batch.tokens) * w.setup.heads * 512;
  EXPECT_TRUE(std::isnan(kernel::reference::load(w.latent_out.bytes.data(), w.setup.dtype, first)))
      << "a row past the batch was written";
}

// --------------------------------------------------------------------------------------
// The latent kernel

struct LatentGpuCase {
  int heads, block, topk;
  ScalarType dtype;
  CacheDType kv;
  std::vector<Request> requests;
  float latent_scale = 1.0f;
};

class SparseMlaLatentGpu : public ::testing::TestWithParam<LatentGpuCase> {};

TEST_P(SparseMlaLatentGpu, MatchesTheReference) {
  REQUIRE_SPARSE_GPU();
  const LatentGpuCase& c = GetParam();
  SparseSetup s;
  s.heads = c.heads;
  s.block_size = c.block;
  s.topk = c.topk;
  s.dtype = c.dtype;
  s.kv_cache_dtype = c.kv;
  s.requests = c.requests;
  s.latent_scale = c.latent_scale;
  SparseWorkload w(s);
  // Token 0's row: all -1.
  std::vector<std::int32_t> rows = w.physical;
  std::fill(rows.begin(), rows.begin() + c.topk, -1);
  w.set_physical(rows);
  DeviceWorkload d(w);
  auto impl = make_gpu(d.params);
  auto plan = impl->plan(w.batch.md, d.cache.view(), {}, with_lse());
  const auto [out, lse] = run_latent(w, d, *impl, *plan, d.physical);
  const reference::Result ref = w.latent_reference();
  // The absolute bound is for latents of magnitude 0.1: the output's roundings grow with the
  // latents, so larger latents widen it in proportion.
  Tol tol = mla::testing::latent_tolerance(c.dtype);
  tol.abs *= std::max(1.0, static_cast<double>(c.latent_scale));
  EXPECT_EQ(mla::testing::compare(out, ref.out, tol), "") << describe(s) << ", " << plan->describe();
  EXPECT_EQ(mla::testing::compare(lse, ref.lse, mla::testing::lse_tolerance(c.dtype)), "") << describe(s);
  for (int i = 0; i < c.heads; ++i) {
    EXPECT_EQ(lse[static_cast<std::size_t>(i)], -std::numeric_limits<double>::infinity()) << "an all -1 row's LSE";
    for (int e = 0; e < 512; ++e) ASSERT_EQ(out[static_cast<std::size_t>(i) * 512 + static_cast<std::size_t>(e)], 0.0);
  }
  expect_rows_past_the_batch_untouched(w);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SparseMlaLatentGpu,
    ::testing::Values(LatentGpuCase{8, 64, 64, ScalarType::bf16, CacheDType::auto_, {{1, 1}, {200, 1}, {70, 1}}},
                      LatentGpuCase{12, 61, 97, ScalarType::bf16, CacheDType::auto_, {{150, 4}, {3, 1}}},
                      LatentGpuCase{16, 64, 128, ScalarType::bf16, CacheDType::fp8_ds_mla, {{300, 1}, {64, 2}}},
                      LatentGpuCase{24, 64, 64, ScalarType::f16, CacheDType::float16, {{80, 1}, {61, 3}}},
                      LatentGpuCase{
                          64, 64, 2048, ScalarType::bf16, CacheDType::fp8_ds_mla, {{3001, 1}, {2047, 2}, {5, 1}}},
                      LatentGpuCase{96, 5, 300, ScalarType::bf16, CacheDType::fp8_ds_mla, {{700, 1}, {129, 3}}},
                      LatentGpuCase{128, 64, 2048, ScalarType::bf16, CacheDType::auto_, {{4099, 1}, {2049, 1}}},
                      LatentGpuCase{128, 64, 2048, ScalarType::bf16, CacheDType::fp8_ds_mla, {{4099, 1}, {17, 1}}},
                      // Tile scales far from 1: large latents (2^-4 … 2^-3) and tiny ones (the 1e-4 floor).
                      LatentGpuCase{16, 64, 256, ScalarType::bf16, CacheDType::fp8_ds_mla, {{500, 2}}, 30.0f},
                      LatentGpuCase{16, 64, 256, ScalarType::bf16, CacheDType::fp8_ds_mla, {{500, 2}}, 0.003f}));

TEST(SparseMlaLatentKernelGpu, RawScaleRecordsAreReadCorrectly) {
  REQUIRE_SPARSE_GPU();
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
  DeviceWorkload d(w);
  auto impl = make_gpu(d.params);
  auto plan = impl->plan(w.batch.md, d.cache.view(), {}, with_lse());
  const auto [out, lse] = run_latent(w, d, *impl, *plan, d.physical);
  const reference::Result ref = w.latent_reference();
  EXPECT_EQ(mla::testing::compare(out, ref.out, mla::testing::kLatentHalf), "");
  EXPECT_EQ(mla::testing::compare(lse, ref.lse, mla::testing::kLse), "");
}

TEST(SparseMlaLatentKernelGpu, SplitAndUnsplitRowsAgreeAndRerunsAreBitIdentical) {
  REQUIRE_SPARSE_GPU();
  // Two tokens fill two CTAs: the plan splits their rows. Three hundred tokens fill more than
  // two waves of any device the kernels run on: it does not.
  struct Case {
    int topk;
    std::vector<Request> requests;
    bool split;
  };
  for (const Case& c : {Case{2048, {{3000, 1}, {2100, 1}}, true}, Case{256, {{600, 150}, {400, 150}}, false}}) {
    SparseSetup s;
    s.heads = 16;
    s.topk = c.topk;
    s.requests = c.requests;
    SparseWorkload w(s);
    DeviceWorkload d(w);
    auto impl = make_gpu(d.params);
    auto plan = impl->plan(w.batch.md, d.cache.view(), {}, with_lse());
    const bool split = plan->describe().find("in 1 piece") == std::string::npos;
    EXPECT_EQ(split, c.split) << plan->describe();
    const auto first = run_latent(w, d, *impl, *plan, d.physical);
    const reference::Result ref = w.latent_reference();
    EXPECT_EQ(mla::testing::compare(first.first, ref.out, mla::testing::kLatentHalf), "") << plan->describe();
    EXPECT_EQ(mla::testing::compare(first.second, ref.lse, mla::testing::kLse), "") << plan->describe();
    const auto again = run_latent(w, d, *impl, *plan, d.physical);
    EXPECT_EQ(first.first, again.first) << "a rerun of one plan changed the output";
    EXPECT_EQ(first.second, again.second);
  }
}

TEST(SparseMlaLatentKernelGpu, BatchInvariantLayersDoNotSplit) {
  REQUIRE_SPARSE_GPU();
  SparseSetup s;
  s.topk = 2048;
  s.requests = {{3000, 1}};
  SparseWorkload w(s);
  DeviceWorkload d(w);
  d.params.batch_invariant = true;
  auto impl = make_gpu(d.params);
  auto plan = impl->plan(w.batch.md, d.cache.view(), {}, with_lse());
  EXPECT_NE(plan->describe().find("in 1 piece"), std::string::npos) << plan->describe();
  const auto [out, lse] = run_latent(w, d, *impl, *plan, d.physical);
  EXPECT_EQ(mla::testing::compare(out, w.latent_reference().out, mla::testing::kLatentHalf), "");
}

TEST(SparseMlaLatentKernelGpu, IndicesOutsideTheCacheContributeNothing) {
  REQUIRE_SPARSE_GPU();
  // Device index rows cannot be checked on the host before the launch: an entry outside the
  // cache is never read and counts as -1 (FlashMLA's rule for an index past the KV length).
  SparseSetup s;
  s.heads = 16;
  s.topk = 64;
  s.requests = {{100, 1}, {90, 2}};
  SparseWorkload w(s);
  std::vector<std::int32_t> rows = w.physical;
  const auto cache_rows = static_cast<std::int32_t>(w.batch.num_blocks * s.block_size);
  rows[3] = cache_rows;
  rows[70] = INT_MAX;
  rows[71] = -5;
  w.set_physical(rows);
  DeviceWorkload d(w);
  std::vector<std::int32_t> as_absent = rows;
  for (std::int32_t& r : as_absent)
    if (r < 0 || r >= cache_rows) r = -1;
  auto impl = make_gpu(d.params);
  auto plan = impl->plan(w.batch.md, d.cache.view(), {}, with_lse());
  const auto [out, lse] = run_latent(w, d, *impl, *plan, d.physical);
  const reference::Result ref =
      reference::attend_latent(w.params, w.q_latent.view, as_absent, w.cache.view, w.batch.tokens);
  EXPECT_EQ(mla::testing::compare(out, ref.out, mla::testing::kLatentHalf), "");
  EXPECT_EQ(mla::testing::compare(lse, ref.lse, mla::testing::kLse), "");
}

// --------------------------------------------------------------------------------------
// The layer, the cache writers, request positions, the chain

class SparseMlaLayerGpu : public ::testing::TestWithParam<LayerCase> {};

TEST_P(SparseMlaLayerGpu, MatchesTheUnabsorbedReference) {
  REQUIRE_SPARSE_GPU();
  const LayerCase& c = GetParam();
  SparseSetup s;
  s.heads = c.heads;
  s.kv_cache_dtype = c.kv;
  s.requests = c.requests;
  s.topk = c.topk;
  s.block_size = 32;
  SparseWorkload w(s);
  DeviceWorkload d(w);
  SparseMlaPlanOptions o;
  o.decode_query_len = 4;
  auto impl = make_gpu(d.params);
  auto plan = impl->plan(w.batch.md, d.cache.view(), {}, o);
  impl->execute(*plan, d.q.view(), d.local.view(), d.cache.view(), d.output.view(), {});
  cuda::synchronize("sparse MLA execute");
  const std::vector<double> got = d.output.read(w.output, w.batch.tokens);
  EXPECT_EQ(mla::testing::compare(got, w.reference().out, kLayerOutput), "") << describe(s) << ", " << plan->describe();
  EXPECT_TRUE(std::isnan(kernel::reference::load(w.output.bytes.data(), ScalarType::bf16,
                                                 static_cast<std::int64_t>(w.batch.tokens) * c.heads * 128)))
      << "a row past the batch was written";
}

INSTANTIATE_TEST_SUITE_P(Shapes, SparseMlaLayerGpu,
                         ::testing::Values(LayerCase{16, CacheDType::auto_, {{100, 1}, {37, 3}}, 48},
                                           LayerCase{16, CacheDType::fp8_ds_mla, {{80, 2}, {5, 1}}, 40},
                                           LayerCase{3, CacheDType::auto_, {{50, 4}, {20, 20}}, 24},
                                           LayerCase{128, CacheDType::fp8_ds_mla, {{300, 1}, {70, 1}}, 256}));

TEST(SparseMlaCacheWriteGpu, WritesTheReferenceWritersBytesAndSkipsPadding) {
  REQUIRE_SPARSE_GPU();
  for (CacheDType kv : {CacheDType::auto_, CacheDType::fp8_ds_mla})
    for (float latent_scale : {1.0f, 40.0f, 0.002f}) {
      SparseSetup s;
      s.kv_cache_dtype = kv;
      s.latent_scale = latent_scale;
      s.requests = {{5, 3}, {2, 2}, {70, 1}};
      SparseWorkload w(s);
      w.batch.slot_mapping[1] = -1;
      w.batch.bind();
      Buffer before = kv == CacheDType::fp8_ds_mla ? Buffer(ScalarType::u8, {w.batch.num_blocks, 64, 656})
                                                   : Buffer(ScalarType::bf16, {w.batch.num_blocks, 64, 576});
      std::fill(before.bytes.begin(), before.bytes.end(), 0x11);
      Buffer want = before.view.dtype == ScalarType::u8 ? Buffer(ScalarType::u8, {w.batch.num_blocks, 64, 656})
                                                        : Buffer(ScalarType::bf16, {w.batch.num_blocks, 64, 576});
      want.bytes = before.bytes;
      reference::write_latent(w.params, w.kv_c.view, w.k_pe.view, want.view, w.batch.slot_mapping, w.batch.tokens);
      DeviceWorkload d(w);
      OnDevice cache(before);
      auto impl = make_gpu(d.params);
      auto plan = impl->plan(w.batch.md, cache.view(), {}, {});
      impl->write_cache(*plan, d.kv_c.view(), d.k_pe.view(), cache.view(), {});
      cuda::synchronize("sparse MLA cache write");
      cuda::copy_to_host(cache.dev, before.view);
      EXPECT_EQ(before.bytes, want.bytes) << cache_dtype_name(kv) << ", latents x " << latent_scale;
    }
}

TEST(SparseMlaIndicesGpu, RequestPositionsBecomeCacheRows) {
  REQUIRE_SPARSE_GPU();
  SparseSetup s;
  s.block_size = 16;
  s.topk = 300;
  s.requests = {{33, 1}, {70, 2}, {0, 1}, {290, 1}};
  SparseWorkload w(s);
  std::vector<std::int32_t> local = w.local;
  local[5] = 33;                                      // request 0 holds 33 positions
  local[6] = w.batch.md.max_blocks_per_seq * 16 + 3;  // past the block table
  local[7] = -7;
  Buffer in = w.indices_buffer(local), out(ScalarType::i32, {w.batch.tokens + 2, 300});
  std::fill(out.bytes.begin(), out.bytes.end(), 0x5A);
  DeviceWorkload d(w);
  OnDevice din(in), dout(out);
  SparseMlaPlanOptions o;
  o.decode_query_len = 2;
  auto impl = make_gpu(d.params);
  auto plan = impl->plan(w.batch.md, d.cache.view(), {}, o);
  impl->physical_indices(*plan, din.view(), dout.view(), {});
  cuda::synchronize("sparse MLA physical indices");
  cuda::copy_to_host(dout.dev, out.view);
  const std::vector<std::int32_t> want = reference::physical_indices(w.batch.md, 16, local, 300);
  std::vector<std::int32_t> got(want.size());
  std::memcpy(got.data(), out.bytes.data(), got.size() * 4);
  EXPECT_EQ(got, want);
  EXPECT_EQ(out.bytes[want.size() * 4], 0x5A) << "a row past the batch was written";
}

TEST(SparseMlaChainGpu, TheGpuIndexerThenTheAttentionMatchTheReferenceChain) {
  REQUIRE_SPARSE_GPU();
  const std::vector<Request> requests = {{2600, 1}, {300, 2}, {40, 1}};
  testing::IndexerSetup is;
  is.requests = requests;
  is.topk = 2048;
  testing::IndexerWorkload iw(is);
  SparseSetup s;
  s.heads = 16;
  s.topk = 2048;
  s.kv_cache_dtype = CacheDType::fp8_ds_mla;
  s.requests = requests;
  s.seed = 7;  // another block table than the indexer's cache
  SparseWorkload w(s);
  DeviceWorkload d(w);
  OnDevice iq(iw.q), iweights(iw.weights), ikeys(iw.key_cache), iindices(iw.indices);
  IndexerPlanOptions io;
  io.decode_query_len = 2;
  auto indexer = cuda::sparse_mla::make_cuda_indexer_impl(iw.params);
  auto iplan = indexer->plan(iw.batch.md, ikeys.view(), {}, io);
  indexer->top_k(*iplan, iq.view(), iweights.view(), ikeys.view(), iindices.view(), {});
  SparseMlaPlanOptions o;
  o.decode_query_len = 2;
  auto impl = make_gpu(d.params);
  auto plan = impl->plan(w.batch.md, d.cache.view(), {}, o);
  impl->execute(*plan, d.q.view(), iindices.view(), d.cache.view(), d.output.view(), {});
  cuda::synchronize("sparse MLA chain");
  cuda::copy_to_host(iindices.dev, iw.indices.view);
  const std::vector<std::int32_t> local = iw.index_rows();
  const std::vector<std::int32_t> rows = reference::physical_indices(w.batch.md, s.block_size, local, s.topk);
  const reference::Result ref = reference::attend(w.params, w.q.view, rows, w.cache.view, w.batch.tokens);
  EXPECT_EQ(mla::testing::compare(d.output.read(w.output, w.batch.tokens), ref.out, kLayerOutput), "");
  // Request 0 sees 2600 positions: a full row; request 2 sees 40: the rest -1.
  EXPECT_EQ(std::count(local.begin(), local.begin() + 2048, -1), 0);
  EXPECT_EQ(std::count(local.begin() + 3 * 2048, local.begin() + 4 * 2048, -1), 2048 - 40);
}

// --------------------------------------------------------------------------------------
// The host checks

TEST(SparseMlaChecksGpu, BadLayersAndTensorsAreRefusedOnTheHost) {
  REQUIRE_SPARSE_GPU();
  SparseSetup s;
  s.requests = {{40, 1}, {30, 1}};
  s.topk = 32;
  SparseWorkload w(s);
  DeviceWorkload d(w);
  auto expect_error = [](auto&& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one naming " << needle;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  SparseMlaLayerParams p = d.params;
  p.kv_cache_dtype = CacheDType::fp8;
  expect_error([&] { make_gpu(p); }, "fp8_ds_mla");
  p = d.params;
  p.kv_b_proj = {};
  p.dtype = ScalarType::f32;
  expect_error([&] { make_gpu(p); }, "f32");
  p = d.params;
  p.kv_b_proj = w.weights.view;  // host memory
  expect_error([&] { make_gpu(p); }, "kv_b_proj");

  auto impl = make_gpu(d.params);
  expect_error([&] { impl->plan(w.batch.md, w.cache.view, {}, {}); }, "cuda");  // a host cache
  auto plan = impl->plan(w.batch.md, d.cache.view(), {}, with_lse());
  // A query view one element off its 16-byte alignment.
  TensorView shifted = d.q_latent.view();
  shifted.data = static_cast<std::uint16_t*>(shifted.data) + 1;
  shifted.shape[0] -= 1;
  expect_error([&] { impl->attend_latent(*plan, shifted, d.physical.view(), d.cache.view(), d.latent_out.view(), {}); },
               "16 bytes");
  expect_error(
      [&] {
        impl->attend_latent(*plan, d.q_latent.view(), w.physical_buf.view, d.cache.view(), d.latent_out.view(), {});
      },
      "indices");
  auto no_lse = impl->plan(w.batch.md, d.cache.view(), {}, {});
  expect_error(
      [&] {
        impl->attend_latent(*no_lse, d.q_latent.view(), d.physical.view(), d.cache.view(), d.latent_out.view(), {},
                            &d.lse.view());
      },
      "SparseMlaPlanOptions::lse");
  auto cpu = cpu::make_cpu_sparse_mla_impl(w.params);
  auto cpu_plan = cpu->plan(w.batch.md, w.cache.view, {}, {});
  expect_error(
      [&] {
        impl->attend_latent(*cpu_plan, d.q_latent.view(), d.physical.view(), d.cache.view(), d.latent_out.view(), {});
      },
      "not made by a CUDA sparse MLA");
  cuda::synchronize("sparse MLA checks");
  std::vector<double> untouched = d.latent_out.read(w.latent_out, 1);
  EXPECT_TRUE(std::isnan(untouched[0])) << "a refused call wrote its output";
}

}  // namespace
}  // namespace attnsel::kernel::sparse_mla
