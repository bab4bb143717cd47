// The log-sum-exp FLASH_ATTN's CUDA decode kernel writes for each query row, against the
// double-precision reference: unsplit and split sequences, bf16 and fp8 caches, NHD and
// HND, GQA ratios, sinks and soft-cap, a NaN-poisoned LSE buffer, one plan executed for
// several layers, a captured decode graph replayed with new lengths, and the refusal of a
// batch with prefill sequences. Suites named *Gpu* skip without a device.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"
#include "kernels/gpu_test_util.hpp"
#include "kernels/output_error.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::kernel::cuda {
namespace {

using runtime::CacheLayout;
using runtime::PagedWorkload;
using runtime::SequenceShape;
using runtime::WorkloadSpec;

struct LseCase {
  int heads = 8, kv_heads = 2, head_size = 128;
  ScalarType dtype = ScalarType::bf16;
  CacheLayout layout = CacheLayout::nhd;
  std::vector<SequenceShape> seqs;
  CacheDType kv_cache_dtype = CacheDType::auto_;
  bool sinks = false;
  float softcap = 0.0f;
  CudaTuning tuning{};
  std::uint64_t seed = 3;
};

WorkloadSpec spec_of(const LseCase& c) {
  WorkloadSpec s;
  s.num_heads = c.heads;
  s.num_kv_heads = c.kv_heads;
  s.head_size = c.head_size;
  s.dtype = c.dtype;
  s.layout = c.layout;
  s.sequences = c.seqs;
  s.seed = c.seed;
  s.query_range = 2.0f;  // a sharper softmax than uniform [-1, 1]
  s.kv_cache_dtype = c.kv_cache_dtype;
  if (c.kv_cache_dtype != CacheDType::auto_) {
    s.k_scale = 0.05f;  // values in [-1, 1] are stored as up to ±20, inside e4m3's range
    s.v_scale = 0.7f;
  }
  return s;
}

LayerParams params_of(const LseCase& c, const WorkloadSpec& s) {
  LayerParams p;
  p.num_heads = c.heads;
  p.num_kv_heads = c.kv_heads;
  p.head_size = c.head_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_size));
  p.logits_soft_cap = c.softcap;
  p.kv_cache_dtype = c.kv_cache_dtype;
  p.k_scale = s.k_scale;
  p.v_scale = s.v_scale;
  for (int h = 0; h < c.heads && c.sinks; ++h) p.sinks.push_back(-1.0f + 0.37f * static_cast<float>(h % 9));
  return p;
}

/// The reference's LSE [tokens, heads] for the batch.
std::vector<float> reference_lse(const LayerParams& lp, const TensorView& query, const KVCacheView& cache,
                                 const AttentionMetadata& md) {
  const std::int64_t tokens = md.num_actual_tokens;
  std::vector<float> lse(static_cast<std::size_t>(tokens * lp.num_heads), std::nanf(""));
  std::vector<std::uint8_t> out(static_cast<std::size_t>(tokens * lp.num_heads * lp.head_size) * element_size(query.dtype));
  const TensorView lse_view = TensorView::contiguous(lse.data(), ScalarType::f32, {tokens, lp.num_heads});
  reference::forward(lp, query, cache, md,
                     TensorView::contiguous(out.data(), query.dtype, {tokens, lp.num_heads, lp.head_size}), &lse_view);
  return lse;
}

/// Every LSE of `got` (host copy of the kernel's) against `want`: finite where the reference
/// is, within a relative bound (the kernel's scores are fp32, its exponentials approximate,
/// its soft-cap's tanh good to 2^-11).
void expect_lse_near(const std::vector<float>& got, const std::vector<float>& want, int heads, float softcap,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  const double rel = softcap > 0.0f ? 6e-3 : 2e-3;
  int bad = 0;
  for (std::size_t i = 0; i < got.size() && bad < 10; ++i) {
    const std::string where = fmt::format("{}: token {} head {}", what, i / heads, i % heads);
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << where;
      continue;
    }
    if (!std::isfinite(got[i])) {
      ADD_FAILURE() << where << ": not written or not finite (" << got[i] << ")";
      ++bad;
      continue;
    }
    if (std::abs(double(got[i]) - want[i]) > rel * std::max(1.0, std::abs(double(want[i])))) {
      ADD_FAILURE() << where << ": got " << got[i] << ", reference " << want[i];
      ++bad;
    }
  }
}

/// Outputs of the device tensor `o` against the reference: no NaN, relative L2 in bounds.
void expect_output_near(const LayerParams& lp, const TensorView& query, const KVCacheView& cache,
                        const AttentionMetadata& md, const DeviceTensor& o, const std::string& what) {
  const kernel::testing::OutputError e = testing::device_output_error(lp, query, cache, md, o);
  EXPECT_EQ(e.not_finite, 0) << what;
  EXPECT_LT(e.rel_l2, o.view.dtype == ScalarType::bf16 ? 1.6e-2 : 4e-3) << what;
}

