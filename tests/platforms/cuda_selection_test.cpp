// CUDA selection, ported from vLLM's tests/kernels/attention/test_attention_selector.py
// (each platform simulated, as vLLM's tests patch current_platform).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "platforms/selection_fixture.hpp"

namespace attnsel {
namespace {

using ::testing::HasSubstr;
using testing_support::SelectionTest;

TEST_F(SelectionTest, ExplicitFlashInferAndFlashAttnOnHopper) {
  for (bool dcp : {false, true}) {
    EngineConfig e = engine_with_backend("FLASHINFER");
    e.cache = {16, true, CacheDType::auto_};
    e.decode_context_parallel_size = dcp ? 2 : 1;
    EXPECT_EQ(pick("cuda:9.0", e, layer(64, DType::float16)), "FLASHINFER") << "dcp=" << dcp;
    e.attention.set_backend("FLASH_ATTN");
    EXPECT_EQ(pick("cuda:9.0", e, layer(32, DType::float16)), "FLASH_ATTN") << "dcp=" << dcp;
  }
}

TEST_F(SelectionTest, ExplicitMlaBackendsWhereTheirHardwareAllows) {
  const struct {
    const char* platform;
    const char* backend;
    int block;
  } cases[] = {{"cuda:9.0", "TRITON_MLA", 16}, {"cuda:9.0", "TRITON_MLA", 64}, {"cuda:9.0", "FLASHMLA", 64},
               {"cuda:9.0", "FLASH_ATTN_MLA", 16}, {"cuda:10.0", "CUTLASS_MLA", 128},
               {"cuda:10.0", "FLASHINFER_MLA", 32}, {"cuda:10.0", "FLASHINFER_MLA", 64}};
  for (const auto& c : cases)
    for (bool dcp : {false, true}) {
      EngineConfig e = engine_with_backend(c.backend);
      e.cache = {c.block, true, CacheDType::auto_};
      e.decode_context_parallel_size = dcp ? 2 : 1;
      LayerRequest l = layer(576, DType::float16);
      l.use_mla = true;
      EXPECT_EQ(pick(c.platform, e, l), c.backend) << c.platform << " " << c.block << " dcp=" << dcp;
    }
}

// vLLM: test_fp32_fallback.
TEST_F(SelectionTest, Fp32FallsBackToFlexOnCuda) {
  EXPECT_EQ(pick("cuda:9.0", EngineConfig{}, layer(16, DType::float32)), "FLEX_ATTENTION");
  EXPECT_EQ(pick("cuda:8.0", EngineConfig{}, layer(16, DType::float32)), "FLEX_ATTENTION");
  EXPECT_EQ(pick("cpu", EngineConfig{}, layer(16, DType::float32)), "CPU_ATTN");
  EXPECT_THAT(error_of("rocm:gfx942", EngineConfig{}, layer(16, DType::float32)),
              HasSubstr("No valid attention backend found"));
}

TEST_F(SelectionTest, DefaultChoicesPerGeneration) {
  EXPECT_EQ(pick("cuda:9.0", EngineConfig{}, layer(128)), "FLASH_ATTN");
  EXPECT_EQ(pick("cuda:8.0", EngineConfig{}, layer(128)), "FLASH_ATTN");
  EXPECT_EQ(pick("cuda:10.0", EngineConfig{}, layer(128)), "FLASHINFER");
  LayerRequest mla = layer(576);
  mla.use_mla = true;
  EXPECT_EQ(pick("cuda:9.0", EngineConfig{}, mla), "FLASH_ATTN_MLA");
  EXPECT_EQ(pick("cuda:10.0", EngineConfig{}, mla), "FLASHINFER_MLA");
}

// vLLM: test_per_head_quant_scales_backend_selection.
TEST_F(SelectionTest, PerHeadQuantScalesNeedFa3) {
  LayerRequest l = layer(128, DType::float16);
  l.kv_cache_dtype = CacheDType::fp8;
  l.use_per_head_quant_scales = true;
  EngineConfig e = engine_with_backend("FLASH_ATTN");
  e.cache = {64, true, CacheDType::auto_};
  EXPECT_EQ(pick("cuda:9.0", e, l, {"flash_attn_version=3"}), "FLASH_ATTN");
  EXPECT_THAT(error_of("cuda:9.0", e, l, {"flash_attn_version=2"}), HasSubstr("FLASH_ATTN"));
  for (const char* other : {"FLASHINFER", "FLEX_ATTENTION"}) {
    e.attention.set_backend(other);
    EXPECT_THAT(error_of("cuda:9.0", e, l), HasSubstr(other));
  }
}

// vLLM: test_non_causal_backend_selection / test_non_causal_autoselect_backend.
TEST_F(SelectionTest, NonCausalSelection) {
  for (bool non_causal : {true, false}) {
    EngineConfig e = engine_with_backend("FLASH_ATTN");
    e.cache = {16, true, CacheDType::auto_};
    e.attention.use_non_causal = non_causal;
    EXPECT_EQ(pick("cuda:9.0", e, layer(128, DType::float16)), "FLASH_ATTN");
    e.attention.set_backend("FLASHINFER");
    EXPECT_EQ(pick("cuda:10.0", e, layer(128, DType::float16)), "FLASHINFER");
  }
  EngineConfig automatic;
  automatic.attention.use_non_causal = true;
  for (const char* platform : {"cuda:9.0", "cuda:10.0"}) {
    auto platform_ptr = make_platform(platform);
    Selector selector(platform_ptr);
    auto cls = selector.get_attn_backend(automatic, layer(128, DType::float16));
    EXPECT_TRUE(cls->capabilities(platform_ptr->env()).non_causal) << platform;
  }
  // SM100 prefers FlashAttention for non-causal layers (_get_backend_priorities).
  EXPECT_EQ(pick("cuda:10.0", automatic, layer(128)), "FLASH_ATTN");
}

// vLLM: test_cuda_auto_selects_flashinfer_for_gemma4_without_fa4.
class FakeFlashInferBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHINFER"; }
  std::string qualname() const override { return "tests::FakeFlashInferBackend"; }
};

TEST_F(SelectionTest, OverriddenFlashInferIsWhatThePriorityWalkReturns) {
  register_backend_class<FakeFlashInferBackend>(AttentionBackendEnum["FLASHINFER"]);
  LayerRequest l = layer(512);
  l.kv_cache_dtype = CacheDType::auto_;
  EngineConfig e;
  e.cache = {16, true, CacheDType::auto_};
  auto s = select("cuda:8.6", e, l);
  EXPECT_EQ(s->backend, "FLASHINFER");
  EXPECT_EQ(s->class_path, "tests::FakeFlashInferBackend");
}

// vLLM: test_hopper_mm_prefix_selects_triton_flash_attn.
TEST_F(SelectionTest, HopperMmPrefixSelectsTheTritonFlashAttnComposite) {
  for (const char* version : {"flash_attn_version=0", "flash_attn_version=3", "flash_attn_version=4"})
    for (bool mm_prefix : {false, true}) {
      LayerRequest l = layer(256);
      l.use_mm_prefix = mm_prefix;
      EXPECT_EQ(pick("cuda:9.0", EngineConfig{}, l, {version}), mm_prefix ? "TRITON_FLASH_ATTN" : "FLASH_ATTN")
          << version << " mm_prefix=" << mm_prefix;
    }
}

// vLLM: test_mm_prefix_selects_composite_without_changing_causal_default.
TEST_F(SelectionTest, BlackwellMmPrefixSelectsTheTritonFlashInferComposite) {
  for (std::optional<CacheDType> kv : {std::optional<CacheDType>{}, std::optional<CacheDType>{CacheDType::fp8_e4m3}})
    for (bool mm_prefix : {false, true}) {
      LayerRequest l = layer(256);
      l.kv_cache_dtype = kv;
      l.use_mm_prefix = mm_prefix;
      EXPECT_EQ(pick("cuda:10.0", EngineConfig{}, l), mm_prefix ? "TRITON_FLASHINFER" : "FLASHINFER")
          << (kv ? cache_dtype_name(*kv) : "None") << " mm_prefix=" << mm_prefix;
    }
}

TEST_F(SelectionTest, NoValidBackendListsEveryReasonInPriorityOrder) {
  LayerRequest l = layer(20);
  l.kv_cache_dtype = CacheDType::fp8_e5m2;  // FLEX_ATTENTION takes any head size but no fp8
  const std::string msg = error_of("cuda:9.0", EngineConfig{}, l);
  EXPECT_THAT(msg, ::testing::StartsWith("No valid attention backend found for cuda with AttentionSelectorConfig("
                                         "head_size=20, dtype=torch.bfloat16, kv_cache_dtype=fp8_e5m2, "));
  EXPECT_THAT(msg, HasSubstr("Reasons: {FLASH_ATTN: [head_size not supported, kv_cache_dtype not supported, "
                             "FP8 KV cache requires FA3 on SM90 or FA4 on SM100], FLASHINFER: [head_size not "
                             "supported], "));
  EXPECT_THAT(msg, HasSubstr("FLEX_ATTENTION: [kv_cache_dtype not supported]"));
}

TEST_F(SelectionTest, ExplicitInvalidBackendGivesVllmsMessage) {
  LayerRequest l = layer(576);
  l.use_mla = true;
  EXPECT_EQ(error_of("cuda:9.0", engine_with_backend("CUTLASS_MLA"), l),
            "Selected backend CUTLASS_MLA is not valid for this configuration. Reason: ['compute capability not "
            "supported']");
}

TEST_F(SelectionTest, NoAttentionIsAnImportFailure) {
  EXPECT_THAT(error_of("cuda:9.0", engine_with_backend("NO_ATTENTION"), layer(128)),
              ::testing::StartsWith("Selected backend NO_ATTENTION is not valid for this configuration. Reason: "
                                    "[ImportError: No backend class named 'attnsel::backends::NoAttentionBackend'"));
}

TEST_F(SelectionTest, UnregisteredCustomBackendMustBeRegistered) {
  EXPECT_THAT(error_of("cuda:9.0", engine_with_backend("CUSTOM"), layer(128)),
              HasSubstr("Backend CUSTOM must be registered before use."));
}

TEST_F(SelectionTest, UserBlockSizeThatPrecludesBetterBackendsWarns) {
  LayerRequest l = layer(576);
  l.use_mla = true;
  EngineConfig e;
  e.cache = {16, true, CacheDType::auto_};
  auto s = select("cuda:10.0", e, l);
  EXPECT_EQ(s->backend, "TRITON_MLA");
  ASSERT_EQ(s->warnings().size(), 1U);
  EXPECT_THAT(s->warnings()[0], ::testing::StartsWith("--block-size 16 precluded higher-priority backend(s) "
                                                      "FLASHINFER_MLA"));
  EXPECT_THAT(s->warnings()[0],
              HasSubstr("Using TRITON_MLA instead, which may result in reduced performance. Consider removing "
                        "--block-size to auto-select the optimal block size."));
}

TEST_F(SelectionTest, ChoiceIsLoggedWithEveryValidCandidate) {
  auto s = select("cuda:9.0", EngineConfig{}, layer(128));
  bool found = false;
  for (const LogLine& line : s->logs)
    found |= line.text == "Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', "
                          "'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION'].";
  EXPECT_TRUE(found);
}

TEST_F(SelectionTest, SparseMlaOrderOnBlackwellDependsOnKvDtypeAndHeads) {
  auto p = make_platform("cuda:10.0");
  AttentionSelectorConfig c;
  c.head_size = 576;
  c.use_mla = true;
  auto names = [&](std::optional<int> heads) {
    std::vector<std::string> out;
    for (const BackendMember& m : p->backend_priorities(c, heads)) out.push_back(m.name());
    return std::vector<std::string>(out.end() - 2, out.end());
  };
  EXPECT_EQ(names(128), (std::vector<std::string>{"FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE"}));
  EXPECT_EQ(names(16), (std::vector<std::string>{"FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE"}));
  c.kv_cache_dtype = CacheDType::fp8_ds_mla;
  EXPECT_EQ(names(128), (std::vector<std::string>{"FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE"}));
}

// vLLM: test_rswa_selection_does_not_reuse_causal_result.
TEST_F(SelectionTest, RswaRequirementIsNotMaskedByTheCachedCausalResult) {
  Selector selector(make_platform("cuda:10.0"));
  EngineConfig e = engine_with_backend("TRITON_FLASHINFER");
  EXPECT_EQ(selector.get_attn_backend(e, layer(256))->get_name(), "TRITON_FLASHINFER");
  e.rswa_window = 128;
  EXPECT_THAT([&] { (void)selector.get_attn_backend(e, layer(256)); },
              ::testing::ThrowsMessage<SelectionError>(HasSubstr("R-SWA")));
  e.attention.set_backend("TRITON_ATTN");
  EXPECT_EQ(selector.get_attn_backend(e, layer(256))->get_name(), "TRITON_ATTN");
}

}  // namespace
}  // namespace attnsel
