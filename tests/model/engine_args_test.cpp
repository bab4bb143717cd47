// Engine options as vLLM spells them: --attention-config's validators and messages, the
// mutual exclusion with --attention-backend, --kv-transfer-config's role checks, and every
// other option's validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attnsel/engine_args.hpp"
#include "attnsel/errors.hpp"
#include "attnsel/registry.hpp"
#include "model_test_support.hpp"

namespace attnsel {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_support::value_error;

EngineOptions parse(const EngineArgs& a) { return parse_engine_args(a); }

EngineArgs with_attention_config(const std::string& json) {
  EngineArgs a;
  a.attention_config = json;
  return a;
}

TEST(EngineArgs, DefaultsAreVllmDefaults) {
  const EngineOptions o = parse({});
  EXPECT_FALSE(o.engine.attention.backend);
  EXPECT_TRUE(o.engine.attention.backend_per_kind.empty());
  EXPECT_EQ(o.engine.cache.cache_dtype, CacheDType::auto_);
  EXPECT_FALSE(o.engine.cache.user_specified_block_size);
  EXPECT_EQ(o.tensor_parallel_size, 1);
  EXPECT_EQ(o.dtype, "auto");
  EXPECT_FALSE(o.engine.kv_transfer_instance);
  EXPECT_FALSE(o.kv_cache_layout);
  EXPECT_FALSE(o.kv_transfer);
}

TEST(EngineArgs, AttentionConfigParsesSelectionFields) {
  EngineArgs a;
  a.attention_config = R"({"backend": "flash_attn", "backend_per_kind": {"sliding_window": "triton_attn",
      "mla_attention": "FLASHINFER_MLA"}, "use_non_causal": true, "flash_attn_version": 3,
      "use_trtllm_attention": false, "disable_flashinfer_prefill": true})";
  const EngineOptions o = parse(a);
  const AttentionConfig& c = o.engine.attention;
  EXPECT_EQ(c.backend->name(), "FLASH_ATTN");  // case-insensitive, as vLLM upper-cases
  EXPECT_EQ(c.backend_per_kind.at("sliding_window").name(), "TRITON_ATTN");
  EXPECT_EQ(c.backend_per_kind.at("mla_attention").name(), "FLASHINFER_MLA");
  EXPECT_TRUE(c.use_non_causal);
  EXPECT_EQ(c.flash_attn_version, 3);
  EXPECT_EQ(c.use_trtllm_attention, false);
}

TEST(EngineArgs, AutoAndNullBackendMeanAutomatic) {
  for (const char* json : {R"({"backend": "AUTO"})", R"({"backend": null})", "{}"})
    EXPECT_FALSE(parse(with_attention_config(json)).engine.attention.backend) << json;
  EngineArgs a;
  a.attention_backend = "auto";
  EXPECT_FALSE(parse(a).engine.attention.backend);
}

TEST(EngineArgs, MsaAliasPicksTheDecodeKernelNotABackend) {
  EngineArgs a;
  a.attention_config = R"({"backend": "CUTLASS_MSA"})";
  const EngineOptions o = parse(a);
  EXPECT_FALSE(o.engine.attention.backend);
  EXPECT_EQ(o.engine.attention.minimax_m3_msa_decode_backend, "cutlass");
}

TEST(EngineArgs, AttentionBackendAndConfigBackendAreMutuallyExclusive) {
  EngineArgs a;
  a.attention_backend = "FLASH_ATTN";
  a.attention_config = R"({"backend": "TRITON_ATTN"})";
  EXPECT_EQ(value_error([&] { parse(a); }), "attention_backend and attention_config.backend are mutually exclusive");
  // Without a backend in the config, the flag applies; per-kind entries still apply too.
  a.attention_config = R"({"backend_per_kind": {"sliding_window": "TRITON_ATTN"}})";
  const EngineOptions o = parse(a);
  EXPECT_EQ(o.engine.attention.backend->name(), "FLASH_ATTN");
  EXPECT_EQ(o.engine.attention.backend_per_kind.at("sliding_window").name(), "TRITON_ATTN");
}

TEST(EngineArgs, UnknownBackendAndKindUseVllmMessages) {
  EngineArgs a;
  a.attention_backend = "FLASH_ATTENTION";
  EXPECT_THAT(value_error([&] { parse(a); }),
              StartsWith("Unknown attention backend: 'FLASH_ATTENTION'. Valid options are: FLASH_ATTN, "));
  EngineArgs b;
  b.attention_config = R"({"backend_per_kind": {"sliding": "TRITON_ATTN"}})";
  EXPECT_EQ(value_error([&] { parse(b); }),
            "Unknown KV cache group kind 'sliding' in backend_per_kind. Valid kinds are: chunked_local_attention, "
            "cross_attention, encoder_only_attention, full_attention, mamba, mla_attention, sink_full_attention, "
            "sliding_window, sliding_window_mla, unknown.");
  // "auto" is not special in backend_per_kind (vLLM's validator upper-cases it to AUTO).
  EngineArgs c;
  c.attention_config = R"({"backend_per_kind": {"sliding_window": "auto"}})";
  EXPECT_THAT(value_error([&] { parse(c); }), StartsWith("Unknown attention backend: 'AUTO'."));
}

