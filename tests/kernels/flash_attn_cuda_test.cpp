// FLASH_ATTN's CUDA kernels against the double-precision reference, on random paged
// batches: every head size, GQA ratios, odd and prime lengths, every variant, both prefill
// kernels, split-KV decode, NaN-poisoned outputs and NaN-filled unused cache slots.
// Suites named *Gpu* carry the ctest label `gpu` and skip without a device; the
// FlashAttnCudaHost suite runs everywhere.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

#include "kernels/gpu_test_util.hpp"
#include "kernels/output_error.hpp"
#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"
#include "kernels/attention/cuda/launch.hpp"  // the Hopper prefill's forms and tiles
#include "kernels/attention/reference.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::kernel::cuda {
namespace {

using runtime::CacheLayout;
using runtime::PagedWorkload;
using runtime::SequenceShape;
using runtime::WorkloadSpec;

/// Skips a test of the Hopper prefill kernel where it cannot run (no GPU, or not sm_90).
#define REQUIRE_HOPPER()                                                                     \
  do {                                                                                       \
    REQUIRE_GPU();                                                                           \
    const DeviceInfo hopper_device = device_info(0);                                         \
    if (!(hopper_device.major == 9 && hopper_device.minor == 0))                             \
      GTEST_SKIP() << "the Hopper prefill kernel needs sm_90";                               \
  } while (0)

struct GpuCase {
  int heads = 8, kv_heads = 2, head_size = 128;
  ScalarType dtype = ScalarType::bf16;
  int block_size = 16;
  CacheLayout layout = CacheLayout::nhd;
  std::vector<SequenceShape> seqs;
  bool causal = true;
  std::optional<int> window;
  float softcap = 0.0f;
  bool sinks = false;
  bool alibi = false;
  AttentionType attn_type = AttentionType::decoder;
  CacheDType kv_cache_dtype = CacheDType::auto_;
  float k_scale = 1.0f, v_scale = 1.0f;
  std::vector<float> k_scales, v_scales;  // per KV head (empty = the scalars)
  bool batch_invariant = false;
  float scale_mult = 1.0f;  // the softmax scale is scale_mult / sqrt(head_size)
  // The output's head stride, for one head (never stepped): 0 keeps it contiguous; one TMA
  // cannot express (not a multiple of 16 bytes) makes the Hopper prefill store by warps.
  std::int64_t output_head_stride = 0;
  // The caches' head stride, for one KV head (never stepped): 0 keeps the layout's; one a
  // tensor map cannot express makes the decode copy rows by bulk copies (fp8: cp.async).
  std::int64_t cache_head_stride = 0;
  CudaTuning tuning{};
  std::uint64_t seed = 7;
};

/// Relative L2 error against the double reference that the Hopper prefill's e4m3 products
/// (queries per row and probabilities quantised to e4m3) stay under on the random cases
/// below, whatever the output dtype (docs/kernels-fp8.md has the measured values).
constexpr double kE4m3ProductsRelL2 = 6e-2;

struct Outcome {
  PlanSummary summary;
  bool fp8_queries = false;  // StepPlan::fp8_queries of the plan that ran
  double rel_l2 = 0.0;
  double max_abs = 0.0;
};

LayerParams layer_params(const GpuCase& c) {
  LayerParams p;
  p.num_heads = c.heads;
  p.num_kv_heads = c.kv_heads;
  p.head_size = c.head_size;
  p.scale = c.scale_mult / std::sqrt(static_cast<float>(c.head_size));
  p.sliding_window = c.window;
  p.logits_soft_cap = c.softcap;
  p.causal = c.causal;
  p.attn_type = c.attn_type;
  p.kv_cache_dtype = c.kv_cache_dtype;
  p.k_scale = c.k_scale;
  p.v_scale = c.v_scale;
  p.k_scales = c.k_scales;
  p.v_scales = c.v_scales;
  p.batch_invariant = c.batch_invariant;
  for (int h = 0; h < c.heads && c.sinks; ++h) p.sinks.push_back(-1.0f + 0.37f * static_cast<float>(h % 9));
  for (int h = 0; h < c.heads && c.alibi; ++h) p.alibi_slopes.push_back(std::exp2(-8.0f * (h + 1) / c.heads));
  return p;
}

/// Runs one case through the CUDA kernels and the reference; checks every output element.
Outcome check_case(const GpuCase& c) {
  WorkloadSpec spec;
  spec.num_heads = c.heads;
  spec.num_kv_heads = c.kv_heads;
  spec.head_size = c.head_size;
  spec.dtype = c.dtype;
  spec.block_size = c.block_size;
  spec.layout = c.layout;
  spec.sequences = c.seqs;
  spec.seed = c.seed;
  spec.query_range = 2.0f;  // sharper softmax than uniform [-1, 1]
  spec.kv_cache_dtype = c.kv_cache_dtype;  // fp8: the cache holds value / scale, saturated
  spec.k_scale = c.k_scale;
  spec.v_scale = c.v_scale;
  spec.k_scales = c.k_scales;  // the cache holds each KV head's values over its own scales
  spec.v_scales = c.v_scales;
  PagedWorkload wl(spec);
  const LayerParams lp = layer_params(c);
  const AttentionMetadata md = wl.metadata();
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(wl.num_tokens()));
  std::iota(tokens.begin(), tokens.end(), 0);
  const std::vector<double> ref = reference::attend(lp, wl.query(), wl.cache(), md, tokens);

  const KVCacheView host_cache = wl.cache();
  DeviceTensor q = to_device(wl.query());
  DeviceTensor k = to_device(host_cache.key);
  DeviceTensor v = to_device(host_cache.value);
  DeviceTensor o = device_like(wl.output());
  if (c.output_head_stride != 0) {
    EXPECT_EQ(c.heads, 1) << "a head stride of its own needs one head";
    o.view.stride[1] = c.output_head_stride;
  }
  if (c.cache_head_stride != 0) {
    EXPECT_EQ(c.kv_heads, 1) << "a head stride of its own needs one KV head";
    k.view.stride[2] = v.view.stride[2] = c.cache_head_stride;
  }
  o.buffer.fill_bytes(0xFF);  // 0xFFFF is a NaN in f16 and bf16: unwritten elements show
  FlashAttnCuda impl(lp, c.tuning);
  const KVCacheView dev_cache{k.view, v.view};
  const auto plan = impl.plan(md, dev_cache, q.view.dtype, Stream{});
  impl.execute(*plan, q.view, dev_cache, o.view, Stream{});
  synchronize("FlashAttnCuda test case");
  // Run the same plan again on a poisoned output: state a run leaves behind (the split
  // counters) must not change the next run's result.
  o.buffer.fill_bytes(0xFF);
  impl.execute(*plan, q.view, dev_cache, o.view, Stream{});
  synchronize("FlashAttnCuda test case, second run");
  copy_to_host(o, wl.output());

  Outcome out;
  out.summary = FlashAttnCuda::summary(*plan);
  out.fp8_queries = plan->fp8_queries();
  EXPECT_EQ(out.fp8_queries, out.summary.prefill_products == "e4m3") << out.summary.describe();
  const TensorView ho = wl.output();
  const kernel::testing::OutputError e = kernel::testing::output_error(ho.data, ho.dtype, ref);
  out.max_abs = e.max_abs;
  out.rel_l2 = e.rel_l2;
  EXPECT_EQ(e.not_finite, 0) << "outputs not written or not finite; plan: " << out.summary.describe();
  // e4m3 products (the Hopper prefill on an fp8 cache) quantise the queries and the
  // probabilities to e4m3: their own bound (docs/kernels-fp8.md).
  const double tol = out.summary.prefill_products == "e4m3" ? kE4m3ProductsRelL2
                     : c.dtype == ScalarType::bf16          ? 1.6e-2
                                                            : 4e-3;
  EXPECT_LT(out.rel_l2, tol) << "plan: " << out.summary.describe();
  EXPECT_LT(out.max_abs, 25 * tol) << "plan: " << out.summary.describe();
  return out;
}

