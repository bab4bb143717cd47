// Per-KV-head fp8 quantization scales (LayerParams::k_scales / v_scales): validation, the
// reference (reader and writer) against the per-layer-scale reference one head at a time,
// and CPU_ATTN (forward and cache writer) against the reference.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernel_test_util.hpp"
#include "kernels/attention/cpu/cpu_attention.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::kernel {
namespace {

using runtime::CacheLayout;
using runtime::layer_params_for;
using runtime::PagedWorkload;
using runtime::SequenceShape;
using runtime::WorkloadSpec;
using testing::expect_value_error;

// Distinct scales per KV head (every head's own value matters).
std::vector<float> distinct_scales(int kv_heads, float first, float step) {
  std::vector<float> s;
  for (int h = 0; h < kv_heads; ++h) s.push_back(first + step * static_cast<float>(h));
  return s;
}

WorkloadSpec fp8_spec(CacheDType kv_cache_dtype, int heads, int kv_heads, int head_size) {
  WorkloadSpec spec;
  spec.num_heads = heads;
  spec.num_kv_heads = kv_heads;
  spec.head_size = head_size;
  spec.dtype = ScalarType::bf16;
  spec.kv_cache_dtype = kv_cache_dtype;
  // Values in [-1, 1] stored as up to ±1/0.05 = ±20 (inside e4m3's ±448); the heads'
  // scales differ by up to 6x so that using the wrong one is visible.
  spec.k_scales = distinct_scales(kv_heads, 0.05f, 0.07f);
  spec.v_scales = distinct_scales(kv_heads, 0.5f, 1.2f);
  spec.sequences = {{1, 1}, {61, 1}, {17, 17}, {131, 3}, {7, 1}};
  spec.seed = 23;
  return spec;
}

LayerParams fp8_layer(int kv_heads) {
  LayerParams p;
  p.num_heads = 8;
  p.num_kv_heads = kv_heads;
  p.head_size = 64;
  p.scale = 0.125f;
  p.kv_cache_dtype = CacheDType::fp8;
  return p;
}

TEST(PerHeadScales, ValidationNamesTheExpectedLength) {
  LayerParams p = fp8_layer(4);
  p.k_scales = {0.5f, 1.7f, 3.1f, 0.2f};
  p.v_scales = {1.0f, 2.0f, 3.0f, 4.0f};
  EXPECT_NO_THROW(validate_layer_params(p));
  p.k_scales = {0.5f, 1.7f, 3.1f};
  expect_value_error([&] { validate_layer_params(p); },
                     "k_scales has 3 entries; it must be empty (one scale per layer) or have one per KV head: "
                     "num_kv_heads = 4");
  p.k_scales.clear();  // empty: the per-layer k_scale
  EXPECT_NO_THROW(validate_layer_params(p));
  p.v_scales = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f};  // one per query head is not one per KV head
  expect_value_error([&] { validate_layer_params(p); }, "v_scales has 8 entries; it must be empty (one scale per layer) "
                                                        "or have one per KV head: num_kv_heads = 4");
  // A wrong length is a wrong layer even where the cache does not use the scales.
  p.kv_cache_dtype = CacheDType::auto_;
  expect_value_error([&] { validate_layer_params(p); }, "v_scales has 8 entries");
}

TEST(PerHeadScales, ValidationRejectsNonFiniteAndNonPositiveScales) {
  LayerParams p = fp8_layer(2);
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    p.k_scales = {1.0f, bad};
    expect_value_error([&] { validate_layer_params(p); }, "k_scales[1] = ");
    expect_value_error([&] { validate_layer_params(p); }, "per-head quantization scales must be positive finite numbers");
    p.k_scales.clear();
    p.v_scales = {bad, 1.0f};
    expect_value_error([&] { validate_layer_params(p); }, "v_scales[0] = ");
    p.v_scales.clear();
  }
  // The implementations validate at construction.
  p.k_scales = {1.0f};
  expect_value_error([&] { cpu::make_cpu_attention_impl(p); }, "k_scales has 1 entries");
  expect_value_error([&] { reference::make_reference_impl(p); }, "k_scales has 1 entries");
}

