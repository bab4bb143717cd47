// CPU_ATTN's kernels against the double-precision reference: every head size, GQA ratio,
// dtype, kv-cache dtype, variant and layout CPU_ATTN declares, on odd and prime lengths,
// with prefill and decode mixed in both orders; on every SIMD target this machine runs.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/attention/cpu/cpu_attention.hpp"
#include "kernels/attention/cpu/work.hpp"
#include "kernel_test_util.hpp"

namespace attnsel::kernel::cpu {
namespace {

using runtime::CacheLayout;
using runtime::PagedWorkload;
using runtime::SequenceShape;
using runtime::WorkloadSpec;
using testing::describe;
using testing::expect_matches_reference;
using runtime::layer_params_for;

// Decode and prefill mixed, both orders, odd and prime lengths.
const std::vector<SequenceShape> kMixed = {{1, 1}, {61, 1}, {17, 17}, {131, 3}, {7, 1}};
const std::vector<SequenceShape> kPrefillFirst = {{37, 37}, {131, 1}, {19, 5}, {1, 1}};

struct Case {
  WorkloadSpec spec;
  LayerParams params;
  CpuAttentionOptions options;
};

Case make_case(ScalarType dtype, int heads, int kv_heads, int head_size, std::vector<SequenceShape> seqs) {
  Case c;
  c.spec.dtype = dtype;
  c.spec.num_heads = heads;
  c.spec.num_kv_heads = kv_heads;
  c.spec.head_size = head_size;
  c.spec.sequences = std::move(seqs);
  c.spec.seed = static_cast<std::uint64_t>(heads * 131 + kv_heads * 17 + head_size);
  c.params = layer_params_for(c.spec);
  c.options.num_threads = 2;
  return c;
}

// The SIMD variants this machine runs: every Highway target it supports (and, on
// AVX-512, with and without BF16 dot products).
struct Variant {
  std::int64_t target;
  bool bf16;
};
std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    if (target == HWY_AVX3 && cpu_has_bf16_dot()) out.push_back({target, true});
    out.push_back({target, false});
  }
  return out;
}

// Compares the kernel with the reference (computed once) on the best variant, or on
// every variant when `all_variants`.
void run_case(Case c, bool all_variants = false) {
  c.params.kv_cache_dtype = c.spec.kv_cache_dtype;
  c.params.k_scale = c.spec.k_scale;
  c.params.v_scale = c.spec.v_scale;
  c.params.k_scales = c.spec.k_scales;
  c.params.v_scales = c.spec.v_scales;
  PagedWorkload w(c.spec);
  const std::vector<double> ref = testing::reference_outputs(c.params, w);
  const std::vector<Variant> list = all_variants ? variants() : std::vector<Variant>{{0, c.options.allow_bf16_dot}};
  for (const Variant& v : list) {
    hwy::SetSupportedTargetsForTest(v.target);
    CpuAttentionOptions o = c.options;
    o.allow_bf16_dot = v.bf16;
    const auto impl = make_cpu_attention_impl(c.params, o);
    testing::expect_matches(*impl, w, ref,
                            describe(c.spec, c.params) + " isa=" + cpu_attention_isa(c.spec.dtype, c.spec.kv_cache_dtype, o));
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(CpuAttention, EveryHeadSizeAndDtype) {
  for (int head_size : supported_head_sizes())
    for (ScalarType dtype : {ScalarType::bf16, ScalarType::f16, ScalarType::f32}) {
      Case c = make_case(dtype, 4, 2, head_size, {{1, 1}, {33, 1}, {17, 17}, {7, 3}});
      run_case(c);
    }
}

TEST(CpuAttention, GqaRatiosAndMixedBatchesOnEveryTarget) {
  for (auto [heads, kv] : {std::pair{4, 4}, {4, 2}, {8, 2}, {8, 1}, {6, 2}})
    for (const auto* seqs : {&kMixed, &kPrefillFirst}) {
      Case c = make_case(ScalarType::bf16, heads, kv, 64, *seqs);
      run_case(c, true);
      c.spec.dtype = ScalarType::f16;
      run_case(c, true);
    }
}

TEST(CpuAttention, ManyQueryHeadsPerKvHeadSplitAcrossItems) {
  // 40 heads sharing one KV head: more rows than one work item holds.
  run_case(make_case(ScalarType::bf16, 40, 1, 32, {{23, 4}, {5, 1}}));
  run_case(make_case(ScalarType::f32, 40, 1, 32, {{23, 4}, {5, 1}}));
}

TEST(CpuAttention, KvCacheDtypesWithScales) {
  for (CacheDType kv : {CacheDType::auto_, CacheDType::fp8, CacheDType::fp8_e4m3, CacheDType::fp8_e5m2})
    for (ScalarType dtype : {ScalarType::bf16, ScalarType::f16, ScalarType::f32}) {
      Case c = make_case(dtype, 8, 2, 80, kMixed);
      c.spec.kv_cache_dtype = kv;
      c.spec.k_scale = 0.37f;
      c.spec.v_scale = 2.5f;
      run_case(c, true);
    }
}

TEST(CpuAttention, PerHeadKvScalesOnEveryTarget) {
  for (CacheDType kv : {CacheDType::fp8_e4m3, CacheDType::fp8_e5m2})
    for (ScalarType dtype : {ScalarType::bf16, ScalarType::f32}) {
      Case c = make_case(dtype, 8, 4, 80, kMixed);
      c.spec.kv_cache_dtype = kv;
      c.spec.k_scales = {0.05f, 0.12f, 0.31f, 0.07f};
      c.spec.v_scales = {0.5f, 1.7f, 3.1f, 0.9f};
      run_case(c, true);
    }
}

TEST(CpuAttention, LayoutsAndBlockSizes) {
  for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd})
    for (int block : {16, 32, 48}) {
      Case c = make_case(ScalarType::bf16, 8, 4, 128, kPrefillFirst);
      c.spec.layout = layout;
      c.spec.block_size = block;
      run_case(c);
    }
}