/// Writes the workload's new keys and values through the CUDA cache writer and through the
/// reference into the same initial caches; the two must agree byte for byte. Returns the
/// reference's key cache bytes.
std::vector<std::uint8_t> expect_cache_writes_match(const LayerParams& lp, PagedWorkload& wl) {
  const AttentionMetadata md = wl.metadata();
  KVCacheView hc = wl.cache();
  DeviceTensor k = to_device(hc.key), v = to_device(hc.value);
  DeviceTensor nk = to_device(wl.new_keys()), nv = to_device(wl.new_values());
  FlashAttnCuda impl(lp);
  impl.write_kv_cache(nk.view, nv.view, {k.view, v.view}, md);
  synchronize("cache writer");
  reference::write_kv_cache(lp, wl.new_keys(), wl.new_values(), hc, md);
  std::vector<std::uint8_t> got(span_bytes(hc.key)), want_k(span_bytes(hc.key)), want_v(span_bytes(hc.value));
  k.buffer.download(got.data(), got.size());
  std::memcpy(want_k.data(), hc.key.data, want_k.size());
  EXPECT_EQ(got, want_k) << "key cache";
  got.resize(want_v.size());
  v.buffer.download(got.data(), got.size());
  std::memcpy(want_v.data(), hc.value.data, want_v.size());
  EXPECT_EQ(got, want_v) << "value cache";
  return want_k;
}

std::vector<SequenceShape> decode_batch() { return {{1, 1}, {17, 1}, {131, 1}, {509, 1}, {1000, 1}}; }
std::vector<SequenceShape> prefill_batch() { return {{131, 131}, {200, 67}, {37, 37}}; }

// ---- everywhere ---------------------------------------------------------------------------