// The per-head reference must equal, head by head, the per-layer reference run with that
// head's scale: both read the same cache and only the scale of the KV head differs.
TEST(PerHeadScales, ReferenceEqualsThePerLayerReferenceOfEachHead) {
  for (CacheDType kv : {CacheDType::fp8_e4m3, CacheDType::fp8_e5m2}) {
    const WorkloadSpec spec = fp8_spec(kv, 12, 3, 32);  // GQA: 4 query heads per KV head
    PagedWorkload w(spec);
    const LayerParams per_head = layer_params_for(spec);
    const std::vector<double> got = testing::reference_outputs(per_head, w);
    const int group = spec.num_heads / spec.num_kv_heads, D = spec.head_size;
    for (int kvh = 0; kvh < spec.num_kv_heads; ++kvh) {
      LayerParams scalar = per_head;
      scalar.k_scales.clear();
      scalar.v_scales.clear();
      scalar.k_scale = spec.k_scales[static_cast<std::size_t>(kvh)];
      scalar.v_scale = spec.v_scales[static_cast<std::size_t>(kvh)];
      const std::vector<double> want = testing::reference_outputs(scalar, w);
      // A different head's scale gives different outputs for this head's group.
      LayerParams wrong = scalar;
      wrong.k_scale = spec.k_scales[static_cast<std::size_t>((kvh + 1) % spec.num_kv_heads)];
      wrong.v_scale = spec.v_scales[static_cast<std::size_t>((kvh + 1) % spec.num_kv_heads)];
      const std::vector<double> other = testing::reference_outputs(wrong, w);
      double diff = 0.0;
      for (int t = 0; t < w.num_tokens(); ++t)
        for (int h = kvh * group; h < (kvh + 1) * group; ++h)
          for (int d = 0; d < D; ++d) {
            const auto i = (static_cast<std::size_t>(t) * static_cast<std::size_t>(spec.num_heads) +
                            static_cast<std::size_t>(h)) * static_cast<std::size_t>(D) + static_cast<std::size_t>(d);
            ASSERT_EQ(got[i], want[i]) << cache_dtype_name(kv) << " token " << t << " head " << h << " dim " << d;
            diff = std::max(diff, std::abs(other[i] - want[i]));
          }
      EXPECT_GT(diff, 1e-3) << cache_dtype_name(kv) << ": the scale of KV head " << kvh << " made no difference";
    }
  }
}

// Writing with per-head scales equals, head by head, writing with that head's scale.
TEST(PerHeadScales, ReferenceWriterQuantisesEachHeadWithItsScale) {
  for (CacheDType kv : {CacheDType::fp8_e4m3, CacheDType::fp8_e5m2}) {
    WorkloadSpec spec = fp8_spec(kv, 4, 4, 32);
    spec.sequences = {{19, 19}, {40, 3}, {1, 1}};
    spec.fill_cache = false;
    PagedWorkload per_head(spec);
    reference::write_kv_cache(layer_params_for(spec), per_head.new_keys(), per_head.new_values(), per_head.cache(),
                              per_head.metadata());
    const KVCacheView got = per_head.cache();
    for (int kvh = 0; kvh < spec.num_kv_heads; ++kvh) {
      PagedWorkload scalar(spec);
      LayerParams p = layer_params_for(spec);
      p.k_scales.clear();
      p.v_scales.clear();
      p.k_scale = spec.k_scales[static_cast<std::size_t>(kvh)];
      p.v_scale = spec.v_scales[static_cast<std::size_t>(kvh)];
      reference::write_kv_cache(p, scalar.new_keys(), scalar.new_values(), scalar.cache(), scalar.metadata());
      const KVCacheView want = scalar.cache();
      int compared = 0;
      for (std::int64_t b = 0; b < got.key.shape[0]; ++b)
        for (std::int64_t s = 0; s < got.key.shape[1]; ++s)
          for (const auto& [g, x] : {std::pair{&got.key, &want.key}, std::pair{&got.value, &want.value}}) {
            const std::int64_t off = b * g->stride[0] + s * g->stride[1] + kvh * g->stride[2];
            ASSERT_EQ(std::memcmp(static_cast<const std::uint8_t*>(g->data) + off,
                                  static_cast<const std::uint8_t*>(x->data) + off,
                                  static_cast<std::size_t>(spec.head_size)),
                      0)
                << cache_dtype_name(kv) << " block " << b << " slot " << s << " KV head " << kvh;
            ++compared;
          }
      EXPECT_GT(compared, 0);
    }
  }
}