/// A device f32 [tokens, heads] LSE buffer, poisoned with NaNs.
struct DeviceLse {
  DeviceBuffer buffer;
  TensorView view;
  DeviceLse(std::int64_t tokens, int heads) : buffer(static_cast<std::size_t>(tokens * heads) * sizeof(float)) {
    view = TensorView::contiguous(buffer.data(), ScalarType::f32, {tokens, heads}, DeviceKind::cuda);
    poison();
  }
  void poison() { buffer.fill_bytes(0xFF); }  // 0xFFFFFFFF is a NaN
  std::vector<float> download() const {
    std::vector<float> h(static_cast<std::size_t>(view.numel()));
    buffer.download(h.data(), h.size() * sizeof(float));
    return h;
  }
};

/// Plans the case's batch with lse, executes it twice (the second time on a poisoned LSE and
/// output: split counters left behind must not matter) and checks LSE and output.
PlanSummary check_lse(const LseCase& c) {
  const WorkloadSpec spec = spec_of(c);
  PagedWorkload wl(spec);
  const LayerParams lp = params_of(c, spec);
  const AttentionMetadata md = wl.metadata();
  const std::vector<float> want = reference_lse(lp, wl.query(), wl.cache(), md);

  DeviceTensor q = to_device(wl.query());
  DeviceTensor k = to_device(wl.cache().key), v = to_device(wl.cache().value);
  DeviceTensor o = device_like(wl.output());
  DeviceLse lse(md.num_actual_tokens, c.heads);
  FlashAttnCuda impl(lp, c.tuning);
  const KVCacheView dev_cache{k.view, v.view};
  PlanOptions options;
  options.lse = true;
  const auto plan = impl.plan(md, dev_cache, q.view.dtype, Stream{}, options);
  const PlanSummary summary = FlashAttnCuda::summary(*plan);
  for (int run = 0; run < 2; ++run) {
    o.buffer.fill_bytes(0xFF);
    lse.poison();
    impl.execute(*plan, q.view, dev_cache, o.view, Stream{}, &lse.view);
    synchronize("LSE case");
    const std::string what = fmt::format("run {} ({})", run, summary.describe());
    expect_lse_near(lse.download(), want, c.heads, c.softcap, what);
    expect_output_near(lp, wl.query(), wl.cache(), md, o, what);
  }
  return summary;
}

// Odd and prime context lengths, one and several query tokens per sequence.
std::vector<SequenceShape> decode_lengths() { return {{1, 1}, {2, 1}, {17, 1}, {131, 1}, {509, 2}, {1009, 1}, {3, 3}}; }

// ---- everywhere ---------------------------------------------------------------------------

TEST(LseHost, FlashAttnDeclaresLseForDecodeBatches) {
  const KernelInfo k = flash_attn_cuda_kernel_info();
  EXPECT_TRUE(k.lse_output);
  EXPECT_FALSE(k.lse_prefill) << "the prefill kernels do not write the log-sum-exp";
}

// ---- on a GPU -----------------------------------------------------------------------------

TEST(LseGpu, UnsplitDecodeEveryGqaRatioLayoutAndCacheDtype) {
  REQUIRE_GPU();
  for (int group : {1, 4, 8})
    for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd})
      for (CacheDType cache : {CacheDType::auto_, CacheDType::fp8_e4m3}) {
        SCOPED_TRACE(fmt::format("group {} {} cache {}", group, layout == CacheLayout::nhd ? "NHD" : "HND",
                                 cache_dtype_name(cache)));
        LseCase c;
        c.kv_heads = 2;
        c.heads = 2 * group;
        c.layout = layout;
        c.kv_cache_dtype = cache;
        c.seqs = decode_lengths();
        c.tuning.split_waves = 0.0;  // no sequence is split
        c.seed = 11 + static_cast<std::uint64_t>(group);
        const PlanSummary s = check_lse(c);
        EXPECT_EQ(s.max_splits, 1) << s.describe();
        EXPECT_EQ(s.prefill_ctas, 0) << s.describe();
      }
}

