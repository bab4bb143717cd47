// Capabilities of the other built-in backends, ported from vLLM's backend tests and its
// backend classes' declarations.
#include <gtest/gtest.h>

#include <set>

#include "backends/test_env.hpp"

namespace attnsel {
namespace {
using testing::backend;
using testing::cuda_env;
using testing::decoder_config;
using testing::mla_config;

std::vector<std::string> validate(std::string_view name, const AttentionSelectorConfig& c, const RuntimeEnv& env) {
  return backend(name)->validate_configuration(c, env);
}

TEST(DcpOptIn, ExactlyVllmsOptInSet) {
  const std::set<std::string> opt_in = {"FLASH_ATTN",     "FLASH_ATTN_DIFFKV", "FLASHINFER",     "TRITON_MLA",
                                        "ROCM_AITER_MLA", "ROCM_AITER_TRITON_MLA", "CUTLASS_MLA", "FLASHMLA",
                                        "FLASHINFER_MLA", "TOKENSPEED_MLA",    "FLASH_ATTN_MLA", "FLASHMLA_SPARSE",
                                        "FLASHINFER_MLA_SPARSE"};
  for (const BackendMember& m : AttentionBackendEnum.members()) {
    const std::string& name = m.name();
    if (name == "TORCH_SDPA" || name == "CUSTOM" || name == "NO_ATTENTION") continue;
    EXPECT_EQ(m.get_attention_class()->capabilities(cuda_env(9, 0)).dcp, opt_in.contains(name)) << name;
  }
}

TEST(PcpOptIn, MlaImplsOnly) {
  for (const BackendMember& m : AttentionBackendEnum.members()) {
    const std::string& name = m.name();
    if (name == "TORCH_SDPA" || name == "CUSTOM" || name == "NO_ATTENTION") continue;
    const auto cls = m.get_attention_class();
    const BackendCapabilities caps = cls->capabilities(cuda_env(9, 0));
    EXPECT_EQ(caps.pcp, caps.mla) << name;
  }
}

TEST(TurboQuant, OnlyItsPresetsNeverAuto) {
  const RuntimeEnv env = cuda_env(9, 0);
  AttentionSelectorConfig c = decoder_config(59);  // the packed slot size of a 128-dim head with k3v4_nc
  c.kv_cache_dtype = CacheDType::turboquant_k3v4_nc;
  EXPECT_TRUE(validate("TURBOQUANT", c, env).empty());
  c.kv_cache_dtype = CacheDType::auto_;
  EXPECT_EQ(validate("TURBOQUANT", c, env), std::vector<std::string>{"kv_cache_dtype not supported"});
  c.kv_cache_dtype = std::nullopt;  // vLLM's override rejects None too
  EXPECT_EQ(validate("TURBOQUANT", c, env), std::vector<std::string>{"kv_cache_dtype not supported"});
  c.kv_cache_dtype = CacheDType::turboquant_4bit_nc;
  c.block_size = 8;
  EXPECT_EQ(validate("TURBOQUANT", c, env), std::vector<std::string>{"block_size not supported"});
  c.block_size = 48;  // a multiple of an advertised kernel page (16)
  EXPECT_TRUE(validate("TURBOQUANT", c, env).empty());
}

TEST(UltraQuant, InheritsTurboQuantWithItsOwnDtypeAndSinks) {
  const RuntimeEnv env = cuda_env(10, 0);
  AttentionSelectorConfig c = decoder_config();
  c.kv_cache_dtype = CacheDType::ultraquant_4bit;
  c.has_sink = true;
  EXPECT_TRUE(validate("ULTRAQUANT", c, env).empty());
  c.kv_cache_dtype = CacheDType::turboquant_k8v4;
  EXPECT_EQ(validate("ULTRAQUANT", c, env), std::vector<std::string>{"kv_cache_dtype not supported"});
  EXPECT_EQ(backend("ULTRAQUANT")->get_preferred_block_size(16, env), 64);
}

TEST(CpuMla, BlockSixteenOnly) {
  const auto cpu_mla = backend("CPU_MLA");
  const RuntimeEnv env = testing::cpu_env();
  EXPECT_TRUE(cpu_mla->supports_block_size(std::nullopt, env));
  EXPECT_TRUE(cpu_mla->supports_block_size(16, env));
  EXPECT_FALSE(cpu_mla->supports_block_size(32, env));  // not "a multiple of 16"
  EXPECT_FALSE(cpu_mla->supports_block_size(8, env));
  AttentionSelectorConfig c = mla_config();
  c.dtype = DType::float32;
  EXPECT_TRUE(validate("CPU_MLA", c, env).empty());
  c.use_dcp = true;
  EXPECT_EQ(validate("CPU_MLA", c, env), std::vector<std::string>{"DCP not supported"});
}

TEST(AmxMla, Bf16AndMultipleOf32) {
  const RuntimeEnv env = testing::cpu_env();
  AttentionSelectorConfig c = mla_config();
  c.block_size = 64;
  EXPECT_TRUE(validate("AMX_MLA", c, env).empty());
  c.block_size = 48;
  c.dtype = DType::float32;
  EXPECT_EQ(validate("AMX_MLA", c, env),
            (std::vector<std::string>{"dtype not supported", "block_size not supported"}));
}

TEST(TritonAttn, BlockMultipleOf16AndEveryAttentionType) {
  const RuntimeEnv env = cuda_env(8, 0);
  const auto triton = backend("TRITON_ATTN");
  EXPECT_TRUE(triton->supports_block_size(48, env));
  EXPECT_FALSE(triton->supports_block_size(8, env));
  AttentionSelectorConfig c = decoder_config(60);  // FA rejects 60; Triton does not (the XPU fallback case)
  c.dtype = DType::float32;
  c.kv_cache_dtype = CacheDType::int8_per_token_head;
  c.has_sink = true;
  c.use_mm_prefix = true;
  c.has_sliding_window = true;
  c.use_batch_invariant = true;
  c.attn_type = AttentionType::encoder_decoder;
  EXPECT_TRUE(validate("TRITON_ATTN", c, env).empty());
  c.head_size = 16;
  c.use_dcp = true;
  EXPECT_EQ(validate("TRITON_ATTN", c, env), (std::vector<std::string>{"head_size not supported", "DCP not supported"}));
}

TEST(FlexAttention, Fp32FallbackForTinyHeads) {
  AttentionSelectorConfig c = decoder_config(16);
  c.dtype = DType::float32;
  EXPECT_TRUE(validate("FLEX_ATTENTION", c, cuda_env(9, 0)).empty());
  c.attn_type = AttentionType::encoder_decoder;
  EXPECT_EQ(validate("FLEX_ATTENTION", c, cuda_env(9, 0)),
            std::vector<std::string>{"attention type encoder_decoder not supported"});
}

TEST(FlashInfer, ComputeCapabilityWindow) {
  const auto fi = backend("FLASHINFER");
  const RuntimeEnv env = cuda_env(9, 0);
  EXPECT_FALSE(fi->capabilities(env).supports_compute_capability(DeviceCapability{7, 5}));
  EXPECT_TRUE(fi->capabilities(env).supports_compute_capability(DeviceCapability{8, 0}));
  EXPECT_TRUE(fi->capabilities(env).supports_compute_capability(DeviceCapability{12, 1}));
  EXPECT_FALSE(fi->capabilities(env).supports_compute_capability(DeviceCapability{12, 2}));
}

TEST(FlashInfer, SinksOnlyThroughTrtllm) {
  const auto fi = backend("FLASHINFER");
  EXPECT_FALSE(fi->capabilities(cuda_env(9, 0)).sink);
  RuntimeEnv b200 = cuda_env(10, 0);
  EXPECT_TRUE(fi->capabilities(b200).sink);
  testing::set_fact(b200, "flashinfer.use_trtllm_attention", "false");  // --attention-config.use_trtllm_attention=0
  EXPECT_FALSE(fi->capabilities(b200).sink);
}

TEST(FlashInfer, LargePagesOnlyForGqaOnTrtllm) {
  const auto fi = backend("FLASHINFER");
  using V = std::vector<KernelBlockSize>;
  RuntimeEnv b200 = cuda_env(10, 0);
  EXPECT_EQ(fi->get_supported_kernel_block_sizes(b200), (V{16, 32, 64}));
  testing::set_fact(b200, "model.num_attention_heads", "32");
  testing::set_fact(b200, "model.num_kv_heads", "8");
  EXPECT_EQ(fi->get_supported_kernel_block_sizes(b200), (V{16, 32, 64, 128, 256, 512, 1024}));
  testing::set_fact(b200, "model.num_kv_heads", "32");  // MHA: no TRTLLM large pages
  EXPECT_EQ(fi->get_supported_kernel_block_sizes(b200), (V{16, 32, 64}));
  RuntimeEnv h100 = cuda_env(9, 0);
  testing::set_fact(h100, "model.num_attention_heads", "32");
  testing::set_fact(h100, "model.num_kv_heads", "8");
  EXPECT_EQ(fi->get_supported_kernel_block_sizes(h100), (V{16, 32, 64}));
}

// vLLM's test_flashinfer_mm_prefix_supports_combination: each case names a substring of the reason.
TEST(FlashInfer, MmPrefixCombinationLimits) {
  struct Case {
    DeviceCapability cap;
    int head;
    int block;
    std::optional<CacheDType> kv;
    bool sink;
    bool jit;
    std::optional<std::string> reason;
  };
  const Case cases[] = {
      {{8, 0}, 128, 16, CacheDType::nvfp4, false, true, std::nullopt},
      {{10, 0}, 128, 16, CacheDType::nvfp4, false, true, "SM100"},
      {{8, 0}, 128, 16, CacheDType::nvfp4_4over6, false, true, "nvfp4_4over6"},
      {{8, 0}, 128, 16, CacheDType::fp8, false, true, "fp8"},
      {{8, 0}, 128, 16, std::nullopt, true, true, "sink"},
      {{8, 0}, 128, 128, std::nullopt, false, true, "page size 128"},
      {{8, 0}, 128, 64, std::nullopt, false, true, std::nullopt},
      {{8, 0}, 256, 16, CacheDType::float16, false, true, std::nullopt},
      {{8, 0}, 512, 16, CacheDType::float16, false, true, std::nullopt},
      {{8, 0}, 128, 16, std::nullopt, false, false, "mm-prefix attention"},
  };
  const auto fi = backend("FLASHINFER");
  for (const Case& k : cases) {
    RuntimeEnv env = cuda_env(k.cap.major, k.cap.minor);
    testing::set_fact(env, "flashinfer.mm_prefix_jit_available", k.jit ? "true" : "false");
    const auto result =
        fi->capabilities(env).check_combination({k.head, DType::bfloat16, k.kv, k.block, false, k.sink, false, true, k.cap});
    if (!k.reason) {
      EXPECT_EQ(result, std::nullopt) << k.head << " " << (k.kv ? cache_dtype_name(*k.kv) : "None");
    } else {
      ASSERT_TRUE(result.has_value()) << *k.reason;
      EXPECT_NE(result->find(*k.reason), std::string::npos) << *result;
    }
  }
}

// vLLM's test_flashinfer_mm_prefix_validate_configuration.
TEST(FlashInfer, MmPrefixRejectsDcpAndPassesRswaThrough) {
  AttentionSelectorConfig c = decoder_config();
  c.block_size = 16;
  c.use_mm_prefix = true;
  const RuntimeEnv a100 = cuda_env(8, 0);
  auto mentions = [](const std::vector<std::string>& reasons, std::string_view what) {
    return std::any_of(reasons.begin(), reasons.end(), [&](const std::string& r) { return r.find(what) != r.npos; });
  };
  EXPECT_FALSE(mentions(validate("FLASHINFER", c, a100), "DCP"));
  EXPECT_FALSE(mentions(validate("FLASHINFER", c, a100), "R-SWA"));
  c.use_dcp = true;
  EXPECT_TRUE(mentions(validate("FLASHINFER", c, a100), "DCP"));
  c.use_dcp = false;
  c.use_rswa = true;
  EXPECT_TRUE(mentions(validate("FLASHINFER", c, a100), "R-SWA not supported"));
  // Without mm-prefix, DCP is FlashInfer's opt-in.
  AttentionSelectorConfig plain = decoder_config();
  plain.use_dcp = true;
  EXPECT_TRUE(validate("FLASHINFER", plain, a100).empty());
}

TEST(RocmAttn, NoKvConnectorAndItsLayouts) {
  const RuntimeEnv env = testing::rocm_env("gfx942", 3);
  AttentionSelectorConfig c = decoder_config();
  c.use_kv_connector = true;
  EXPECT_EQ(validate("ROCM_ATTN", c, env), std::vector<std::string>{"KV connector not supported"});
  c.use_dcp = true;
  EXPECT_EQ(validate("ROCM_ATTN", c, env),
            (std::vector<std::string>{"KV connector not supported", "DCP not supported"}));
  const auto layouts = backend("ROCM_ATTN")->supported_kv_cache_layouts(env);
  ASSERT_TRUE(layouts.has_value());
  EXPECT_FALSE(is_block_contiguous(layouts->front()));
}

TEST(RocmAiterFa, NeedsCdna3) {
  AttentionSelectorConfig c = decoder_config();
  EXPECT_EQ(validate("ROCM_AITER_FA", c, testing::rocm_env("gfx90a", 2)),
            std::vector<std::string>{"compute capability not supported"});
  EXPECT_TRUE(validate("ROCM_AITER_FA", c, testing::rocm_env("gfx942", 3)).empty());
}

TEST(RocmAiterUnified, BlockContiguousFirstAndNoLhbncWithAConnector) {
  RuntimeEnv env = testing::rocm_env("gfx942", 3);
  const auto unified = backend("ROCM_AITER_UNIFIED_ATTN");
  auto layouts = unified->supported_kv_cache_layouts(env);
  ASSERT_TRUE(layouts.has_value());
  EXPECT_TRUE(is_block_contiguous(layouts->front()));
  EXPECT_NE(std::find(layouts->begin(), layouts->end(), KVCacheLayout::LHBNC), layouts->end());
  testing::set_fact(env, "kv_connector.configured", "true");
  layouts = unified->supported_kv_cache_layouts(env);
  EXPECT_TRUE(std::all_of(layouts->begin(), layouts->end(), [](KVCacheLayout l) { return is_block_compact(l); }));
}

TEST(MlaBackends, BaseHeadSizesAndNonMlaRejection) {
  const RuntimeEnv b200 = cuda_env(10, 0);
  EXPECT_TRUE(validate("CUTLASS_MLA", mla_config(576), b200).empty());
  EXPECT_TRUE(validate("CUTLASS_MLA", mla_config(320), b200).empty());
  EXPECT_EQ(validate("CUTLASS_MLA", mla_config(128), b200), std::vector<std::string>{"head_size not supported"});
  EXPECT_EQ(validate("CUTLASS_MLA", decoder_config(576), b200), std::vector<std::string>{"non-MLA not supported"});
  AttentionSelectorConfig sparse = mla_config();
  sparse.use_sparse = true;
  EXPECT_EQ(validate("CUTLASS_MLA", sparse, b200), std::vector<std::string>{"sparse not supported"});
  EXPECT_EQ(validate("FLASHMLA_SPARSE", mla_config(), b200), std::vector<std::string>{"non-sparse not supported"});
}

TEST(MlaBackends, FlashInferMlaNeedsQkNopeHeadDim) {
  RuntimeEnv b200 = cuda_env(10, 0);
  EXPECT_TRUE(validate("FLASHINFER_MLA", mla_config(), b200).empty());
  testing::set_fact(b200, "model.qk_nope_head_dim", "96");
  EXPECT_EQ(validate("FLASHINFER_MLA", mla_config(), b200),
            std::vector<std::string>{"FlashInfer MLA kernel requires qk_nope_head_dim in [64, 128, 192], but got 96"});
  EXPECT_EQ(validate("FLASHINFER_MLA", mla_config(), cuda_env(9, 0)),
            std::vector<std::string>{"compute capability not supported"});
}

TEST(MlaBackends, FlashAttnMlaOnHopper) {
  EXPECT_TRUE(validate("FLASH_ATTN_MLA", mla_config(), cuda_env(9, 0)).empty());
  EXPECT_EQ(validate("FLASH_ATTN_MLA", mla_config(), cuda_env(10, 0)),
            (std::vector<std::string>{"compute capability not supported",
                                      "FlashAttention MLA not supported on this device"}));
  AttentionSelectorConfig fp8 = mla_config();
  fp8.kv_cache_dtype = CacheDType::fp8;
  EXPECT_EQ(validate("FLASH_ATTN_MLA", fp8, cuda_env(9, 0)), std::vector<std::string>{"kv_cache_dtype not supported"});
}

TEST(MlaBackends, Sm120SparseNeedsTopk2048) {
  RuntimeEnv rtx = cuda_env(12, 0);
  AttentionSelectorConfig c = mla_config();
  c.use_sparse = true;
  c.dtype = DType::bfloat16;
  EXPECT_TRUE(validate("FLASHINFER_MLA_SPARSE_SM120", c, rtx).empty());
  testing::set_fact(rtx, "model.index_topk", "1024");
  EXPECT_EQ(validate("FLASHINFER_MLA_SPARSE_SM120", c, rtx),
            std::vector<std::string>{"FlashInfer sparse MLA on SM120 requires index_topk == 2048, but got 1024"});
}

TEST(CpuAttn, CapabilitiesOfTheCpuBackend) {
  const RuntimeEnv env = testing::cpu_env();
  AttentionSelectorConfig c = decoder_config(80);
  c.dtype = DType::float32;
  c.kv_cache_dtype = CacheDType::fp8_e5m2;
  c.block_size = 128;
  c.has_sliding_window = true;
  c.use_non_causal = true;
  c.attn_type = AttentionType::encoder_only;
  EXPECT_TRUE(validate("CPU_ATTN", c, env).empty());
  c.kv_cache_dtype = CacheDType::bfloat16;  // vLLM lists "auto" and fp8 only
  c.head_size = 72;
  EXPECT_EQ(validate("CPU_ATTN", c, env),
            (std::vector<std::string>{"head_size not supported", "kv_cache_dtype not supported"}));
}

TEST(B12x, ConsumerBlackwellPagedAttention) {
  AttentionSelectorConfig c = decoder_config();
  c.block_size = 128;
  c.has_sink = true;
  EXPECT_TRUE(validate("B12X", c, cuda_env(12, 0)).empty());
  c.block_size = 192;  // a multiple of 64, but not a b12x page
  EXPECT_EQ(validate("B12X", c, cuda_env(12, 0)), std::vector<std::string>{"block_size not supported"});
  c.block_size = 64;
  c.dtype = DType::float16;
  EXPECT_EQ(validate("B12X", c, cuda_env(12, 0)),
            (std::vector<std::string>{"dtype not supported", "b12x currently requires bfloat16 queries"}));
  EXPECT_EQ(validate("B12X", decoder_config(), cuda_env(10, 0)),
            std::vector<std::string>{"compute capability not supported"});
}

TEST(MambaBackends, NoneDeclaresBatchInvariance) {
  for (const BackendMember& m : MambaAttentionBackendEnum.members()) {
    if (m.name() == "CUSTOM") continue;
    const auto cls = std::dynamic_pointer_cast<const MambaBackend>(m.get_class());
    ASSERT_NE(cls, nullptr) << m.name();
    EXPECT_FALSE(cls->supports_batch_invariance()) << m.name();
  }
}

}  // namespace
}  // namespace attnsel