// A 16-bit cache ignores per-head scales as it ignores the scalar ones.
TEST(PerHeadScales, UnquantisedCachesIgnoreThem) {
  WorkloadSpec spec = fp8_spec(CacheDType::auto_, 4, 2, 32);
  PagedWorkload w(spec);
  LayerParams with = layer_params_for(spec), without = with;
  without.k_scales.clear();
  without.v_scales.clear();
  EXPECT_EQ(testing::reference_outputs(with, w), testing::reference_outputs(without, w));
}

// CPU_ATTN does not declare per-head scales (vLLM's CPU backend does not) but computes them:
// it scales each KV head of a work item by that head's factors.
TEST(PerHeadScales, CpuAttentionMatchesTheReference) {
  for (CacheDType kv : {CacheDType::fp8_e4m3, CacheDType::fp8_e5m2})
    for (auto [heads, kv_heads] : {std::pair{8, 8}, {12, 3}, {8, 2}}) {
      const WorkloadSpec spec = fp8_spec(kv, heads, kv_heads, 64);
      PagedWorkload w(spec);
      const LayerParams p = layer_params_for(spec);
      const std::vector<double> ref = testing::reference_outputs(p, w);
      cpu::CpuAttentionOptions o;
      o.num_threads = 2;
      for (bool bf16 : {false, true}) {
        o.allow_bf16_dot = bf16;
        testing::expect_matches(*cpu::make_cpu_attention_impl(p, o), w, ref, testing::describe(spec, p));
      }
    }
}

TEST(PerHeadScales, CpuAttentionSplitSequenceMergesWithPerHeadScales) {
  // One long decode split across threads: partials carry each head's v scale.
  WorkloadSpec spec = fp8_spec(CacheDType::fp8_e4m3, 4, 2, 128);
  spec.sequences = {{2053, 1}};
  PagedWorkload w(spec);
  LayerParams p = layer_params_for(spec);
  p.sinks = {0.5f, -1.0f, 2.0f, 0.0f};
  cpu::CpuAttentionOptions o;
  o.num_threads = 3;
  testing::expect_matches_reference(*cpu::make_cpu_attention_impl(p, o), w, "split decode, per-head scales");
  // Only one of the two per head: the other is the layer's scalar.
  p.v_scales.clear();
  p.v_scale = 2.5f;
  testing::expect_matches_reference(*cpu::make_cpu_attention_impl(p, o), w, "per-head k, per-layer v");
}

TEST(PerHeadScales, CpuCacheWriterMatchesTheReferenceBitForBit) {
  for (CacheDType kv : {CacheDType::fp8_e4m3, CacheDType::fp8_e5m2})
    for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd}) {
      WorkloadSpec spec = fp8_spec(kv, 6, 3, 32);
      spec.layout = layout;
      spec.sequences = {{19, 19}, {40, 3}, {1, 1}};
      spec.fill_cache = false;
      PagedWorkload a(spec), b(spec);
      const LayerParams p = layer_params_for(spec);
      cpu::make_cpu_attention_impl(p)->write_kv_cache(a.new_keys(), a.new_values(), a.cache(), a.metadata());
      reference::write_kv_cache(p, b.new_keys(), b.new_values(), b.cache(), b.metadata());
      const KVCacheView ca = a.cache(), cb = b.cache();
      const std::size_t bytes = static_cast<std::size_t>(ca.key.numel()) * element_size(ca.key.dtype);
      EXPECT_EQ(std::memcmp(ca.key.data, cb.key.data, bytes), 0) << cache_dtype_name(kv);
      EXPECT_EQ(std::memcmp(ca.value.data, cb.value.data, bytes), 0) << cache_dtype_name(kv);
    }
}

TEST(PerHeadScales, WriteThenAttendOnCpu) {
  WorkloadSpec spec = fp8_spec(CacheDType::fp8, 8, 2, 128);
  spec.sequences = {{40, 40}, {77, 1}};
  PagedWorkload w(spec);
  const auto impl = cpu::make_cpu_attention_impl(layer_params_for(spec));
  impl->write_kv_cache(w.new_keys(), w.new_values(), w.cache(), w.metadata());
  testing::expect_matches_reference(*impl, w, "write then attend, per-head scales");
}

}  // namespace
}  // namespace attnsel::kernel
