// The composite backends (vLLM's create_composite_attention_backend) and their two instances.
#include <gtest/gtest.h>

#include "attnsel/errors.hpp"
#include "backends/composite.hpp"
#include "backends/test_env.hpp"

namespace attnsel {
namespace {
using testing::backend;
using testing::cuda_env;
using testing::decoder_config;

bool has_reason(const std::vector<std::string>& reasons, const std::string& r) {
  return std::find(reasons.begin(), reasons.end(), r) != reasons.end();
}

TEST(CompositeBlockSizes, IntersectionRules) {
  using backends::intersect_kernel_block_sizes;
  using V = std::vector<KernelBlockSize>;
  EXPECT_EQ(intersect_kernel_block_sizes(V{MultipleOf{16}}, V{MultipleOf{24}}), V{MultipleOf{48}});
  EXPECT_EQ(intersect_kernel_block_sizes(V{MultipleOf{16}}, V{16, 32, 40, 64}), (V{16, 32, 64}));
  EXPECT_EQ(intersect_kernel_block_sizes(V{64, 128}, V{MultipleOf{64}}), (V{64, 128}));
  EXPECT_EQ(intersect_kernel_block_sizes(V{16, 32}, V{32, 64}), V{32});
  EXPECT_EQ(intersect_kernel_block_sizes(V{16, 16}, V{16}), V{16});  // no duplicates
  EXPECT_TRUE(intersect_kernel_block_sizes(V{16}, V{32}).empty());
}

TEST(CompositeInstances, TritonFlashInferOnBlackwellOnly) {
  const auto composite = backend("TRITON_FLASHINFER");
  AttentionSelectorConfig c = decoder_config(256);
  c.use_mm_prefix = true;
  EXPECT_TRUE(composite->validate_configuration(c, cuda_env(10, 0)).empty());
  c.kv_cache_dtype = CacheDType::fp8_e4m3;
  EXPECT_TRUE(composite->validate_configuration(c, cuda_env(10, 0)).empty());
  EXPECT_EQ(composite->validate_configuration(c, cuda_env(9, 0)),
            std::vector<std::string>{"compute capability not supported"});
  EXPECT_EQ(composite->get_supported_kernel_block_sizes(cuda_env(10, 0)), std::vector<KernelBlockSize>{64});
}

TEST(CompositeInstances, TritonFlashInferRejectsWhatThePlainBackendsServe) {
  const auto composite = backend("TRITON_FLASHINFER");
  const RuntimeEnv b200 = cuda_env(10, 0);
  AttentionSelectorConfig c = decoder_config(256);
  c.use_mm_prefix = true;
  auto with = [&](auto mutate) {
    AttentionSelectorConfig x = c;
    mutate(x);
    return composite->validate_configuration(x, b200);
  };
  EXPECT_TRUE(has_reason(with([](auto& x) { x.head_size = 128; }), "head_size not supported"));
  EXPECT_TRUE(has_reason(with([](auto& x) { x.block_size = 16; }), "block_size not supported"));
  EXPECT_TRUE(with([](auto& x) { x.block_size = 64; }).empty());
  EXPECT_TRUE(has_reason(with([](auto& x) { x.kv_cache_dtype = CacheDType::int8_per_token_head; }),
                         "kv_cache_dtype not supported"));
  EXPECT_TRUE(has_reason(with([](auto& x) { x.use_dcp = true; }), "DCP not supported"));
  EXPECT_TRUE(has_reason(with([](auto& x) { x.use_pcp = true; }), "PCP not supported"));
  EXPECT_TRUE(has_reason(with([](auto& x) { x.use_rswa = true; }), "R-SWA not supported"));
  EXPECT_TRUE(has_reason(with([](auto& x) { x.use_adaptive_verification = true; }),
                         "device-cpu query lens mismatch not supported, this is needed for adaptive verification"));
  EXPECT_TRUE(has_reason(with([](auto& x) { x.has_sink = true; }), "attention sinks not supported"));
  EXPECT_TRUE(with([](auto& x) { x.has_sliding_window = true; }).empty());
}

TEST(CompositeInstances, TritonFlashAttnOnHopperNeedsFa3OrFa4) {
  const auto composite = backend("TRITON_FLASH_ATTN");
  AttentionSelectorConfig c = decoder_config(256);
  c.use_mm_prefix = true;
  for (const char* v : {"0", "3", "4"}) {
    RuntimeEnv h100 = cuda_env(9, 0);
    testing::set_fact(h100, "flash_attn_version", v);
    EXPECT_TRUE(composite->validate_configuration(c, h100).empty()) << "flash_attn_version=" << v;
  }
  RuntimeEnv fa2 = cuda_env(9, 0);
  testing::set_fact(fa2, "flash_attn_version", "2");
  EXPECT_EQ(composite->validate_configuration(c, fa2),
            std::vector<std::string>{"FLASH_ATTN: causal route requires FlashAttention v3 or v4"});
  EXPECT_EQ(composite->validate_configuration(c, cuda_env(10, 0)),
            std::vector<std::string>{"compute capability not supported"});
  EXPECT_EQ(composite->get_supported_kernel_block_sizes(cuda_env(9, 0)),
            std::vector<KernelBlockSize>{MultipleOf{16}});
}

TEST(CompositeInstances, ChildReasonIsPrefixedWithItsName) {
  // FlashAttention's sink rule reaches the composite through the causal child.
  const auto composite = backend("TRITON_FLASH_ATTN");
  AttentionSelectorConfig c = decoder_config(256);
  c.kv_cache_dtype = CacheDType::fp8;
  RuntimeEnv h100 = cuda_env(9, 0);
  testing::set_fact(h100, "flash_attn_version", "4");
  testing::set_fact(h100, "flash_attn.hopper_fa4_fp8", "false");
  EXPECT_EQ(composite->capabilities(h100).check_combination(
                {c.head_size, c.dtype, c.kv_cache_dtype, c.block_size, false, false, false, true, DeviceCapability{9, 0}}),
            std::optional<std::string>("FLASH_ATTN: FP8 KV cache requires FA3 on SM90 or FA4 on SM100"));
}

TEST(CompositeInstances, NeverOptIntoContextParallelism) {
  for (const char* name : {"TRITON_FLASHINFER", "TRITON_FLASH_ATTN"}) {
    const auto composite = backend(name);
    const BackendCapabilities caps = composite->capabilities(cuda_env(9, 0));
    EXPECT_FALSE(caps.pcp) << name;
    EXPECT_FALSE(caps.dcp) << name;
    EXPECT_FALSE(caps.device_cpu_query_lens_mismatch) << name;
    EXPECT_FALSE(caps.forward_includes_kv_cache_update) << name;
    EXPECT_TRUE(caps.mm_prefix) << name;  // the Triton child serves image masks
  }
}

class ForwardWritesCache : public AttentionBackend {
 public:
  std::string get_name() const override { return "WRITES_IN_FORWARD"; }
  std::string qualname() const override { return "tests::ForwardWritesCache"; }
};

TEST(CompositeCreate, RequiresSeparateKvCacheUpdates) {
  try {
    backends::CompositeAttentionBackend::create(backend("TRITON_ATTN"), std::make_shared<const ForwardWritesCache>(),
                                                {.backend_name = "X", .qualname = "tests::X"});
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "Composite backends require separate KV cache updates");
  }
}

TEST(CompositeCreate, SameClassTwiceIsTheGeneralChild) {
  const auto triton = backend("TRITON_ATTN");
  EXPECT_EQ(backends::CompositeAttentionBackend::create(triton, triton, {.backend_name = "X", .qualname = "tests::X"}),
            triton);
}

TEST(CompositeCreate, EmptyBlockIntersectionRejectsEveryBlockSize) {
  const auto composite = backends::CompositeAttentionBackend::create(
      backend("ROCM_AITER_FA"), backend("TRITON_ATTN"),
      {.backend_name = "X", .qualname = "tests::X", .kernel_block_sizes = {8}});
  EXPECT_TRUE(composite->get_supported_kernel_block_sizes(cuda_env(9, 0)).empty());
  EXPECT_FALSE(composite->supports_block_size(16, cuda_env(9, 0)));
}

TEST(CompositeLayouts, IntersectsTheChildrensSets) {
  // ROCM_ATTN prefers (LHBNC, LBHNC); B12X (LBHNC, BLHNC): the only common layout is LBHNC.
  const RuntimeEnv env = cuda_env(12, 0);
  EXPECT_EQ(backends::get_supported_kv_cache_layouts({backend("ROCM_ATTN").get(), backend("B12X").get()}, env),
            std::vector<KVCacheLayout>{KVCacheLayout::LBHNC});
  EXPECT_EQ(backends::get_supported_kv_cache_layouts({backend("TRITON_ATTN").get()}, env), default_layout_preference());
  try {
    backends::get_supported_kv_cache_layouts({backend("TURBOQUANT").get(), backend("ROCM_ATTN").get()}, env);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "No KV cache layout satisfies every supported set: [['LBNHC'], ['LHBNC', 'LBHNC']].");
  }
}

}  // namespace
}  // namespace attnsel