TEST(FlashAttnCudaHost, ReportsWhyItCannotRun) {
  if (testing::gpu_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(cuda_kernels_unavailable_reason().empty());
  LayerParams p;
  p.num_heads = 8;
  p.num_kv_heads = 2;
  p.head_size = 128;
  p.scale = 0.1f;
  try {
    (void)make_flash_attn_cuda_impl(p);
    FAIL() << "expected NotImplementedError";
  } catch (const NotImplementedError& e) {
    EXPECT_EQ(std::string(e.what()), cuda_kernels_unavailable_reason());
  }
}

TEST(FlashAttnCudaHost, GapsNameWhatIsNotComputed) {
  AttentionSelectorConfig c;
  c.head_size = 128;
  RuntimeEnv env;
  EXPECT_TRUE(flash_attn_cuda_gaps(c, env).empty());
  c.kv_cache_dtype = CacheDType::fp8_e4m3;
  EXPECT_TRUE(flash_attn_cuda_gaps(c, env).empty());
  c.kv_cache_dtype = CacheDType::fp8;
  EXPECT_TRUE(flash_attn_cuda_gaps(c, env).empty());
  c.use_per_head_quant_scales = true;  // computed: LayerParams::k_scales / v_scales
  c.use_batch_invariant = true;        // computed: LayerParams::batch_invariant (no splits)
  EXPECT_TRUE(flash_attn_cuda_gaps(c, env).empty());
  c.use_per_head_quant_scales = false;
  c.use_batch_invariant = false;
  c.kv_cache_dtype = CacheDType::fp8_e5m2;
  auto gaps = flash_attn_cuda_gaps(c, env);
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_NE(gaps[0].find("'fp8_e5m2' is not implemented"), std::string::npos) << gaps[0];
  c.kv_cache_dtype = CacheDType::auto_;
  c.head_size = 512;
  EXPECT_EQ(flash_attn_cuda_gaps(c, env).size(), 1u);
}

// Decode context parallelism merges the ranks' partial outputs by their log-sum-exps, which
// the decode kernel writes: FLASH_ATTN must not be refused under DCP for a missing LSE.
TEST(FlashAttnCudaHost, DcpIsNoGapTheDecodeKernelWritesTheLse) {
  EXPECT_TRUE(flash_attn_cuda_kernel_info().lse_output);
  AttentionSelectorConfig c;
  c.head_size = 128;
  c.use_dcp = true;
  EXPECT_EQ(flash_attn_cuda_gaps(c, RuntimeEnv{}), std::vector<std::string>{});
  c.kv_cache_dtype = CacheDType::fp8_e4m3;
  EXPECT_EQ(flash_attn_cuda_gaps(c, RuntimeEnv{}), std::vector<std::string>{});
}

// The head size the Hopper prefill computes and its key tile: 96 only on a 16-bit cache (the
// fp8 paths convert whole 64- and 128-column units), 176-key tiles up to d=128 there.
TEST(FlashAttnCudaHost, HopperHeadDimAndKeyTile) {
  EXPECT_EQ(hopper_head_dim(40, KvPath::b16), 64);
  EXPECT_EQ(hopper_head_dim(64, KvPath::e4m3), 64);
  EXPECT_EQ(hopper_head_dim(72, KvPath::b16), 96);
  EXPECT_EQ(hopper_head_dim(96, KvPath::b16), 96);
  EXPECT_EQ(hopper_head_dim(96, KvPath::e4m3), 128);
  EXPECT_EQ(hopper_head_dim(80, KvPath::f16_widened), 128);
  EXPECT_EQ(hopper_head_dim(104, KvPath::b16), 128);
  EXPECT_EQ(hopper_head_dim(192, KvPath::b16), 256);
  EXPECT_EQ(hopper_head_dim(264, KvPath::b16), 0);
  for (int d : {64, 96, 128}) {
    EXPECT_TRUE(hopper_wide_keys_apply(d, KvPath::b16)) << d;
    EXPECT_FALSE(hopper_wide_keys_apply(d, KvPath::e4m3)) << d;
    EXPECT_FALSE(hopper_wide_keys_apply(d, KvPath::f16_widened)) << d;
    EXPECT_EQ(hopper_key_tile(d, HopperVariant::wide_keys), 176) << d;
    EXPECT_EQ(hopper_key_tile(d, 0), 128) << d;
  }
  EXPECT_FALSE(hopper_wide_keys_apply(256, KvPath::b16));
  EXPECT_EQ(hopper_key_tile(256, HopperVariant::wide_keys), 80);
}

/// Page boxes read every 64-column chunk of a row whole: only unpadded head sizes of whole
/// chunks (a padded one would read the next head's columns), 16-bit caches, 16-key boxes.
TEST(FlashAttnCudaHost, PageBoxesOnlyWhereEveryChunkIsTheHeads) {
  for (int hs : {128, 256}) {
    EXPECT_TRUE(hopper_v_page_boxes_apply(hs, KvPath::b16, 16)) << hs;
    EXPECT_TRUE(decode_page_boxes_apply(hs, false, 16)) << hs;
    EXPECT_FALSE(hopper_v_page_boxes_apply(hs, KvPath::b16, 32)) << hs;
    EXPECT_FALSE(decode_page_boxes_apply(hs, false, 8)) << hs;
    EXPECT_FALSE(hopper_v_page_boxes_apply(hs, KvPath::f16_widened, 16)) << hs;
    EXPECT_FALSE(decode_page_boxes_apply(hs, true, 16)) << hs;
  }
  EXPECT_FALSE(hopper_v_page_boxes_apply(128, KvPath::e4m3, 16));
  for (int hs : {64, 96, 112, 192, 240}) {
    EXPECT_FALSE(hopper_v_page_boxes_apply(hs, KvPath::b16, 16)) << hs;
    EXPECT_FALSE(decode_page_boxes_apply(hs, false, 16)) << hs;
  }
}

/// The Hopper prefill's forms, chosen from the layer and the page size: 176-key tiles on a
/// 16-bit cache up to d=128 without a mask, unless they would shrink the page's TMA boxes;
/// page-boxed V at head sizes 128 and 256 where the boxes are 16 keys; neither on fp8 caches.
TEST(FlashAttnCudaHost, HopperFormsFollowTheLayerAndThePage) {
  constexpr int kWide = HopperVariant::wide_keys, kPages = HopperVariant::v_page_boxes;
  EXPECT_EQ(hopper_variant(128, KvPath::b16, false, 16), kWide | kPages);
  EXPECT_EQ(hopper_variant(128, KvPath::b16, true, 16), kPages);
  EXPECT_EQ(hopper_variant(64, KvPath::b16, false, 16), kWide);
  EXPECT_EQ(hopper_variant(96, KvPath::b16, true, 16), 0);
  EXPECT_EQ(hopper_variant(256, KvPath::b16, false, 16), kPages);
  EXPECT_EQ(hopper_variant(256, KvPath::b16, false, 32), kPages);  // 80-key tiles: 16-key boxes of any page
  EXPECT_EQ(hopper_variant(120, KvPath::b16, false, 16), kWide);  // padded to 128: no page boxes
  EXPECT_EQ(hopper_variant(128, KvPath::b16, false, 48), kWide | kPages);
  EXPECT_EQ(hopper_variant(128, KvPath::b16, false, 32), 0);   // 176 keys would cut 32-key boxes to 16
  EXPECT_EQ(hopper_variant(128, KvPath::b16, false, 128), 0);  // and 128-key boxes
  EXPECT_EQ(hopper_variant(128, KvPath::b16, false, 176), kWide);
  for (KvPath kv : {KvPath::e4m3, KvPath::f16_widened})
    for (int bs : {16, 128}) EXPECT_EQ(hopper_variant(128, kv, false, bs), 0);
}

// ---- on a GPU ---------------------------------------------------------------------------

TEST(FlashAttnCudaGpu, DecodeEveryHeadSizeAndCopyKind) {
  REQUIRE_GPU();
  const bool hopper = device_info(0).major >= 9;
  for (bool sm90 : {true, false})
    for (int hs = 8; hs <= 256; hs += 8) {
      SCOPED_TRACE("head_size " + std::to_string(hs) + (sm90 ? "" : " as on sm_80"));
      GpuCase c;
      c.head_size = hs;
      c.seqs = decode_batch();
      c.seed = static_cast<std::uint64_t>(hs);
      c.tuning.sm90_kernels = sm90;
      const Outcome o = check_case(c);
      EXPECT_GT(o.summary.decode_ctas, 0);
      // What runs: TMA boxes on sm_90 (the head size padded to 64s), page boxes at head
      // sizes 128 and 256.
      const char* want = !hopper || !sm90           ? "cp.async"
                         : hs == 128 || hs == 256 ? "tma page boxes"
                                                  : "tma";
      EXPECT_EQ(o.summary.decode_loads, want);
    }
}

/// Where a tensor map cannot address the cache (here a one-head cache whose unused head
/// stride is not a multiple of 16 bytes), the decode copies rows by bulk copies (fp8
/// caches: cp.async) at every padded head size.
TEST(FlashAttnCudaGpu, DecodeCopiesRowsWhereNoTensorMapFits) {
  REQUIRE_GPU();
  for (CacheDType kv : {CacheDType::auto_, CacheDType::fp8_e4m3})
    for (int hs : {40, 128, 136, 256}) {
      SCOPED_TRACE(fmt::format("head_size {} {}", hs, kv == CacheDType::auto_ ? "16-bit" : "fp8"));
      GpuCase c;
      c.heads = 4;
      c.kv_heads = 1;
      c.head_size = hs;
      c.kv_cache_dtype = kv;
      c.cache_head_stride = 4;
      c.seqs = decode_batch();
      c.seed = 1200 + static_cast<std::uint64_t>(hs);
      EXPECT_GT(check_case(c).summary.decode_ctas, 0);
    }
}

TEST(FlashAttnCudaGpu, TmaDecodeSlicesPagesAndWindows) {
  REQUIRE_GPU();
  const bool hopper = device_info(0).major >= 9;
  // Boxes of gcd(block, 64) keys (page boxes: 16 keys, every column); slices aligned to
  // them; windows whose first key is not box-aligned; sequence ends inside a box (the
  // unwritten slots are NaN). Head size 128 takes page boxes, 192 64-column boxes.
  for (int hs : {128, 192})
    for (int bs : {16, 32, 48, 128})
      for (bool split : {false, true}) {
        SCOPED_TRACE("head size " + std::to_string(hs) + " block " + std::to_string(bs) + (split ? " split" : ""));
        GpuCase c;
        c.heads = 16;
        c.kv_heads = 4;
        c.head_size = hs;
        c.block_size = bs;
        c.seqs = {{4099, 1}, {77, 1}, {1203, 3}};
        c.window = 1001;
        c.tuning.split_waves = split ? 4.0 : 0.01;
        const Outcome o = check_case(c);
        EXPECT_EQ(o.summary.max_splits > 1, split) << o.summary.describe();
        if (hopper) {
          EXPECT_EQ(o.summary.decode_loads, hs == 128 ? "tma page boxes" : "tma");
        }
        GpuCase h = c;
        h.layout = CacheLayout::hnd;
        h.window.reset();
        h.softcap = 7.0f;
        h.sinks = true;
        check_case(h);
      }
}

TEST(FlashAttnCudaGpu, PrefillEveryHeadSizePortableKernel) {
  REQUIRE_GPU();
  for (int hs = 8; hs <= 256; hs += 8) {
    SCOPED_TRACE("head_size " + std::to_string(hs));
    GpuCase c;
    c.heads = 4;
    c.head_size = hs;
    c.seqs = prefill_batch();
    c.tuning.sm90_kernels = false;
    c.seed = 100 + static_cast<std::uint64_t>(hs);
    const Outcome o = check_case(c);
    EXPECT_EQ(o.summary.prefill_kernel, "sm80-mma");
  }
}

TEST(FlashAttnCudaGpu, PrefillHopperKernelHeadSizesAndDtypes) {
  REQUIRE_GPU();
  const DeviceInfo dev = device_info(0);
  for (ScalarType dt : {ScalarType::bf16, ScalarType::f16})
    for (int hs : {64, 128, 256})
      for (bool causal : {true, false}) {
        SCOPED_TRACE("head_size " + std::to_string(hs) + (causal ? " causal " : " non-causal ") +
                     std::string(to_string(dt)));
        GpuCase c;
        c.heads = 4;
        c.head_size = hs;
        c.dtype = dt;
        c.causal = causal;
        c.seqs = {{131, 131}, {389, 257}, {61, 61}};
        const Outcome o = check_case(c);
        EXPECT_EQ(o.summary.prefill_kernel, dev.major == 9 && dev.minor == 0 ? "sm90-wgmma" : "sm80-mma");
      }
}

// Head sizes between 64, 96, 128 and 256 run as the next of those, the padded columns read
// as zeros by TMA and never stored (a store past the real head size would overwrite the next
// head's output, which the reference comparison catches). 96 computes 96 columns of its
// two 64-column chunks.
TEST(FlashAttnCudaGpu, PrefillHopperKernelEveryHeadSize) {
  REQUIRE_GPU();
  const DeviceInfo dev = device_info(0);
  for (int hs = 8; hs <= 256; hs += 8) {
    SCOPED_TRACE("head_size " + std::to_string(hs));
    GpuCase c;
    c.heads = 4;
    c.kv_heads = 2;
    c.head_size = hs;
    c.seqs = {{131, 131}, {389, 257}, {61, 61}};
    c.seed = 300 + static_cast<std::uint64_t>(hs);
    const Outcome o = check_case(c);
    const bool hopper = dev.major == 9 && dev.minor == 0;
    EXPECT_EQ(o.summary.prefill_kernel, hopper ? "sm90-wgmma" : "sm80-mma");
    if (hopper) {
      EXPECT_EQ(o.summary.prefill_head_dim, hs <= 64 ? 64 : hs <= 96 ? 96 : hs <= 128 ? 128 : 256);
    }
  }
}

TEST(FlashAttnCudaGpu, Fp16EveryPathAndGqaRatio) {
  REQUIRE_GPU();
  for (int group : {1, 2, 4, 8, 16})
    for (bool hopper : {true, false}) {
      SCOPED_TRACE("group " + std::to_string(group) + (hopper ? " hopper" : " portable"));
      GpuCase c;
      c.dtype = ScalarType::f16;
      c.kv_heads = 2;
      c.heads = 2 * group;
      c.head_size = 128;
      c.seqs = {{97, 97}, {263, 1}, {512, 3}, {71, 20}};
      c.tuning.sm90_kernels = hopper;
      check_case(c);
    }
}

TEST(FlashAttnCudaGpu, MultiQueryAttentionPacksManyHeads) {
  REQUIRE_GPU();
  GpuCase c;
  c.heads = 32;
  c.kv_heads = 1;
  c.head_size = 64;
  c.seqs = {{300, 1}, {45, 2}, {129, 129}};
  check_case(c);
}

TEST(FlashAttnCudaGpu, SlidingWindowCausalAndEncoder) {
  REQUIRE_GPU();
  for (bool hopper : {true, false}) {
    GpuCase c;
    c.window = 37;
    c.seqs = {{301, 301}, {700, 1}, {257, 40}};
    c.tuning.sm90_kernels = hopper;
    check_case(c);
    GpuCase e = c;
    e.attn_type = AttentionType::encoder_only;
    e.causal = false;
    e.seqs = {{301, 301}, {129, 129}};
    check_case(e);
  }
}

TEST(FlashAttnCudaGpu, SoftCapSinksAndAlibi) {
  REQUIRE_GPU();
  for (bool hopper : {true, false}) {
    GpuCase c;
    c.softcap = 5.0f;
    c.sinks = true;
    c.seqs = {{257, 257}, {1031, 1}, {90, 5}};
    c.tuning.sm90_kernels = hopper;
    check_case(c);
    GpuCase a = c;
    a.softcap = 0.0f;
    a.sinks = false;
    a.alibi = true;
    check_case(a);
  }
}

TEST(FlashAttnCudaGpu, NonCausalAndCrossAttention) {
  REQUIRE_GPU();
  GpuCase c;
  c.causal = false;
  c.seqs = {{211, 211}, {300, 7}};
  check_case(c);
  GpuCase x = c;
  x.attn_type = AttentionType::encoder_decoder;
  x.seqs = {{150, 40}, {77, 1}};  // decoder queries against encoder keys
  check_case(x);
}

TEST(FlashAttnCudaGpu, BlockSizesAndHndLayout) {
  REQUIRE_GPU();
  const bool hopper = device_info(0).major == 9 && device_info(0).minor == 0;
  for (int bs : {16, 32, 48, 128, 256})
    for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd}) {
      SCOPED_TRACE("block " + std::to_string(bs) + (layout == CacheLayout::nhd ? " NHD" : " HND"));
      GpuCase c;
      c.block_size = bs;
      c.layout = layout;
      c.seqs = {{389, 389}, {600, 1}, {255, 17}};
      check_case(c);
      // Unmasked at d=128: where a page gives 16-key boxes anyway (16, 48), the Hopper
      // prefill takes 176-key tiles and page-boxed V; larger boxes keep 128-key tiles.
      GpuCase n = c;
      n.causal = false;
      const Outcome o = check_case(n);
      const int want = std::gcd(bs, 128) == 16 ? HopperVariant::wide_keys | HopperVariant::v_page_boxes : 0;
      EXPECT_EQ(o.summary.prefill_variant, hopper ? want : 0) << o.summary.describe();
    }
}