TEST(LseGpu, SplitDecodeEveryGqaRatioLayoutAndCacheDtype) {
  REQUIRE_GPU();
  for (int group : {1, 4, 8})
    for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd})
      for (CacheDType cache : {CacheDType::auto_, CacheDType::fp8_e4m3}) {
        SCOPED_TRACE(fmt::format("group {} {} cache {}", group, layout == CacheLayout::nhd ? "NHD" : "HND",
                                 cache_dtype_name(cache)));
        LseCase c;
        c.kv_heads = 2;
        c.heads = 2 * group;
        c.layout = layout;
        c.kv_cache_dtype = cache;
        c.seqs = {{8191, 1}, {3001, 2}, {7, 1}, {1009, 1}};
        c.tuning.split_waves = 4.0;  // long sequences are cut into many slices
        c.seed = 21 + static_cast<std::uint64_t>(group);
        const PlanSummary s = check_lse(c);
        EXPECT_GT(s.max_splits, 1) << s.describe();
        EXPECT_GT(s.merge_rows, 0) << s.describe();
      }
}

TEST(LseGpu, SinksAndSoftCapSplitAndUnsplitF16AndBf16) {
  REQUIRE_GPU();
  for (ScalarType dt : {ScalarType::bf16, ScalarType::f16})
    for (CacheDType cache : {CacheDType::auto_, CacheDType::fp8_e4m3})
      for (double waves : {0.0, 4.0}) {
        SCOPED_TRACE(fmt::format("{} cache {} split_waves {}", to_string(dt), cache_dtype_name(cache), waves));
        LseCase c;
        c.heads = 32;
        c.kv_heads = 8;
        c.dtype = dt;
        c.kv_cache_dtype = cache;
        c.sinks = true;
        c.softcap = 5.0f;
        c.seqs = {{4099, 1}, {1, 1}, {263, 2}};
        c.tuning.split_waves = waves;
        c.seed = 41;
        const PlanSummary s = check_lse(c);
        if (waves > 0.0) {
          EXPECT_GT(s.max_splits, 1) << s.describe();
        }
      }
}

TEST(LseGpu, StridedLseRowsAndOnePlanForSeveralLayers) {
  REQUIRE_GPU();
  LseCase c;
  c.heads = 32;
  c.kv_heads = 8;
  c.seqs = {{4096, 1}, {577, 1}, {13, 1}};
  c.tuning.split_waves = 2.0;
  const WorkloadSpec spec = spec_of(c);
  PagedWorkload wl(spec);
  const AttentionMetadata md = wl.metadata();
  LayerParams lp0 = params_of(c, spec);
  LayerParams lp1 = lp0;
  lp1.logits_soft_cap = 30.0f;  // another layer of the group, its own parameters
  FlashAttnCuda impl0(lp0, c.tuning), impl1(lp1, c.tuning);
  DeviceTensor q = to_device(wl.query());
  DeviceTensor k = to_device(wl.cache().key), v = to_device(wl.cache().value);
  DeviceTensor o0 = device_like(wl.output()), o1 = device_like(wl.output());
  const KVCacheView dev_cache{k.view, v.view};
  PlanOptions options;
  options.lse = true;
  const auto plan = impl0.plan(md, dev_cache, q.view.dtype, Stream{}, options);
  EXPECT_GT(FlashAttnCuda::summary(*plan).max_splits, 1) << plan->describe();
  // Layer 1's LSE rows are 40 floats apart (a wider buffer's first 32 columns).
  const std::int64_t tokens = md.num_actual_tokens;
  DeviceLse lse0(tokens, c.heads), wide(tokens, 40);
  const std::int64_t shape[2] = {tokens, c.heads}, strides[2] = {40, 1};
  const TensorView lse1 = TensorView::strided(wide.buffer.data(), ScalarType::f32, shape, strides, DeviceKind::cuda);
  for (int round = 0; round < 3; ++round) {
    lse0.poison();
    wide.poison();
    impl0.execute(*plan, q.view, dev_cache, o0.view, Stream{}, &lse0.view);
    impl1.execute(*plan, q.view, dev_cache, o1.view, Stream{}, &lse1);
    synchronize("LSE of two layers");
    expect_lse_near(lse0.download(), reference_lse(lp0, wl.query(), wl.cache(), md), c.heads, 0.0f,
                    fmt::format("round {} layer 0", round));
    const std::vector<float> all = wide.download();
    std::vector<float> got1(static_cast<std::size_t>(tokens * c.heads));
    for (std::int64_t t = 0; t < tokens; ++t) {
      std::copy_n(all.begin() + t * 40, c.heads, got1.begin() + t * c.heads);
      for (int col = c.heads; col < 40; ++col)  // columns past the heads are left alone
        EXPECT_TRUE(std::isnan(all[static_cast<std::size_t>(t * 40 + col)])) << "token " << t << " column " << col;
    }
    expect_lse_near(got1, reference_lse(lp1, wl.query(), wl.cache(), md), c.heads, lp1.logits_soft_cap,
                    fmt::format("round {} layer 1", round));
    expect_output_near(lp1, wl.query(), wl.cache(), md, o1, fmt::format("round {} layer 1", round));
  }
}