TEST(EngineArgs, AttentionConfigTypeAndFieldErrors) {
  auto err = [](const std::string& json) {
    const EngineArgs a = with_attention_config(json);
    return value_error([&] { parse_engine_args(a); });
  };
  EXPECT_THAT(err("{"), StartsWith("--attention-config: malformed JSON: "));
  EXPECT_EQ(err("[]"), "--attention-config: expected a JSON object, got an array of 0 elements");
  EXPECT_THAT(err(R"({"backend_name": "FLASH_ATTN"})"),
              StartsWith("--attention-config: unknown field 'backend_name'. Valid fields are: backend, "
                         "backend_per_kind, use_non_causal,"));
  EXPECT_EQ(err(R"({"use_non_causal": "yes"})"),
            "--attention-config: field 'use_non_causal': expected true or false, got string \"yes\"");
  EXPECT_EQ(err(R"({"backend": 3})"), "--attention-config: field 'backend': expected a string or null, got 3");
  EXPECT_EQ(err(R"({"flash_attn_version": 3.0})"),
            "--attention-config: field 'flash_attn_version': expected an integer or null, got 3.0");
  EXPECT_EQ(err(R"({"flash_attn_version": 5})"),
            "--attention-config: field 'flash_attn_version': expected an integer from 2 to 4, got 5");
  EXPECT_EQ(err(R"({"backend_per_kind": ["x"]})"),
            "--attention-config: field 'backend_per_kind': expected an object, got an array of 1 elements");
  EXPECT_EQ(err(R"({"backend_per_kind": {"mamba": 1}})"),
            "--attention-config: field 'backend_per_kind.mamba': expected a backend name, got 1");
  EXPECT_EQ(err(R"({"minimax_m3_msa_decode_backend": "cuda"})"),
            "--attention-config: field 'minimax_m3_msa_decode_backend': expected one of \"triton\", \"cutlass\", got "
            "string \"cuda\"");
}

TEST(EngineArgs, KvTransferConfigRolesAndConnectorLayout) {
  EngineArgs a;
  a.kv_transfer_config = R"({"kv_connector": "NixlConnector", "kv_role": "kv_both"})";
  const EngineOptions o = parse(a);
  EXPECT_TRUE(o.engine.kv_transfer_instance);
  EXPECT_EQ(kv_connector_cache_layout(*o.kv_transfer, false), "HND");
  EXPECT_FALSE(kv_connector_cache_layout(*o.kv_transfer, true));  // MLA: the layout does not matter
  EXPECT_FALSE(kv_connector_cache_layout(parse_kv_transfer_config(
                                             R"({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_producer"})"),
                                         false));

  EXPECT_EQ(value_error([] { parse_kv_transfer_config(R"({"kv_connector": "NixlConnector", "kv_role": "both"})"); }),
            "Unsupported kv_role: both. Supported roles are ('kv_producer', 'kv_both', 'kv_consumer')");
  EXPECT_EQ(value_error([] { parse_kv_transfer_config(R"({"kv_connector": "NixlConnector"})"); }),
            "Please specify kv_disagg_role when kv_connector is set, supported roles are ('kv_producer', 'kv_both', "
            "'kv_consumer')");
  EXPECT_THAT(value_error([] { parse_kv_transfer_config(R"({"connector": "NixlConnector"})"); }),
              StartsWith("--kv-transfer-config: unknown field 'connector'. Valid fields are: kv_connector, kv_role,"));
  // A role without a connector is no transfer instance.
  EXPECT_FALSE(parse_kv_transfer_config(R"({"kv_role": "kv_both"})").is_kv_transfer_instance());
}

TEST(EngineArgs, CacheDtypeBlockSizeDtypeParallelSizesAndLayout) {
  EngineArgs a;
  a.kv_cache_dtype = "fp8_e4m3";
  a.block_size = 32;
  a.dtype = "HALF";
  a.tensor_parallel_size = 4;
  a.decode_context_parallel_size = 2;
  a.prefill_context_parallel_size = 2;
  a.kv_cache_layout = "HND";
  a.batch_invariant = true;
  const EngineOptions o = parse(a);
  EXPECT_EQ(o.engine.cache.cache_dtype, CacheDType::fp8_e4m3);
  EXPECT_EQ(o.engine.cache.block_size, 32);
  EXPECT_TRUE(o.engine.cache.user_specified_block_size);
  EXPECT_EQ(o.dtype, "half");
  EXPECT_EQ(o.tensor_parallel_size, 4);
  EXPECT_EQ(o.engine.decode_context_parallel_size, 2);
  EXPECT_EQ(o.engine.prefill_context_parallel_size, 2);
  EXPECT_EQ(o.kv_cache_layout, "HND");
  EXPECT_TRUE(o.engine.batch_invariant);

  auto err = [](auto mutate) {
    EngineArgs b;
    mutate(b);
    return value_error([&] { parse_engine_args(b); });
  };
  EXPECT_THAT(err([](EngineArgs& b) { b.kv_cache_dtype = "fp4"; }),
              StartsWith("--kv-cache-dtype 'fp4' is not a cache dtype; valid values are: auto, float16, bfloat16, fp8,"));
  EXPECT_EQ(err([](EngineArgs& b) { b.block_size = 0; }), "--block-size: expected a positive integer, got 0");
  EXPECT_THAT(err([](EngineArgs& b) { b.dtype = "int8"; }), StartsWith("--dtype: invalid choice 'int8'"));
  EXPECT_EQ(err([](EngineArgs& b) { b.tensor_parallel_size = 0; }),
            "--tensor-parallel-size: expected a positive integer, got 0");
  EXPECT_EQ(err([](EngineArgs& b) {
              b.tensor_parallel_size = 4;
              b.decode_context_parallel_size = 3;
            }),
            "tensor_parallel_size (4) must be divisible by decode_context_parallel_size (3)");
  EXPECT_EQ(err([](EngineArgs& b) { b.kv_cache_layout = "NHC"; }),
            "Unknown KV cache layout 'NHC'. Valid layouts: ['LBHNC', 'LBNHC', 'LHBNC', 'BLHNC', 'BLNHC', 'BHLNC']");
}

}  // namespace
}  // namespace attnsel