TEST(FlashAttnCudaGpu, MixedBatchBothOrders) {
  REQUIRE_GPU();
  GpuCase c;
  c.seqs = {{523, 1}, {307, 307}, {2, 1}, {401, 113}, {1500, 1}};
  check_case(c);
  std::reverse(c.seqs.begin(), c.seqs.end());
  check_case(c);
}

TEST(FlashAttnCudaGpu, SplitKvDecodeMergesByLogSumExp) {
  REQUIRE_GPU();
  GpuCase c;
  c.heads = 32;
  c.kv_heads = 8;
  c.seqs = {{8191, 1}, {3001, 2}};
  const Outcome o = check_case(c);
  EXPECT_GT(o.summary.max_splits, 1) << o.summary.describe();
  EXPECT_GT(o.summary.merge_rows, 0);
  GpuCase s = c;
  s.sinks = true;
  s.window = 2000;
  const Outcome os = check_case(s);
  EXPECT_GT(os.summary.max_splits, 1) << os.summary.describe();
  GpuCase a = c;
  a.tuning.sm90_kernels = false;  // cp.async copies
  a.layout = CacheLayout::hnd;
  check_case(a);
  GpuCase d = c;
  d.tuning.split_waves = 4.0;
  d.heads = 64;  // group 8: two query tokens make a row tile of 16; {3001, 2} also has two
  const Outcome od = check_case(d);
  EXPECT_GT(od.summary.max_splits, 1) << od.summary.describe();
}

TEST(FlashAttnCudaGpu, BatchInvariantModeGivesTheSameBitsAloneAndInABatch) {
  REQUIRE_GPU();
  GpuCase c;
  c.heads = 32;
  c.kv_heads = 8;
  c.seqs = {{8191, 1}, {3001, 1}, {700, 1}, {5000, 1}, {129, 1}, {2047, 1}};
  for (bool invariant : {false, true}) {
    SCOPED_TRACE(invariant ? "batch-invariant" : "default");
    c.batch_invariant = invariant;
    const Outcome o = check_case(c);  // correct either way
    EXPECT_EQ(o.summary.max_splits == 1, invariant) << o.summary.describe();

    // Sequence 0 (query token 0) alone, then within the batch: same inputs, same bits.
    WorkloadSpec spec;
    spec.num_heads = c.heads;
    spec.num_kv_heads = c.kv_heads;
    spec.head_size = c.head_size;
    spec.sequences = c.seqs;
    PagedWorkload wl(spec);
    const KVCacheView hc = wl.cache();
    DeviceTensor q = to_device(wl.query()), k = to_device(hc.key), v = to_device(hc.value);
    DeviceTensor o_batch = device_like(wl.output()), o_alone = device_like(wl.output());
    FlashAttnCuda impl(layer_params(c));
    const AttentionMetadata md = wl.metadata();
    const KVCacheView dev_cache{k.view, v.view};
    const auto batch_plan = impl.plan(md, dev_cache, q.view.dtype, Stream{});
    impl.execute(*batch_plan, q.view, dev_cache, o_batch.view, Stream{});
    AttentionMetadata one = md;
    const std::vector<std::int32_t> qsl = {0, 1}, lens = {md.seq_lens[0]};
    one.num_seqs = 1;
    one.num_actual_tokens = 1;
    one.query_start_loc = qsl;
    one.seq_lens = lens;
    one.block_table = md.block_table.subspan(0, static_cast<std::size_t>(md.max_blocks_per_seq));
    one.slot_mapping = md.slot_mapping.subspan(0, 1);
    one.max_query_len = 1;
    one.max_seq_len = lens[0];
    auto first_token = [](TensorView t) {
      t.shape[0] = 1;
      return t;
    };
    const auto alone_plan = impl.plan(one, dev_cache, q.view.dtype, Stream{});
    impl.execute(*alone_plan, first_token(q.view), dev_cache, first_token(o_alone.view), Stream{});
    synchronize("batch-invariance case");
    const PlanSummary alone = FlashAttnCuda::summary(*alone_plan), batch = FlashAttnCuda::summary(*batch_plan);
    if (!invariant) {  // what the mode prevents: alone, sequence 0 is split differently
      EXPECT_NE(alone.max_splits, batch.max_splits) << alone.describe() << " / " << batch.describe();
      continue;
    }
    EXPECT_EQ(alone.max_splits, 1) << alone.describe();
    const std::size_t row_bytes = std::size_t(c.heads) * std::size_t(c.head_size) * 2;
    std::vector<std::uint8_t> a(span_bytes(o_alone.view)), b(span_bytes(o_batch.view));
    o_alone.buffer.download(a.data(), a.size());
    o_batch.buffer.download(b.data(), b.size());
    EXPECT_EQ(std::vector<std::uint8_t>(a.begin(), a.begin() + std::ptrdiff_t(row_bytes)),
              std::vector<std::uint8_t>(b.begin(), b.begin() + std::ptrdiff_t(row_bytes)));
  }
}