TEST(LseGpu, CapturedDecodeGraphWritesTheLseOfEachReplay) {
  REQUIRE_GPU();
  constexpr int kCapacityTokens = 64 * 16;
  LseCase c;
  c.seqs = std::vector<SequenceShape>(4, SequenceShape{kCapacityTokens, 1});
  const WorkloadSpec spec = spec_of(c);
  PagedWorkload wl(spec);
  const LayerParams lp = params_of(c, spec);
  FlashAttnCuda impl(lp);
  DeviceTensor q = to_device(wl.query());
  DeviceTensor k = to_device(wl.cache().key), v = to_device(wl.cache().value);
  DeviceTensor o = device_like(wl.output());
  const KVCacheView dev_cache{k.view, v.view};
  DeviceLse lse(wl.num_tokens(), c.heads);
  synchronize("graph: setup");
  const AttentionMetadata full = wl.metadata();
  std::vector<std::int32_t> lens(full.seq_lens.begin(), full.seq_lens.end());
  AttentionMetadata md = full;
  md.seq_lens = lens;
  OwnedStream stream(0);
  PlanOptions options;
  options.graph_capturable = true;
  options.max_blocks_per_seq = full.max_blocks_per_seq;
  options.lse = true;
  const auto plan = impl.plan(md, dev_cache, ScalarType::bf16, stream.get(), options);
  impl.execute(*plan, q.view, dev_cache, o.view, stream.get(), &lse.view);  // loads the kernel outside the capture
  stream.synchronize("graph: warm-up");
  CudaGraph graph;
  graph.begin_capture(stream.get());
  impl.execute(*plan, q.view, dev_cache, o.view, stream.get(), &lse.view);
  graph.end_capture(stream.get());
  const std::vector<std::vector<std::int32_t>> rounds = {
      {kCapacityTokens, 17, 1, 600}, {5, 1031 - 7, kCapacityTokens - 3, 64}, {1, 1, 2, 3}};
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    lens = rounds[r];
    md.seq_lens = lens;
    md.max_seq_len = *std::max_element(lens.begin(), lens.end());
    o.buffer.fill_bytes(0xFF);
    lse.poison();
    synchronize("graph: new batch contents");
    impl.update(*plan, md, stream.get());
    graph.launch(stream.get());
    stream.synchronize("graph replay");
    const std::string what = fmt::format("replay {} ({})", r, plan->describe());
    expect_lse_near(lse.download(), reference_lse(lp, wl.query(), wl.cache(), md), c.heads, 0.0f, what);
    expect_output_near(lp, wl.query(), wl.cache(), md, o, what);
  }
}

TEST(LseGpu, BatchWithPrefillSequencesIsRefusedWithTheReason) {
  REQUIRE_GPU();
  LseCase c;
  c.seqs = {{131, 1}, {200, 67}, {5, 1}};  // 67 tokens x 4 heads per KV head: the prefill kernel's
  const WorkloadSpec spec = spec_of(c);
  PagedWorkload wl(spec);
  const LayerParams lp = params_of(c, spec);
  const AttentionMetadata md = wl.metadata();
  FlashAttnCuda impl(lp);
  DeviceTensor q = to_device(wl.query());
  DeviceTensor k = to_device(wl.cache().key), v = to_device(wl.cache().value);
  DeviceTensor o = device_like(wl.output());
  const KVCacheView dev_cache{k.view, v.view};
  DeviceLse lse(md.num_actual_tokens, c.heads);
  PlanOptions options;
  options.lse = true;
  const auto plan = impl.plan(md, dev_cache, q.view.dtype, Stream{}, options);
  EXPECT_GT(FlashAttnCuda::summary(*plan).prefill_ctas, 0);
  try {
    impl.execute(*plan, q.view, dev_cache, o.view, Stream{}, &lse.view);
    FAIL() << "a batch with a prefill sequence wrote an LSE";
  } catch (const NotImplementedError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("decode batches only"), std::string::npos) << m;
    EXPECT_NE(m.find("1 sequence(s) for the prefill kernels"), std::string::npos) << m;
    EXPECT_NE(m.find("execute it without lse"), std::string::npos) << m;
  }
  synchronize("refused LSE");
  EXPECT_TRUE(std::isnan(lse.download()[0])) << "nothing ran";
  // The same plan without an LSE runs the batch.
  o.buffer.fill_bytes(0xFF);
  impl.execute(*plan, q.view, dev_cache, o.view, Stream{});
  synchronize("the batch without LSE");
  expect_output_near(lp, wl.query(), wl.cache(), md, o, "without LSE");
}

}  // namespace
}  // namespace attnsel::kernel::cuda
