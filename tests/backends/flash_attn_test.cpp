// FLASH_ATTN's capabilities, ported from vLLM's backend tests (tests/v1/attention,
// tests/kernels/attention/test_attention_selector.py) and vllm/v1/attention/backends/flash_attn.py's rules.
#include <gtest/gtest.h>

#include "backends/runtime_facts.hpp"
#include "backends/test_env.hpp"

namespace attnsel {
namespace {
using testing::backend;
using testing::cuda_env;
using testing::decoder_config;

TEST(FlashAttnVersion, DefaultsPerDevice) {
  EXPECT_EQ(backends::get_flash_attn_version(cuda_env(8, 0)), 2);
  EXPECT_EQ(backends::get_flash_attn_version(cuda_env(8, 9)), 2);
  EXPECT_EQ(backends::get_flash_attn_version(cuda_env(9, 0)), 3);
  EXPECT_EQ(backends::get_flash_attn_version(cuda_env(10, 0)), 4);
  EXPECT_EQ(backends::get_flash_attn_version(cuda_env(12, 0)), 2);  // FA4 is refused on 12.x
  EXPECT_EQ(backends::get_flash_attn_version(testing::xpu_env()), 2);
  EXPECT_EQ(backends::get_flash_attn_version(testing::rocm_env("gfx942", 3)), std::nullopt);
  EXPECT_EQ(backends::get_flash_attn_version(cuda_env(7, 5)), std::nullopt);  // FA2 needs SM80
}

TEST(FlashAttnVersion, ForcedVersionAndItsFallbacks) {
  RuntimeEnv h100 = cuda_env(9, 0);
  testing::set_fact(h100, "flash_attn_version", "4");
  EXPECT_EQ(backends::get_flash_attn_version(h100), 4);
  RuntimeEnv b200 = cuda_env(10, 0);
  testing::set_fact(b200, "flash_attn_version", "3");  // FA3 on Blackwell becomes FA4
  EXPECT_EQ(backends::get_flash_attn_version(b200), 4);
  RuntimeEnv rtx = cuda_env(12, 0);
  testing::set_fact(rtx, "flash_attn_version", "3");  // ... or FA2 where FA4 is not built
  EXPECT_EQ(backends::get_flash_attn_version(rtx), 2);
  RuntimeEnv a100 = cuda_env(8, 0);
  testing::set_fact(a100, "flash_attn_version", "3");  // an unsupported forced version resolves to none
  EXPECT_EQ(backends::get_flash_attn_version(a100), std::nullopt);
}

TEST(FlashAttnVersion, HeadSizeRules) {
  backends::FaVersionQuery big;
  big.head_size = 512;
  EXPECT_EQ(backends::get_flash_attn_version(cuda_env(9, 0), big), 4);   // FA3 cannot: upgraded
  EXPECT_EQ(backends::get_flash_attn_version(cuda_env(10, 0), big), 2);  // FA4 TMEM limit
  backends::FaVersionQuery hd256;
  hd256.head_size = 256;
  EXPECT_EQ(backends::get_flash_attn_version(cuda_env(10, 0), hd256), 2);  // caller cannot take the hd256 kernel
  hd256.supports_fa4_hd256 = true;
  EXPECT_EQ(backends::get_flash_attn_version(cuda_env(10, 0), hd256), 4);
  hd256.has_sinks = true;  // the hd256 kernel has no sinks
  EXPECT_EQ(backends::get_flash_attn_version(cuda_env(10, 0), hd256), 2);
  RuntimeEnv invariant = cuda_env(10, 0);
  testing::set_fact(invariant, "env.vllm_batch_invariant", "true");
  EXPECT_EQ(backends::get_flash_attn_version(invariant), 2);
}

TEST(FlashAttnCapabilities, RejectsKvCacheDtypesVllmRejects) {
  const auto fa = backend("FLASH_ATTN");
  const RuntimeEnv h100 = cuda_env(9, 0);
  for (CacheDType d : {CacheDType::fp8_e5m2, CacheDType::fp8_ds_mla, CacheDType::fp8_inc, CacheDType::nvfp4,
                       CacheDType::nvfp4_4over6, CacheDType::int8_per_token_head, CacheDType::int4_per_token_head,
                       CacheDType::fp8_per_token_head, CacheDType::turboquant_k8v4})
    EXPECT_FALSE(fa->capabilities(h100).supports_kv_cache_dtype(d)) << cache_dtype_name(d);
  for (CacheDType d : {CacheDType::auto_, CacheDType::float16, CacheDType::bfloat16, CacheDType::fp8, CacheDType::fp8_e4m3})
    EXPECT_TRUE(fa->capabilities(h100).supports_kv_cache_dtype(d)) << cache_dtype_name(d);
  EXPECT_TRUE(fa->capabilities(h100).supports_kv_cache_dtype(std::nullopt));
  // FP8 needs FA3 on SM90 or FA4 on SM100: FA2 devices refuse it.
  EXPECT_FALSE(fa->capabilities(cuda_env(8, 0)).supports_kv_cache_dtype(CacheDType::fp8));
  EXPECT_TRUE(fa->capabilities(cuda_env(10, 0)).supports_kv_cache_dtype(CacheDType::fp8_e4m3));
  EXPECT_FALSE(fa->capabilities(cuda_env(12, 0)).supports_kv_cache_dtype(CacheDType::fp8));
}

TEST(FlashAttnCapabilities, HeadSizeRule) {
  const auto fa = backend("FLASH_ATTN");
  const RuntimeEnv a100 = cuda_env(8, 0);  // no FA4 here
  EXPECT_TRUE(fa->capabilities(a100).supports_head_size(72));
  EXPECT_FALSE(fa->capabilities(a100).supports_head_size(60));
  EXPECT_TRUE(fa->capabilities(a100).supports_head_size(256));
  EXPECT_FALSE(fa->capabilities(a100).supports_head_size(264));
  const RuntimeEnv h100 = cuda_env(9, 0);  // FA4 is built for SM90: up to 512
  EXPECT_TRUE(fa->capabilities(h100).supports_head_size(264));
  EXPECT_TRUE(fa->capabilities(h100).supports_head_size(512));
  EXPECT_FALSE(fa->capabilities(h100).supports_head_size(520));
}

TEST(FlashAttnCapabilities, VersionDependentFeatures) {
  const auto fa = backend("FLASH_ATTN");
  EXPECT_FALSE(fa->capabilities(cuda_env(8, 0)).sink);
  EXPECT_TRUE(fa->capabilities(cuda_env(9, 0)).sink);
  EXPECT_TRUE(fa->capabilities(cuda_env(10, 0)).sink);
  EXPECT_FALSE(fa->capabilities(cuda_env(8, 0)).per_head_quant_scales);
  EXPECT_TRUE(fa->capabilities(cuda_env(9, 0)).per_head_quant_scales);
  EXPECT_FALSE(fa->capabilities(cuda_env(8, 0)).mm_prefix);
  EXPECT_TRUE(fa->capabilities(cuda_env(9, 0)).mm_prefix);
  EXPECT_FALSE(fa->capabilities(cuda_env(12, 0)).mm_prefix);
  EXPECT_TRUE(fa->capabilities(cuda_env(9, 0)).dcp);
  EXPECT_FALSE(fa->capabilities(cuda_env(9, 0)).pcp);
  EXPECT_TRUE(fa->capabilities(cuda_env(9, 0)).batch_invariance);
  EXPECT_FALSE(fa->capabilities(cuda_env(9, 0)).forward_includes_kv_cache_update);
}

TEST(FlashAttnCapabilities, ComputeCapability) {
  const auto fa = backend("FLASH_ATTN");
  const RuntimeEnv env = cuda_env(9, 0);
  EXPECT_FALSE(fa->capabilities(env).supports_compute_capability(DeviceCapability{7, 5}));
  EXPECT_TRUE(fa->capabilities(env).supports_compute_capability(DeviceCapability{8, 0}));
  EXPECT_TRUE(fa->capabilities(env).supports_compute_capability(std::nullopt));  // XPU validates FA without a capability
}

TEST(FlashAttnCapabilities, KernelBlockSizePinnedByFa4Hd256Kernel) {
  const auto fa = backend("FLASH_ATTN");
  RuntimeEnv b200 = cuda_env(10, 0);
  EXPECT_EQ(fa->get_supported_kernel_block_sizes(b200), std::vector<KernelBlockSize>{MultipleOf{16}});
  testing::set_fact(b200, "model.head_size", "256");
  EXPECT_EQ(fa->get_supported_kernel_block_sizes(b200), std::vector<KernelBlockSize>{128});
  EXPECT_EQ(fa->get_preferred_block_size(16, b200), 128);
  RuntimeEnv h100 = cuda_env(9, 0);  // the dedicated kernel exists on SM 10.x/11.x only
  testing::set_fact(h100, "model.head_size", "256");
  EXPECT_EQ(fa->get_supported_kernel_block_sizes(h100), std::vector<KernelBlockSize>{MultipleOf{16}});
  EXPECT_EQ(fa->get_preferred_block_size(16, testing::xpu_env()), 64);
}

TEST(FlashAttnValidation, SinkOnAmpereGivesBothReasons) {
  AttentionSelectorConfig c = decoder_config();
  c.has_sink = true;
  EXPECT_EQ(backend("FLASH_ATTN")->validate_configuration(c, cuda_env(8, 0)),
            (std::vector<std::string>{"attention sinks not supported", "sink not supported on compute capability < 9.0"}));
  EXPECT_TRUE(backend("FLASH_ATTN")->validate_configuration(c, cuda_env(9, 0)).empty());
}

TEST(FlashAttnValidation, Fp8NeedsFa3OnSm90OrFa4OnSm100) {
  AttentionSelectorConfig c = decoder_config(256);
  c.kv_cache_dtype = CacheDType::fp8;
  EXPECT_TRUE(backend("FLASH_ATTN")->validate_configuration(c, cuda_env(9, 0)).empty());
  // On SM100 a head-256 layer lands on FA4's dedicated kernel, which has no FP8: FA2 cannot either.
  EXPECT_EQ(backend("FLASH_ATTN")->validate_configuration(c, cuda_env(10, 0)),
            (std::vector<std::string>{"FP8 KV cache requires FA3 on SM90 or FA4 on SM100"}));
}

TEST(FlashAttnValidation, MmPrefixNeedsFa4) {
  AttentionSelectorConfig c = decoder_config(256);
  c.use_mm_prefix = true;
  const std::string reason =
      "mm_prefix (PrefixLM bidirectional attention) requires FlashAttention v4, which does not resolve for this "
      "head_size";
  EXPECT_EQ(backend("FLASH_ATTN")->validate_configuration(c, cuda_env(9, 0)), std::vector<std::string>{reason});
  RuntimeEnv fa4 = cuda_env(9, 0);
  testing::set_fact(fa4, "flash_attn_version", "4");
  EXPECT_TRUE(backend("FLASH_ATTN")->validate_configuration(c, fa4).empty());
  // Gemma-4 on Blackwell: the head-256 FA4 kernel cannot serve PrefixLM masks, the 512 head exceeds TMEM.
  EXPECT_EQ(backend("FLASH_ATTN")->validate_configuration(c, cuda_env(10, 0)), std::vector<std::string>{reason});
  c.head_size = 512;
  EXPECT_EQ(backend("FLASH_ATTN")->validate_configuration(c, cuda_env(10, 0)), std::vector<std::string>{reason});
}

TEST(FlashAttnValidation, EveryFailingCheckInVllmOrder) {
  AttentionSelectorConfig c;
  c.head_size = 60;
  c.dtype = DType::float32;
  c.kv_cache_dtype = CacheDType::fp8_e5m2;
  c.block_size = 8;
  c.use_mm_prefix = true;
  c.use_mla = true;
  c.has_sink = true;
  c.use_sparse = true;
  c.use_per_head_quant_scales = true;
  c.use_non_causal = true;
  c.use_dcp = true;
  c.use_pcp = true;
  c.use_rswa = true;
  EXPECT_EQ(backend("FLASH_ATTN")->validate_configuration(c, cuda_env(7, 5)),
            (std::vector<std::string>{
                "head_size not supported", "dtype not supported", "kv_cache_dtype not supported",
                "block_size not supported", "partial multimodal token full attention not supported",
                "MLA not supported", "attention sinks not supported", "sparse not supported",
                "per-head quant scales not supported", "compute capability not supported",
                "non-causal MLA attention with DCP not supported", "PCP not supported", "R-SWA not supported",
                "sink not supported on compute capability < 9.0"}));
}

}  // namespace
}  // namespace attnsel