TEST(FlashAttnCudaGpu, CacheWriterMatchesReference) {
  REQUIRE_GPU();
  for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd}) {
    WorkloadSpec spec;
    spec.num_heads = 8;
    spec.num_kv_heads = 4;
    spec.head_size = 96;
    spec.block_size = 32;
    spec.layout = layout;
    spec.sequences = {{70, 70}, {33, 5}, {9, 1}};
    spec.fill_cache = false;
    PagedWorkload wl(spec);
    LayerParams lp;
    lp.num_heads = 8;
    lp.num_kv_heads = 4;
    lp.head_size = 96;
    lp.scale = 0.1f;
    expect_cache_writes_match(lp, wl);
  }
}

// ---- fp8 (e4m3) cache --------------------------------------------------------------------

/// The prefill kernel an fp8 batch takes: the Hopper one on sm_90 for head sizes that are
/// multiples of 16, else the portable one.
std::string fp8_prefill_kernel(int head_size) {
  const DeviceInfo dev = device_info(0);
  const bool hopper = dev.major == 9 && dev.minor == 0 && head_size % 16 == 0;
  return hopper ? "sm90-wgmma" : "sm80-mma";
}

GpuCase fp8_case() {
  GpuCase c;
  c.kv_cache_dtype = CacheDType::fp8_e4m3;
  c.k_scale = 0.05f;  // values in [-1, 1] are stored as up to ±20, well inside e4m3's ±448
  c.v_scale = 0.7f;
  return c;
}

TEST(FlashAttnCudaGpu, Fp8CacheOddLengthsGqaRatiosLayoutsAndDtypes) {
  REQUIRE_GPU();
  for (int group : {1, 4, 8})
    for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd})
      for (ScalarType dt : {ScalarType::bf16, ScalarType::f16}) {
        SCOPED_TRACE("group " + std::to_string(group) + (layout == CacheLayout::nhd ? " NHD " : " HND ") +
                     std::string(to_string(dt)));
        GpuCase c = fp8_case();
        c.dtype = dt;
        c.layout = layout;
        c.kv_heads = 2;
        c.heads = 2 * group;
        c.seqs = {{1, 1}, {131, 1}, {509, 2}, {389, 389}, {257, 67}, {61, 61}};
        c.seed = 300 + static_cast<std::uint64_t>(group);
        const Outcome o = check_case(c);
        EXPECT_TRUE(o.summary.kv_fp8);
        EXPECT_EQ(o.summary.prefill_kernel, fp8_prefill_kernel(c.head_size));
        EXPECT_NE(o.summary.decode_loads.find("fp8 "), std::string::npos) << o.summary.decode_loads;
      }
}

TEST(FlashAttnCudaGpu, Fp8CacheEveryHeadSize) {
  REQUIRE_GPU();
  for (int hs = 8; hs <= 256; hs += 8) {
    SCOPED_TRACE("head_size " + std::to_string(hs));
    GpuCase c = fp8_case();
    c.heads = 4;
    c.head_size = hs;
    c.seqs = {{131, 1}, {77, 77}, {200, 3}};
    c.seed = 400 + static_cast<std::uint64_t>(hs);
    const Outcome o = check_case(c);
    EXPECT_GT(o.summary.decode_ctas, 0);
    EXPECT_GT(o.summary.prefill_ctas, 0);
  }
}

TEST(FlashAttnCudaGpu, Fp8CacheSplitKvDecodeWithSinksSoftCapAndWindow) {
  REQUIRE_GPU();
  GpuCase c = fp8_case();
  c.heads = 32;
  c.kv_heads = 8;
  c.seqs = {{8191, 1}, {3001, 2}};
  c.sinks = true;
  c.softcap = 5.0f;
  const Outcome o = check_case(c);
  EXPECT_GT(o.summary.max_splits, 1) << o.summary.describe();
  GpuCase w = fp8_case();
  w.window = 37;
  w.alibi = true;
  w.seqs = {{301, 301}, {700, 1}, {257, 40}};
  check_case(w);
}

// Every finite e4m3 byte, subnormals and negative zero included, widens exactly. A query
// that sees a single key (one-token sequences in decode; the first token of a causal prefill)
// outputs that key's V row times v_scale, element by element, so a single byte value widened
// wrongly shows here (a relative-L2 check over random caches would average it away).
TEST(FlashAttnCudaGpu, Fp8CacheWidensEveryByteValueExactly) {
  REQUIRE_GPU();
  for (ScalarType dt : {ScalarType::bf16, ScalarType::f16})
    for (bool prefill : {false, true}) {
      SCOPED_TRACE(std::string(to_string(dt)) + (prefill ? " prefill" : " decode"));
      WorkloadSpec spec;
      spec.num_heads = 2;
      spec.num_kv_heads = 1;
      spec.head_size = 128;
      spec.dtype = dt;
      spec.kv_cache_dtype = CacheDType::fp8_e4m3;
      spec.v_scale = 0.75f;
      const int len = prefill ? 64 : 1;  // 64 tokens × 2 heads: the prefill kernel's batch
      spec.sequences = {{len, len}, {len, len}};
      PagedWorkload wl(spec);
      LayerParams lp;
      lp.num_heads = spec.num_heads;
      lp.num_kv_heads = spec.num_kv_heads;
      lp.head_size = spec.head_size;
      lp.scale = 0.1f;
      lp.kv_cache_dtype = spec.kv_cache_dtype;
      lp.v_scale = spec.v_scale;
      const KVCacheView hc = wl.cache();
      const AttentionMetadata md = wl.metadata();
      // Key 0 of the two sequences: V rows of 128 bytes, all 256 values once (NaNs as zero).
      auto* vbytes = static_cast<std::uint8_t*>(hc.value.data);
      for (int seq = 0; seq < 2; ++seq) {
        const std::int64_t page = md.block_table[static_cast<std::size_t>(seq * md.max_blocks_per_seq)];
        std::uint8_t* row = vbytes + page * hc.value.stride[0];  // token 0 of the page, KV head 0
        for (int d = 0; d < 128; ++d) {
          const int byte = seq * 128 + d;
          row[d] = static_cast<std::uint8_t>((byte & 0x7F) == 0x7F ? 0x00 : byte);
        }
      }
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(wl.num_tokens()));
      std::iota(tokens.begin(), tokens.end(), 0);
      const std::vector<double> ref = reference::attend(lp, wl.query(), hc, md, tokens);
      DeviceTensor q = to_device(wl.query());
      DeviceTensor k = to_device(hc.key);
      DeviceTensor v = to_device(hc.value);
      DeviceTensor o = device_like(wl.output());
      o.buffer.fill_bytes(0xFF);
      FlashAttnCuda impl(lp);
      const KVCacheView dev_cache{k.view, v.view};
      const auto plan = impl.plan(md, dev_cache, q.view.dtype, Stream{});
      EXPECT_EQ(FlashAttnCuda::summary(*plan).prefill_seqs, prefill ? 2 : 0);
      impl.execute(*plan, q.view, dev_cache, o.view, Stream{});
      synchronize("fp8 widening test");
      copy_to_host(o, wl.output());
      const TensorView ho = wl.output();
      const double rel = dt == ScalarType::bf16 ? 0x1p-8 : 0x1p-11;  // one rounding of the output
      for (int seq = 0; seq < 2; ++seq)
        for (std::int64_t e = 0; e < spec.num_heads * 128; ++e) {
          const std::int64_t i = std::int64_t(md.query_start_loc[static_cast<std::size_t>(seq)]) * spec.num_heads * 128 + e;
          const double want = ref[static_cast<std::size_t>(i)];
          ASSERT_NEAR(reference::load(ho.data, ho.dtype, i), want, std::abs(want) * rel) << "sequence " << seq << ", element " << e;
        }
    }
}

