// The documented runtime facts: names, types and vLLM's per-platform defaults.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "attnsel/errors.hpp"
#include "backends/runtime_facts.hpp"
#include "platforms/rocm_aiter.hpp"
#include "backends/test_env.hpp"

namespace attnsel {
namespace {
using testing::cuda_env;

TEST(FactTable, EveryFactIsDocumentedAndTyped) {
  const std::regex dotted("[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*");
  for (const FactDefinition& d : fact_definitions()) {
    EXPECT_TRUE(std::regex_match(std::string(d.name), dotted)) << d.name;
    EXPECT_FALSE(d.doc.empty()) << d.name;
    EXPECT_TRUE(d.type == "bool" || d.type == "int" || d.type == "string") << d.name;
    EXPECT_EQ(find_fact(d.name), &d);
    // Every platform gets a default of the declared type.
    for (const RuntimeEnv& env : {cuda_env(9, 0), testing::rocm_env("gfx942", 3), testing::cpu_env(),
                                  testing::xpu_env()}) {
      const FactValue& v = env.facts.values().at(std::string(d.name));
      const bool typed = (d.type == "bool" && std::holds_alternative<bool>(v)) ||
                         (d.type == "int" && std::holds_alternative<std::int64_t>(v)) ||
                         (d.type == "string" && std::holds_alternative<std::string>(v));
      EXPECT_TRUE(typed) << d.name;
    }
  }
}

TEST(FactTable, EveryFactStatesItsRangeAndEveryDefaultIsInIt) {
  for (const FactDefinition& d : fact_definitions()) {
    EXPECT_FALSE(d.range.valid.empty()) << d.name;
    if (d.type != "bool") {
      EXPECT_NE(d.range.accepts, nullptr) << d.name << ": an int or string fact has a range";
    }
    for (const RuntimeEnv& env : {cuda_env(9, 0), cuda_env(10, 0), testing::rocm_env("gfx942", 3),
                                  testing::cpu_env(), testing::xpu_env()}) {
      if (d.range.accepts != nullptr) {
        EXPECT_TRUE(d.range.accepts(env.facts.values().at(std::string(d.name)))) << d.name;
      }
    }
  }
}

// The range holds at every door: text (--fact, the C API's facts) and typed values (C++).
TEST(FactTable, ValuesOutsideTheRangeAreRefusedNamingIt) {
  RuntimeFacts facts(DeviceDescription{PlatformKind::cuda, DeviceCapability{9, 0}, "cuda", "", 0});
  EXPECT_THAT([&] { facts.set("flash_attn_version", FactValue{std::int64_t{7}}); },
              ::testing::ThrowsMessage<ValueError>(
                  "Invalid value '7' for fact flash_attn_version: expected 0 (auto), 2, 3 or 4"));
  EXPECT_THAT([&] { facts.set("model.num_kv_heads", "65537"); },
              ::testing::ThrowsMessage<ValueError>(::testing::HasSubstr("expected 0 (no model config) to 65536")));
  EXPECT_THAT([&] { facts.set("flashinfer.use_trtllm_attention", "1"); },
              ::testing::ThrowsMessage<ValueError>(::testing::HasSubstr("expected auto, true or false")));
  EXPECT_THAT([&] { facts.set("cpu.amx", FactValue{std::int64_t{1}}); },
              ::testing::ThrowsMessage<ValueError>("Fact cpu.amx takes a value of type bool: true or false"));
  for (const char* v : {"0", "2", "3", "4"}) EXPECT_NO_THROW(facts.set("flash_attn_version", v)) << v;
  EXPECT_EQ(facts.get_int("flash_attn_version"), 4);
  EXPECT_NO_THROW(facts.set("flashinfer.use_trtllm_attention", "false"));
}

TEST(FactTable, FlashAttentionBuildsFollowTheHardware) {
  const RuntimeEnv a100 = cuda_env(8, 0), h100 = cuda_env(9, 0), b200 = cuda_env(10, 0), rtx = cuda_env(12, 0);
  EXPECT_TRUE(a100.facts.get_bool("flash_attn.fa2_supported"));
  EXPECT_FALSE(a100.facts.get_bool("flash_attn.fa3_supported"));
  EXPECT_TRUE(h100.facts.get_bool("flash_attn.fa3_supported"));
  EXPECT_TRUE(h100.facts.get_bool("flash_attn.fa4_supported"));
  EXPECT_FALSE(b200.facts.get_bool("flash_attn.fa3_supported"));
  EXPECT_TRUE(b200.facts.get_bool("flash_attn.fa4_supported"));
  EXPECT_FALSE(rtx.facts.get_bool("flash_attn.fa4_supported"));
  EXPECT_EQ(a100.facts.get_int("flash_attn_version"), 0);
  EXPECT_TRUE(backends::flash_attn_supports_mla(h100));
  EXPECT_FALSE(backends::flash_attn_supports_mla(b200));
}

TEST(FactTable, FlashInferAndFlashMlaDefaults) {
  EXPECT_TRUE(cuda_env(10, 0).facts.get_bool("flashinfer.trtllm_supported"));
  EXPECT_FALSE(cuda_env(9, 0).facts.get_bool("flashinfer.trtllm_supported"));
  EXPECT_EQ(cuda_env(10, 0).facts.get_string("flashinfer.use_trtllm_attention"), "auto");
  EXPECT_TRUE(cuda_env(9, 0).facts.get_bool("flashmla.available"));
  EXPECT_EQ(backends::flashmla_dense_unsupported_reason(cuda_env(9, 0)), std::nullopt);
  EXPECT_EQ(backends::flashmla_dense_unsupported_reason(cuda_env(10, 0)),
            "FlashMLA Dense is only supported on Hopper devices.");
  EXPECT_EQ(backends::flashmla_sparse_unsupported_reason(cuda_env(10, 0)), std::nullopt);
  EXPECT_EQ(backends::flashmla_sparse_unsupported_reason(cuda_env(12, 0)),
            "FlashMLA Sparse is only supported on Hopper and Blackwell DC devices.");
}

TEST(FactTable, RocmSwitchDefaults) {
  const RuntimeEnv mi300 = testing::rocm_env("gfx942", 3);
  EXPECT_FALSE(mi300.facts.get_bool("rocm.use_aiter"));
  EXPECT_TRUE(mi300.facts.get_bool("rocm.use_aiter_mha"));
  EXPECT_TRUE(mi300.facts.get_bool("rocm.use_aiter_mla"));
  EXPECT_FALSE(mi300.facts.get_bool("rocm.use_aiter_unified_attention"));
  EXPECT_TRUE(mi300.facts.get_bool("rocm.aiter_found"));
  EXPECT_EQ(mi300.facts.get_int("rocm.cdna_version"), 3);
  EXPECT_TRUE(platforms::is_aiter_found_and_supported(mi300));
  EXPECT_FALSE(platforms::is_aiter_switch_enabled(mi300, "rocm.use_aiter_mha"));  // the master switch is off
  RuntimeEnv on = mi300;
  testing::set_fact(on, "rocm.use_aiter", "1");
  EXPECT_TRUE(platforms::is_aiter_switch_enabled(on, "rocm.use_aiter_mha"));
  EXPECT_FALSE(platforms::is_aiter_switch_enabled(on, "rocm.use_aiter_unified_attention"));
  EXPECT_FALSE(platforms::is_aiter_found_and_supported(testing::rocm_env("gfx1100", 0)));  // not gfx9
  EXPECT_FALSE(cuda_env(9, 0).facts.get_bool("rocm.aiter_found"));
}

TEST(FactTable, ModelFactsThatCombinationRulesRead) {
  const RuntimeEnv env = cuda_env(10, 0);
  EXPECT_EQ(env.facts.get_int("model.qk_nope_head_dim"), 128);
  EXPECT_EQ(env.facts.get_int("model.index_topk"), 2048);
  EXPECT_FALSE(testing::cpu_env().facts.get_bool("cpu.amx"));
}

TEST(FactTable, BadValuesNameTheFact) {
  RuntimeEnv env = cuda_env(9, 0);
  try {
    testing::set_fact(env, "flash_attn.fa3_supported", "maybe");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("flash_attn.fa3_supported"), std::string::npos);
  }
  EXPECT_THROW(testing::set_fact(env, "flash_attn.no_such_fact", "1"), ValueError);
}

}  // namespace
}  // namespace attnsel