namespace attnsel {
namespace {
using testing::backend;
using testing::cuda_env;
using testing::decoder_config;

TEST(DiffKV, FlashAttnDiffKVHasFlashAttentionsCapabilities) {
  AttentionSelectorConfig c = decoder_config(192);  // MiMo's K head (V is 128)
  c.kv_cache_dtype = CacheDType::fp8;
  c.has_sliding_window = true;
  c.use_dcp = true;
  EXPECT_TRUE(backend("FLASH_ATTN_DIFFKV")->validate_configuration(c, cuda_env(9, 0)).empty());
  EXPECT_EQ(backend("FLASH_ATTN_DIFFKV")->validate_configuration(c, cuda_env(8, 0)),
            (std::vector<std::string>{"kv_cache_dtype not supported",
                                      "FP8 KV cache requires FA3 on SM90 or FA4 on SM100"}));
  // Its V head (128) keeps a head-256 model off FA4's pinned 128-token pages.
  RuntimeEnv b200 = cuda_env(10, 0);
  testing::set_fact(b200, "model.head_size", "256");
  EXPECT_EQ(backend("FLASH_ATTN_DIFFKV")->get_supported_kernel_block_sizes(b200),
            std::vector<KernelBlockSize>{MultipleOf{16}});
  EXPECT_EQ(backend("FLASH_ATTN")->get_supported_kernel_block_sizes(b200), std::vector<KernelBlockSize>{128});
}

TEST(DiffKV, TritonDiffKVIsDecoderOnlyWithoutQuantizedCaches) {
  AttentionSelectorConfig c = decoder_config(192);
  c.dtype = DType::float32;
  EXPECT_TRUE(backend("TRITON_ATTN_DIFFKV")->validate_configuration(c, cuda_env(8, 0)).empty());
  c.kv_cache_dtype = CacheDType::fp8;
  c.attn_type = AttentionType::encoder;
  EXPECT_EQ(backend("TRITON_ATTN_DIFFKV")->validate_configuration(c, cuda_env(8, 0)),
            (std::vector<std::string>{"kv_cache_dtype not supported", "attention type encoder not supported"}));
}

}  // namespace
}  // namespace attnsel