/// The fp8 cache writer against the reference, byte for byte, in both dtypes and layouts;
/// the per-layer key scale 0.004 (or per-head scales that include it) saturates some values.
void expect_fp8_writer_matches(const std::vector<float>& k_scales, const std::vector<float>& v_scales) {
  for (ScalarType dt : {ScalarType::bf16, ScalarType::f16})
    for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd}) {
      SCOPED_TRACE(std::string(to_string(dt)) + (layout == CacheLayout::nhd ? " NHD" : " HND"));
      WorkloadSpec spec;
      spec.num_heads = 8;
      spec.num_kv_heads = 4;
      spec.head_size = 72;
      spec.dtype = dt;
      spec.block_size = 32;
      spec.layout = layout;
      spec.kv_cache_dtype = CacheDType::fp8_e4m3;
      spec.value_range = 3.0f;  // with a key scale of 0.004 some values saturate at ±448
      spec.sequences = {{70, 70}, {33, 5}, {9, 1}};
      spec.fill_cache = false;
      PagedWorkload wl(spec);
      LayerParams lp;
      lp.num_heads = 8;
      lp.num_kv_heads = 4;
      lp.head_size = 72;
      lp.scale = 0.1f;
      lp.kv_cache_dtype = CacheDType::fp8_e4m3;
      lp.k_scale = 0.004f;
      lp.v_scale = 0.3f;
      lp.k_scales = k_scales;
      lp.v_scales = v_scales;
      const std::vector<std::uint8_t> keys = expect_cache_writes_match(lp, wl);
      EXPECT_NE(std::count(keys.begin(), keys.end(), std::uint8_t{0x7E}), 0) << "no value saturated at +448";
    }
}

TEST(FlashAttnCudaGpu, Fp8CacheWriterQuantisesLikeTheReference) {
  REQUIRE_GPU();
  expect_fp8_writer_matches({}, {});
}

// ---- fp8 cache with per-KV-head scales (vLLM's per-head quant scales) ---------------------

/// Distinct per-KV-head scales: keys 0.05, 0.09, 0.13, ... (values in [-1, 1] stored as up
/// to ±20, inside e4m3's ±448), values 0.5, 1.7, 3.1, ... (a head given another's scale
/// is off by a factor of at least 1.3).
GpuCase per_head_case(int kv_heads, int group) {
  GpuCase c = fp8_case();
  c.kv_heads = kv_heads;
  c.heads = kv_heads * group;
  for (int h = 0; h < kv_heads; ++h) {
    c.k_scales.push_back(0.05f + 0.04f * static_cast<float>(h));
    c.v_scales.push_back(0.5f + 1.2f * static_cast<float>(h) + 0.2f * static_cast<float>(h * h % 3));
  }
  return c;
}

TEST(FlashAttnCudaGpu, Fp8PerHeadScalesUnsplitDecodeAndPrefill) {
  REQUIRE_GPU();
  for (int group : {1, 4, 8})
    for (ScalarType dt : {ScalarType::bf16, ScalarType::f16}) {
      SCOPED_TRACE("group " + std::to_string(group) + " " + std::string(to_string(dt)));
      GpuCase c = per_head_case(group == 8 ? 3 : 5, group);
      c.dtype = dt;
      c.layout = group == 4 ? CacheLayout::hnd : CacheLayout::nhd;
      c.seqs = {{1, 1}, {131, 1}, {211, 2}, {389, 389}, {257, 67}, {61, 61}, {7, 1}};
      c.seed = 700 + static_cast<std::uint64_t>(group);
      const Outcome o = check_case(c);
      EXPECT_TRUE(o.summary.kv_fp8);
      EXPECT_EQ(o.summary.max_splits, 1) << "short sequences are not split: " << o.summary.describe();
      EXPECT_GT(o.summary.decode_ctas, 0);
      EXPECT_EQ(o.summary.prefill_kernel, fp8_prefill_kernel(c.head_size));
    }
}

TEST(FlashAttnCudaGpu, Fp8PerHeadScalesSplitKvDecodeMergesEachHeadWithItsScale) {
  REQUIRE_GPU();
  GpuCase c = per_head_case(8, 4);
  c.seqs = {{8191, 1}, {3001, 2}, {4099, 1}};
  c.sinks = true;
  c.softcap = 5.0f;  // the soft-cap's scale carries the head's k scale too
  const Outcome o = check_case(c);
  EXPECT_GT(o.summary.max_splits, 1) << o.summary.describe();
  EXPECT_GT(o.summary.merge_rows, 0) << o.summary.describe();
  GpuCase plain = per_head_case(8, 4);
  plain.seqs = c.seqs;
  plain.seed = 11;
  EXPECT_GT(check_case(plain).summary.max_splits, 1);
}

TEST(FlashAttnCudaGpu, Fp8PerHeadScalesWithVariantsAndOnlyOneSidePerHead) {
  REQUIRE_GPU();
  GpuCase w = per_head_case(4, 2);
  w.window = 37;
  w.alibi = true;
  w.head_size = 72;
  w.seqs = {{301, 301}, {700, 1}, {257, 40}, {13, 13}};
  check_case(w);
  // Per-head key scales with the layer's value scale, and the other way round.
  GpuCase k_only = per_head_case(4, 2);
  k_only.v_scales.clear();
  k_only.v_scale = 2.5f;
  k_only.seqs = {{509, 1}, {97, 97}, {2053, 1}};
  check_case(k_only);
  GpuCase v_only = per_head_case(4, 2);
  v_only.k_scales.clear();
  v_only.k_scale = 0.07f;
  v_only.seqs = k_only.seqs;
  check_case(v_only);
}

// ---- Hopper prefill: every form, and the fp8 cache ---------------------------------------

/// The Hopper prefill against the reference on odd and prime lengths, causal and not,
/// with chunked prefill (context before the queries), sliding windows, ALiBi, soft-cap and
/// sinks.
TEST(FlashAttnCudaGpu, HopperPrefillMasksAndChunkedPrefill) {
  REQUIRE_HOPPER();
  for (ScalarType dt : {ScalarType::bf16, ScalarType::f16})
    for (int hs : {40, 96, 128, 256})
      for (int variant = 0; variant < 3; ++variant) {
        SCOPED_TRACE(fmt::format("{} d={} variant {}", to_string(dt), hs, variant));
        GpuCase c;
        c.heads = 6;
        c.kv_heads = 2;
        c.head_size = hs;
        c.dtype = dt;
        // 100 queries: one warpgroup's 64 rows leave by TMA store, the other's 36 by its warps.
        // The next sequence's rows follow them, and its one-tile item finishes first: rows
        // stored past the item would overwrite its output.
        c.seqs = {{131, 131}, {389, 257}, {230, 100}, {61, 61}};
        if (variant == 0) c.seqs.push_back({1031, 523});
        c.seed = 900 + static_cast<std::uint64_t>(hs * 3 + variant);
        if (variant == 1) {
          c.causal = false;
          c.alibi = true;
          c.sinks = true;
        } else if (variant == 2) {
          c.window = 200;
          c.softcap = 8.0f;
        }
        const Outcome o = check_case(c);
        EXPECT_EQ(o.summary.prefill_kernel, "sm90-wgmma");
      }
}

/// The Hopper prefill stores full 64-row blocks of the output by TMA where a tensor map can
/// address the output; where none can (here a one-head output whose unused head stride is
/// not a multiple of 16 bytes), every row is written by the warps instead.
TEST(FlashAttnCudaGpu, HopperPrefillOutputTmaCannotAddress) {
  REQUIRE_HOPPER();
  GpuCase c;
  c.heads = 1;
  c.kv_heads = 1;
  c.head_size = 128;
  c.output_head_stride = 4;
  c.seqs = {{300, 300}, {517, 191}};
  c.seed = 977;
  EXPECT_EQ(check_case(c).summary.prefill_kernel, "sm90-wgmma");
}