TEST(CpuAttention, Variants) {
  for (ScalarType dtype : {ScalarType::bf16, ScalarType::f32}) {
    auto base = [&] { return make_case(dtype, 8, 2, 96, kMixed); };
    {
      Case c = base();
      c.params.causal = false;
      run_case(c, true);
    }
    for (int window : {1, 13, 64}) {
      Case c = base();
      c.params.sliding_window = window;
      run_case(c, true);
      c.params.causal = false;
      run_case(c, true);
    }
    {
      Case c = base();
      c.params.logits_soft_cap = 2.0f;
      c.spec.query_range = 6.0f;  // logits large enough for the cap to bite
      run_case(c, true);
    }
    {
      Case c = base();
      for (int h = 0; h < 8; ++h) c.params.alibi_slopes.push_back(std::exp2(-0.5f * static_cast<float>(h + 1)));
      run_case(c, true);
    }
    {
      Case c = base();
      for (int h = 0; h < 8; ++h) c.params.sinks.push_back(0.3f * static_cast<float>(h) - 1.0f);
      run_case(c, true);
    }
  }
}

TEST(CpuAttention, EncoderTypes) {
  for (AttentionType type : {AttentionType::encoder, AttentionType::encoder_only}) {
    Case c = make_case(ScalarType::bf16, 8, 2, 64, {{29, 29}, {1, 1}, {64, 64}});
    c.params.attn_type = type;
    run_case(c);
    c.params.sliding_window = 5;
    run_case(c);
  }
  // Cross attention: decoder queries (more than the encoder's tokens in one sequence)
  // against the whole encoder KV, never causal.
  Case c = make_case(ScalarType::f16, 8, 2, 64, {{17, 3}, {5, 9}, {40, 1}});
  c.params.attn_type = AttentionType::encoder_decoder;
  run_case(c);
  c.spec.dtype = ScalarType::bf16;
  run_case(c);
}

TEST(CpuAttention, OneLongSequenceIsSplitAcrossThreadsAndMerged) {
  for (int threads : {1, 2, 3}) {
    Case c = make_case(ScalarType::bf16, 4, 1, 128, {{2053, 1}});
    c.options.num_threads = threads;
    run_case(c);
    c.params.sinks = {0.5f, -1.0f, 2.0f, 0.0f};
    run_case(c);
    c.params.sinks.clear();
    c.params.sliding_window = 1500;
    run_case(c);
  }
}

TEST(CpuAttention, ParallelBatchMatchesReference) {
  // Large enough to run on an OpenMP team.
  Case c = make_case(ScalarType::bf16, 8, 8, 64, {{601, 1}, {599, 1}, {300, 2}, {613, 1}});
  run_case(c);
  c.spec.dtype = ScalarType::f32;
  run_case(c);
}

TEST(CpuAttention, StridedQueryAndOutput) {
  // Query and output are views into [tokens, heads, head_size + 16] buffers.
  WorkloadSpec spec;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.head_size = 64;
  spec.dtype = ScalarType::f32;
  spec.sequences = kMixed;
  PagedWorkload w(spec);
  const TensorView q = w.query();
  const int T = w.num_tokens();
  const std::int64_t row = 64 + 16;
  std::vector<float> qbuf(static_cast<std::size_t>(T) * 4 * row, 0.0f), obuf(qbuf.size(), NAN);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < 4; ++h)
      std::memcpy(&qbuf[(static_cast<std::size_t>(t) * 4 + h) * row], q.as<float>() + (t * 4 + h) * 64, 64 * 4);
  const std::int64_t shape[3] = {T, 4, 64}, strides[3] = {4 * row, row, 1};
  const TensorView qs = TensorView::strided(qbuf.data(), ScalarType::f32, shape, strides);
  const TensorView os = TensorView::strided(obuf.data(), ScalarType::f32, shape, strides);
  const LayerParams p = layer_params_for(spec);
  make_cpu_attention_impl(p)->forward(qs, w.cache(), w.metadata(), os);
  reference::forward(p, w.query(), w.cache(), w.metadata(), w.output());
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < 4; ++h) {
      for (int d = 0; d < 64; ++d)
        ASSERT_NEAR(obuf[(static_cast<std::size_t>(t) * 4 + h) * row + d], w.output().as<float>()[(t * 4 + h) * 64 + d],
                    1e-5);
      for (int d = 64; d < row; ++d) ASSERT_TRUE(std::isnan(obuf[(static_cast<std::size_t>(t) * 4 + h) * row + d]));
    }
}

