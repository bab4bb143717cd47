// The selector: get_attn_backend's argument building, per-kind overrides, the cache and
// its invalidation on registration, AttentionConfig's validators, the Mamba selector.
// Backends here are test classes registered as overrides, as vLLM's own tests do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attnsel/errors.hpp"
#include "attnsel/selector.hpp"

namespace attnsel {
namespace {

using ::testing::HasSubstr;

// A backend that accepts everything decoder-shaped; its name is fixed per instance.
class AcceptAllBackend : public AttentionBackend {
 public:
  AcceptAllBackend(std::string name, std::string qualname) : name_(std::move(name)), qualname_(std::move(qualname)) {}
  std::string get_name() const override { return name_; }
  std::string qualname() const override { return qualname_; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c;
    c.sliding_window = true;
    return c;
  }

 private:
  std::string name_;
  std::string qualname_;
};

class RejectingBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASH_ATTN"; }
  std::string qualname() const override { return "tests::RejectingBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c;
    c.head_sizes = {64};
    return c;
  }
};

class NoBatchInvarianceMamba : public MambaBackend {
 public:
  std::string get_name() const override { return "TEST_MAMBA"; }
  std::string qualname() const override { return "tests::NoBatchInvarianceMamba"; }
};

void override_with(std::string_view member, std::string_view qualname) {
  register_class(std::make_shared<AcceptAllBackend>(std::string(member), std::string(qualname)));
  register_backend(AttentionBackendEnum[member], qualname);
}

class SelectorTest : public ::testing::Test {
 protected:
  void SetUp() override { reset_registry_for_testing(); }
  void TearDown() override { reset_registry_for_testing(); }
  LayerRequest layer128() {
    LayerRequest l;
    l.head_size = 128;
    l.dtype = DType::bfloat16;
    return l;
  }
};

TEST_F(SelectorTest, BlockSizeReachesTheSelectorOnlyWhenUserSpecified) {
  EngineConfig engine;
  engine.cache.block_size = 32;
  EXPECT_EQ(make_selector_config(engine, layer128()).block_size, std::nullopt);
  engine.cache.user_specified_block_size = true;
  EXPECT_EQ(make_selector_config(engine, layer128()).block_size, 32);
}

TEST_F(SelectorTest, EngineFlagsMapToSelectorFields) {
  EngineConfig engine;
  engine.prefill_context_parallel_size = 2;
  engine.decode_context_parallel_size = 2;
  engine.kv_transfer_instance = true;
  engine.batch_invariant = true;
  engine.adaptive_verification = true;
  engine.attention.use_non_causal = true;
  engine.rswa_window = 128;
  const AttentionSelectorConfig c = make_selector_config(engine, layer128());
  EXPECT_TRUE(c.use_pcp && c.use_dcp && c.use_kv_connector && c.use_batch_invariant && c.use_adaptive_verification &&
              c.use_non_causal && c.use_rswa);
  EXPECT_EQ(c.attn_type, AttentionType::decoder);
}

TEST_F(SelectorTest, ReprMatchesVllmFieldOrder) {
  AttentionSelectorConfig c;
  c.head_size = 128;
  c.kv_cache_dtype = CacheDType::auto_;
  EXPECT_EQ(c.repr(),
            "AttentionSelectorConfig(head_size=128, dtype=torch.bfloat16, kv_cache_dtype=auto, block_size=None, "
            "use_mla=False, has_sink=False, use_sparse=False, use_mm_prefix=False, use_per_head_quant_scales=False, "
            "attn_type=decoder, has_sliding_window=False, use_non_causal=False, use_batch_invariant=False, "
            "use_kv_connector=False, use_adaptive_verification=False, use_pcp=False, use_dcp=False)");
  c.use_rswa = true;
  EXPECT_THAT(c.repr(), ::testing::EndsWith("use_dcp=False, use_rswa=True)"));
}

TEST_F(SelectorTest, ConfigHashAndEqualityCoverEveryField) {
  AttentionSelectorConfig a;
  a.head_size = 128;
  AttentionSelectorConfig b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  b.use_rswa = true;
  EXPECT_NE(a, b);
  EXPECT_NE(a.hash(), b.hash());
  b = a;
  b.kv_cache_dtype = CacheDType::auto_;  // None and "auto" are different keys, as in vLLM
  EXPECT_NE(a, b);
}

TEST_F(SelectorTest, AutoMeansAutomaticAndNamesAreCaseInsensitive) {
  AttentionConfig cfg;
  cfg.set_backend("flash_attn");
  ASSERT_TRUE(cfg.backend);
  EXPECT_EQ(cfg.backend->name(), "FLASH_ATTN");
  cfg.set_backend("AUTO");
  EXPECT_FALSE(cfg.backend);
  EXPECT_THAT([&] { cfg.set_backend("nope"); },
              ::testing::ThrowsMessage<ValueError>(HasSubstr("Unknown attention backend: 'NOPE'. Valid options are:")));
}

// vLLM: test_msa_attention_backend_alias.
TEST_F(SelectorTest, MsaAliasSetsTheDecodeKernelAndClearsTheBackend) {
  AttentionConfig cfg;
  cfg.set_backend("CUTLASS_MSA");
  EXPECT_FALSE(cfg.backend);
  EXPECT_EQ(cfg.minimax_m3_msa_decode_backend, "cutlass");
  cfg.set_backend("triton_msa");
  EXPECT_EQ(cfg.minimax_m3_msa_decode_backend, "triton");
}

TEST_F(SelectorTest, BackendPerKindValidatesKeysAndTreatsAutoAsAName) {
  AttentionConfig cfg;
  cfg.set_backend_per_kind("sliding_window", "triton_attn");
  EXPECT_EQ(cfg.backend_per_kind.at("sliding_window").name(), "TRITON_ATTN");
  EXPECT_THAT([&] { cfg.set_backend_per_kind("sliding", "FLASH_ATTN"); },
              ::testing::ThrowsMessage<ValueError>(::testing::StrEq(
                  "Unknown KV cache group kind 'sliding' in backend_per_kind. Valid kinds are: chunked_local_attention, "
                  "cross_attention, encoder_only_attention, full_attention, mamba, mla_attention, "
                  "sink_full_attention, sliding_window, sliding_window_mla, unknown.")));
  EXPECT_THAT([&] { cfg.set_backend_per_kind("full_attention", "auto"); },
              ::testing::ThrowsMessage<ValueError>(HasSubstr("Unknown attention backend: 'AUTO'")));
}

TEST_F(SelectorTest, PerKindOverrideReplacesTheGlobalBackendForMatchingLayersOnly) {
  EngineConfig engine;
  engine.attention.set_backend("FLASH_ATTN");
  engine.attention.set_backend_per_kind("sliding_window", "TRITON_ATTN");
  LayerRequest full = layer128();
  LayerRequest sliding = layer128();
  sliding.has_sliding_window = true;
  EXPECT_EQ(effective_backend(engine, full)->name(), "FLASH_ATTN");
  EXPECT_EQ(effective_backend(engine, sliding)->name(), "TRITON_ATTN");
  // Encoder self-attention falls through to the sliding/full rules (get_attn_spec_kind).
  sliding.attn_type = AttentionType::encoder;
  EXPECT_EQ(effective_backend(engine, sliding)->name(), "TRITON_ATTN");
  engine.attention.backend.reset();
  EXPECT_FALSE(effective_backend(engine, full).has_value());
}

TEST_F(SelectorTest, CachedSelectionIsReusedAndClearable) {
  override_with("FLASH_ATTN", "tests::Fa");
  Selector selector(make_platform("cuda:9.0"));
  EngineConfig engine;
  engine.attention.set_backend("FLASH_ATTN");
  auto first = selector.select(engine, layer128());
  auto second = selector.select(engine, layer128());
  EXPECT_EQ(first, second);
  EXPECT_EQ(selector.cache_size(), 1U);
  LayerRequest other = layer128();
  other.num_heads = 32;  // num_heads is part of the key
  EXPECT_NE(selector.select(engine, other), first);
  EXPECT_EQ(selector.cache_size(), 2U);
  selector.clear();
  EXPECT_EQ(selector.cache_size(), 0U);
}

// Unlike vLLM's functools.cache, a registration must never be masked by a stale entry.
TEST_F(SelectorTest, RegistrationAfterASelectionIsNotMaskedByTheCache) {
  override_with("FLASH_ATTN", "tests::FirstFa");
  Selector selector(make_platform("cuda:9.0"));
  EngineConfig engine;
  engine.attention.set_backend("FLASH_ATTN");
  EXPECT_EQ(selector.get_attn_backend(engine, layer128())->qualname(), "tests::FirstFa");
  override_with("FLASH_ATTN", "tests::SecondFa");
  EXPECT_EQ(selector.get_attn_backend(engine, layer128())->qualname(), "tests::SecondFa");
}

TEST_F(SelectorTest, ExplicitInvalidChoiceNeverFallsBack) {
  register_backend_class<RejectingBackend>(AttentionBackendEnum["FLASH_ATTN"]);
  Selector selector(make_platform("cuda:9.0"));
  EngineConfig engine;
  engine.attention.set_backend("FLASH_ATTN");
  try {
    (void)selector.select(engine, layer128());
    FAIL() << "expected SelectionError";
  } catch (const SelectionError& e) {
    EXPECT_STREQ(e.what(),
                 "Selected backend FLASH_ATTN is not valid for this configuration. Reason: ['head_size not supported']");
    ASSERT_EQ(e.candidates().size(), 1U);
    EXPECT_FALSE(e.candidates()[0].valid);
  }
  EXPECT_EQ(selector.cache_size(), 0U);  // failures are not cached
}

TEST_F(SelectorTest, OtherPlatformHasNoAttentionBackend) {
  Selector selector(make_platform("other:npu"));
  EXPECT_THAT([&] { (void)selector.select(EngineConfig{}, layer128()); },
              ::testing::ThrowsMessage<SelectionError>(::testing::StrEq("Invalid attention backend for npu")));
}

TEST_F(SelectorTest, MambaSelectorRejectsBatchInvarianceWhenUnsupported) {
  register_backend_class<NoBatchInvarianceMamba>(MambaAttentionBackendEnum["CUSTOM"]);
  EXPECT_EQ(get_mamba_attn_backend(MambaAttentionBackendEnum["CUSTOM"])->get_name(), "TEST_MAMBA");
  EXPECT_THAT([] { (void)get_mamba_attn_backend(MambaAttentionBackendEnum["CUSTOM"], true); },
              ::testing::ThrowsMessage<RuntimeError>(
                  ::testing::StrEq("VLLM batch_invariant mode is not supported for TEST_MAMBA.")));
  EXPECT_THROW((void)get_mamba_attn_backend(AttentionBackendEnum["FLASH_ATTN"]), ValueError);
}

TEST_F(SelectorTest, MambaSelectorNeedsCustomRegistered) {
  EXPECT_THAT([] { (void)get_mamba_attn_backend(MambaAttentionBackendEnum["CUSTOM"]); },
              ::testing::ThrowsMessage<ValueError>(HasSubstr("Backend CUSTOM must be registered before use.")));
}

}  // namespace
}  // namespace attnsel