/// Every form of the Hopper prefill (128- and 176-key tiles, 176 for unmasked layers up to
/// d=128; page-boxed V at head sizes 128 and 256) against the reference, both activation
/// dtypes: unmasked, causal with context before the queries, ALiBi with sinks, a window with
/// soft-cap, and sharp scores (16 times the scale: row maxima grow by more than 2^8 from tile
/// to tile, so the lazy rescale takes both branches, causal and not); and an fp8 cache with
/// both products (the e4m3 ones issuing each next tile's S ahead).
TEST(FlashAttnCudaGpu, HopperPrefillEveryForm) {
  REQUIRE_HOPPER();
  for (ScalarType dt : {ScalarType::bf16, ScalarType::f16})
    for (int hs : {64, 96, 128, 256})
      for (int kind = 0; kind < 7; ++kind) {
        if (kind == 5 && hs > 128) continue;  // e4m3 products take head sizes up to 128
        SCOPED_TRACE(fmt::format("{} d={} kind {}", to_string(dt), hs, kind));
        GpuCase c;
        c.dtype = dt;
        c.heads = 4;
        c.kv_heads = 2;
        c.head_size = hs;
        c.seqs = {{389, 389}, {61, 61}, {300, 100}};
        c.seed = 3000 + static_cast<std::uint64_t>(hs + kind);
        switch (kind) {
          case 0: c.causal = false; break;
          case 1: c.scale_mult = 16.0f; break;
          case 2:
            c.causal = false;
            c.alibi = true;
            c.sinks = true;
            break;
          case 3:
            c.window = 150;
            c.softcap = 8.0f;
            break;
          case 4:
            c.causal = false;
            c.scale_mult = 16.0f;
            break;
          default:
            c.kv_cache_dtype = CacheDType::fp8;
            c.k_scale = 0.25f;
            c.v_scale = 0.5f;
            c.causal = kind == 5;
            c.tuning.fp8_prefill = kind == 5 ? Fp8PrefillProducts::e4m3 : Fp8PrefillProducts::f16;
            break;
        }
        const Outcome o = check_case(c);
        EXPECT_EQ(o.summary.prefill_kernel, "sm90-wgmma");
        // Wide tiles only where no tile is masked: unmasked layers up to d=128, 16-bit cache;
        // page-boxed V at head sizes 128 and 256 of a 16-bit cache (16-key pages here).
        const bool b16 = c.kv_cache_dtype == CacheDType::auto_;
        int expected = 0;
        if (!c.causal && !c.window && hs <= 128 && b16) expected |= HopperVariant::wide_keys;
        if (b16 && (hs == 128 || hs == 256)) expected |= HopperVariant::v_page_boxes;
        EXPECT_EQ(o.summary.prefill_variant, expected) << o.summary.describe();
      }
}

/// fp8 (e4m3) cache through the Hopper prefill, with both products: every head size it
/// takes, both query dtypes, per-layer and per-KV-head scales. f16 products: the keys and values are exact in f16, so the error is the
/// probabilities' f16 rounding and the output's, asserted at the fp8 decode's bounds. e4m3
/// products: the queries and probabilities are rounded to e4m3 (3 mantissa bits), asserted
/// at their own bound (docs/kernels-fp8.md). Above d=128 the f16 products run (widened in
/// place) whichever products are asked for, and the summary says so.
TEST(FlashAttnCudaGpu, Fp8HopperPrefillErrorAgainstTheReference) {
  REQUIRE_HOPPER();
  for (Fp8PrefillProducts products : {Fp8PrefillProducts::e4m3, Fp8PrefillProducts::f16})
    for (ScalarType dt : {ScalarType::bf16, ScalarType::f16})
      for (int hs : {48, 64, 80, 96, 112, 128, 144, 192, 256})
        for (bool per_head : {false, true}) {
          const bool e4m3 = products == Fp8PrefillProducts::e4m3 && hs <= 128;
          SCOPED_TRACE(fmt::format("{} products, {} d={}{}", e4m3 ? "e4m3" : "f16", to_string(dt), hs,
                                   per_head ? " per-head scales" : ""));
          GpuCase c = per_head ? per_head_case(3, 2) : fp8_case();
          if (!per_head) {
            c.heads = 6;
            c.kv_heads = 3;
          }
          c.head_size = hs;
          c.dtype = dt;
          c.tuning.fp8_prefill = products;
          c.layout = hs % 32 == 0 ? CacheLayout::nhd : CacheLayout::hnd;
          c.seqs = {{131, 131}, {389, 257}, {61, 61}, {7, 1}};
          c.seed = 1100 + static_cast<std::uint64_t>(hs);
          const Outcome o = check_case(c);
          EXPECT_EQ(o.summary.prefill_kernel, "sm90-wgmma");
          EXPECT_EQ(o.summary.prefill_products, e4m3 ? "e4m3" : "f16");
          EXPECT_LT(o.rel_l2, e4m3 ? kE4m3ProductsRelL2 : dt == ScalarType::bf16 ? 8e-3 : 2e-3)
              << o.summary.describe();
          if (std::getenv("ATTNSEL_PRINT_ERRORS"))
          {
            std::printf("fp8 hopper prefill %s products %s d=%d per_head=%d rel_l2 %.3g max_abs %.3g\n",
                        e4m3 ? "e4m3" : "f16", std::string(to_string(dt)).c_str(), hs, int(per_head), o.rel_l2,
                        o.max_abs);
            std::fflush(stdout);  // the line survives a run stopped by a time limit
          }
        }
}

/// One case of the Latin square the two long fp8 prefill tests below walk (each GQA group
/// and head size meets every variant once): long, odd and prime lengths with chunked
/// prefill; variant 0 causal, 1 non-causal with ALiBi and sinks (f16 queries), 2 a sliding
/// window with soft-cap and sinks.
GpuCase long_fp8_prefill_case(int group, int head_size, int variant, std::uint64_t seed_base) {
  GpuCase c = fp8_case();
  c.kv_heads = 2;
  c.heads = 2 * group;
  c.head_size = head_size;
  c.dtype = variant == 1 ? ScalarType::f16 : ScalarType::bf16;
  c.seqs = {{1031, 131}, {389, 389}, {127, 127}, {211, 1}};  // the first item's rows see 8-15 key tiles
  c.seed = seed_base + static_cast<std::uint64_t>(head_size * 3 + group * 11 + variant);
  if (variant == 1) {
    c.causal = false;
    c.alibi = true;
    c.sinks = true;
  } else if (variant == 2) {
    c.window = 300;
    c.softcap = 8.0f;
    c.sinks = true;
  }
  return c;
}

/// Runs `check(case, variant)` (it adjusts the case, runs it and returns the outcome) on the long fp8
/// prefill cases of GQA 1, 4 and 8 at each of three head sizes, the variants rotating;
/// ATTNSEL_PRINT_ERRORS=1 prints each case's error.
template <class Check>
void for_each_long_fp8_prefill_case(const int (&head_sizes)[3], std::uint64_t seed_base, Check check) {
  const int groups[3] = {1, 4, 8};
  for (int gi = 0; gi < 3; ++gi)
    for (int hi = 0; hi < 3; ++hi) {
      const int group = groups[gi], hs = head_sizes[hi], variant = (gi + hi) % 3;
      SCOPED_TRACE(fmt::format("group {} d={} variant {}", group, hs, variant));
      GpuCase c = long_fp8_prefill_case(group, hs, variant, seed_base);
      const Outcome o = check(c, variant);
      if (std::getenv("ATTNSEL_PRINT_ERRORS")) {
        std::printf("fp8 hopper prefill %s products group %d d=%d variant %d rel_l2 %.3g max_abs %.3g\n",
                    o.summary.prefill_products.c_str(), group, hs, variant, o.rel_l2, o.max_abs);
        std::fflush(stdout);
      }
    }
}

/// The e4m3 products on long, odd and prime lengths (many 128-key tiles, the three-stage
/// rings wrapping), GQA 1, 4 and 8, head sizes 64, 96 and 128, causal and not, chunked
/// prefill, sliding windows, soft-cap, ALiBi and sinks (the sink joins a row sum that carries
/// the probabilities' factor 256).
TEST(FlashAttnCudaGpu, Fp8HopperPrefillE4m3ProductsGqaMasksAndLongSequences) {
  REQUIRE_HOPPER();
  for_each_long_fp8_prefill_case({64, 96, 128}, 1300, [](GpuCase& c, int) {
    c.tuning.fp8_prefill = Fp8PrefillProducts::e4m3;
    const Outcome o = check_case(c);
    EXPECT_EQ(o.summary.prefill_products, "e4m3") << o.summary.describe();
    return o;
  });
}