TEST(CpuAttention, LeavesPaddingTokensUntouched) {
  WorkloadSpec spec;
  spec.num_heads = 4;
  spec.num_kv_heads = 1;
  spec.head_size = 32;
  spec.dtype = ScalarType::bf16;
  spec.sequences = {{9, 2}, {4, 1}, {1, 1}};  // the last sequence is padding the kernel must not see
  PagedWorkload w(spec);
  AttentionMetadata md = w.metadata();
  md.num_seqs = 2;
  md.num_actual_tokens = 3;
  w.poison_output();
  make_cpu_attention_impl(layer_params_for(spec))->forward(w.query(), w.cache(), md, w.output());
  const TensorView out = w.output();
  for (int i = 0; i < 3 * 4 * 32; ++i) EXPECT_TRUE(std::isfinite(reference::load(out.data, out.dtype, i))) << i;
  for (int i = 3 * 4 * 32; i < 4 * 4 * 32; ++i) EXPECT_TRUE(std::isnan(reference::load(out.data, out.dtype, i))) << i;
}

TEST(CpuAttention, CacheWriterMatchesReferenceBitForBit) {
  for (CacheDType kv :
       {CacheDType::auto_, CacheDType::fp8_e4m3, CacheDType::fp8_e5m2, CacheDType::bfloat16, CacheDType::float16})
    for (ScalarType dtype : {ScalarType::f32, ScalarType::bf16, ScalarType::f16})
      for (CacheLayout layout : {CacheLayout::nhd, CacheLayout::hnd}) {
        WorkloadSpec spec;
        spec.num_heads = 4;
        spec.num_kv_heads = 2;
        spec.head_size = 32;
        spec.dtype = dtype;
        spec.kv_cache_dtype = kv;
        spec.k_scale = 0.05f;  // large enough that some fp8 values saturate
        spec.v_scale = 0.7f;
        spec.layout = layout;
        spec.sequences = {{19, 19}, {40, 3}, {1, 1}};
        spec.fill_cache = false;
        PagedWorkload a(spec), b(spec);
        LayerParams p = layer_params_for(spec);
        std::vector<std::int64_t> slots(a.metadata().slot_mapping.begin(), a.metadata().slot_mapping.end());
        slots[1] = -1;  // a skipped (padding) token
        AttentionMetadata md = a.metadata();
        md.slot_mapping = slots;
        make_cpu_attention_impl(p)->write_kv_cache(a.new_keys(), a.new_values(), a.cache(), md);
        reference::write_kv_cache(p, b.new_keys(), b.new_values(), b.cache(), md);
        const KVCacheView ca = a.cache(), cb = b.cache();
        const std::size_t bytes = static_cast<std::size_t>(ca.key.numel()) * element_size(ca.key.dtype);
        SCOPED_TRACE(std::string(cache_dtype_name(kv)) + " " + std::string(to_string(dtype)));
        // NaN-initialised slots compare as bytes, so untouched slots must match too.
        EXPECT_EQ(std::memcmp(ca.key.data, cb.key.data, bytes), 0);
        EXPECT_EQ(std::memcmp(ca.value.data, cb.value.data, bytes), 0);
      }
}

TEST(CpuAttention, WriteThenAttendEqualsReference) {
  // The run path: write the new tokens' K/V, then attend (prefill + decode in one batch).
  WorkloadSpec spec;
  spec.num_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_size = 128;
  spec.dtype = ScalarType::bf16;
  spec.kv_cache_dtype = CacheDType::fp8;
  spec.k_scale = 0.25f;
  spec.sequences = {{40, 40}, {77, 1}};
  PagedWorkload w(spec);
  LayerParams p = layer_params_for(spec);
  const auto impl = make_cpu_attention_impl(p);
  impl->write_kv_cache(w.new_keys(), w.new_values(), w.cache(), w.metadata());
  testing::expect_matches_reference(*impl, w, "write then attend");
}

}  // namespace
}  // namespace attnsel::kernel::cpu