/// With no choice made, an fp8 cache's Hopper prefill multiplies e4m3 queries and
/// probabilities up to head size 128, as vLLM's FLASH_ATTN does (FlashAttention-3 with the
/// query quantised), and says so through StepPlan::fp8_queries; above 128, and for
/// decode-only batches and 16-bit caches, it does not.
TEST(FlashAttnCudaGpu, Fp8HopperPrefillDefaultsToE4m3ProductsUpToHeadSize128) {
  REQUIRE_HOPPER();
  if (const char* v = std::getenv("ATTNSEL_CUDA_FP8_PREFILL"); v != nullptr && *v != '\0')
    GTEST_SKIP() << "ATTNSEL_CUDA_FP8_PREFILL chooses for the planner";
  struct Want {
    int head_size;
    CacheDType cache;
    std::vector<SequenceShape> seqs;
    bool fp8_queries;
  };
  const Want cases[] = {{128, CacheDType::fp8_e4m3, {{300, 300}, {77, 1}}, true},
                        {64, CacheDType::fp8_e4m3, {{131, 131}}, true},
                        {256, CacheDType::fp8_e4m3, {{300, 300}}, false},
                        {128, CacheDType::fp8_e4m3, {{300, 1}, {77, 1}}, false},
                        {128, CacheDType::auto_, {{300, 300}}, false}};
  for (const Want& w : cases) {
    SCOPED_TRACE(fmt::format("d={} {} cache, {} sequences", w.head_size, cache_dtype_name(w.cache), w.seqs.size()));
    GpuCase c = fp8_case();
    c.kv_cache_dtype = w.cache;
    c.head_size = w.head_size;
    c.kv_heads = 2;
    c.heads = 8;
    c.seqs = w.seqs;
    const Outcome o = check_case(c);
    EXPECT_EQ(o.fp8_queries, w.fp8_queries) << o.summary.describe();
  }
}

/// Head sizes above 128 on an fp8 cache (f16 products, the raw tiles widened in place in
/// their f16 stage): long, odd and prime lengths (many 80-key tiles, the two-stage ring
/// wrapping), GQA 1, 4 and 8, causal and not, chunked prefill, sliding windows, soft-cap,
/// ALiBi and sinks.
TEST(FlashAttnCudaGpu, Fp8HopperPrefillHeadSizesAbove128GqaMasksAndLongSequences) {
  REQUIRE_HOPPER();
  for_each_long_fp8_prefill_case({160, 208, 256}, 1400, [](GpuCase& c, int variant) {
    c.layout = variant == 2 ? CacheLayout::hnd : CacheLayout::nhd;
    const Outcome o = check_case(c);
    EXPECT_EQ(o.summary.prefill_kernel, "sm90-wgmma") << o.summary.describe();
    EXPECT_EQ(o.summary.prefill_products, "f16") << o.summary.describe();
    EXPECT_LT(o.rel_l2, c.dtype == ScalarType::bf16 ? 8e-3 : 2e-3) << o.summary.describe();
    return o;
  });
}

/// bf16 queries beyond the half's range (3e5) and tiny ones (1e-6): the fp8 Hopper prefill
/// scales each query row, by a power of two before its f16 products, or to e4m3's range.
TEST(FlashAttnCudaGpu, Fp8HopperPrefillQueriesBeyondTheHalfRangeAndTiny) {
  REQUIRE_GPU();
  for (Fp8PrefillProducts products : {Fp8PrefillProducts::e4m3, Fp8PrefillProducts::f16})
    for (float range : {3e5f, 1e-6f}) {
      const bool e4m3 = products == Fp8PrefillProducts::e4m3;
      SCOPED_TRACE(fmt::format("{} products, query range {}", e4m3 ? "e4m3" : "f16", range));
      WorkloadSpec spec;
      spec.num_heads = 4;
      spec.num_kv_heads = 2;
      spec.head_size = 128;
      spec.dtype = ScalarType::bf16;
      spec.kv_cache_dtype = CacheDType::fp8_e4m3;
      spec.k_scale = 0.05f;
      spec.v_scale = 0.7f;
      spec.query_range = range;
      spec.sequences = {{257, 257}, {300, 131}};
      PagedWorkload wl(spec);
      LayerParams lp;
      lp.num_heads = 4;
      lp.num_kv_heads = 2;
      lp.head_size = 128;
      lp.scale = 1.0f / (range * 20.0f);  // logits of order 1
      lp.kv_cache_dtype = CacheDType::fp8_e4m3;
      lp.k_scale = spec.k_scale;
      lp.v_scale = spec.v_scale;
      const AttentionMetadata md = wl.metadata();
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(wl.num_tokens()));
      std::iota(tokens.begin(), tokens.end(), 0);
      const std::vector<double> ref = reference::attend(lp, wl.query(), wl.cache(), md, tokens);
      const KVCacheView hc = wl.cache();
      DeviceTensor q = to_device(wl.query()), k = to_device(hc.key), v = to_device(hc.value);
      DeviceTensor o = device_like(wl.output());
      o.buffer.fill_bytes(0xFF);
      CudaTuning tuning;
      tuning.fp8_prefill = products;
      FlashAttnCuda impl(lp, tuning);
      const KVCacheView dev_cache{k.view, v.view};
      const auto plan = impl.plan(md, dev_cache, q.view.dtype, Stream{});
      EXPECT_EQ(FlashAttnCuda::summary(*plan).prefill_kernel, fp8_prefill_kernel(128));
      impl.execute(*plan, q.view, dev_cache, o.view, Stream{});
      synchronize("fp8 prefill query range test");
      copy_to_host(o, wl.output());
      const TensorView ho = wl.output();
      double e2 = 0.0, r2 = 0.0;
      std::int64_t bad = 0;
      for (std::size_t i = 0; i < ref.size(); ++i) {
        const double got = reference::load(ho.data, ho.dtype, static_cast<std::int64_t>(i));
        if (!std::isfinite(got)) {
          ++bad;
          continue;
        }
        e2 += (got - ref[i]) * (got - ref[i]);
        r2 += ref[i] * ref[i];
      }
      EXPECT_EQ(bad, 0);
      EXPECT_LT(std::sqrt(e2 / r2), e4m3 ? kE4m3ProductsRelL2 : 8e-3);
      if (std::getenv("ATTNSEL_PRINT_ERRORS"))
        std::printf("fp8 hopper prefill %s products query range %g rel_l2 %.3g\n", e4m3 ? "e4m3" : "f16", range,
                    std::sqrt(e2 / r2));
    }
}

TEST(FlashAttnCudaGpu, Fp8PerHeadScalesCacheWriterMatchesTheReferenceBytes) {
  REQUIRE_GPU();
  expect_fp8_writer_matches({0.004f, 0.5f, 1.7f, 3.1f}, {0.3f, 2.9f, 0.011f, 1.3f});
}

TEST(FlashAttnCudaGpu, RejectsHostTensorsAndMisalignedStrides) {
  REQUIRE_GPU();
  WorkloadSpec spec;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.head_size = 64;
  spec.sequences = {{20, 20}};
  PagedWorkload wl(spec);
  GpuCase shape;
  shape.heads = 4;
  shape.head_size = 64;
  const LayerParams lp = layer_params(shape);
  FlashAttnCuda impl(lp);
  KVCacheView hc = wl.cache();
  DeviceTensor k = to_device(hc.key), v = to_device(hc.value), o = device_like(wl.output());
  EXPECT_THROW(impl.forward(wl.query(), {k.view, v.view}, wl.metadata(), o.view), ValueError);
  DeviceTensor q = to_device(wl.query());
  TensorView skewed = q.view;
  skewed.stride[0] = 4 * 64 + 4;  // rows no longer 16-byte aligned
  EXPECT_THROW(impl.forward(skewed, {k.view, v.view}, wl.metadata(), o.view), ValueError);
  LayerParams e5m2 = lp;
  e5m2.kv_cache_dtype = CacheDType::fp8_e5m2;
  EXPECT_THROW(FlashAttnCuda{e5m2}, NotImplementedError);
  // An fp8 layer needs an fp8 (or u8) cache, and a 16-bit layer a cache of its own dtype.
  LayerParams fp8 = lp;
  fp8.kv_cache_dtype = CacheDType::fp8_e4m3;
  FlashAttnCuda fp8_impl(fp8);
  EXPECT_THROW(fp8_impl.forward(q.view, {k.view, v.view}, wl.metadata(), o.view), ValueError);
}

}  // namespace
}  // namespace attnsel::kernel::cuda
