// One road for engine settings: the same settings — an attention config, batch invariance,
// decode context parallelism, a KV connector, per-kind overrides — give the same answer
// through every entry point: the C++ Selector, the C API, `attnsel select`, and where the
// door can express them `attnsel plan` (C++, C API and command) and `attnsel run`. Each case
// is one where a setting changes a runtime fact (the FlashAttention version, a kernel's
// block size, a layout list) and not only a selector field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnsel/attnsel.h"
#include "attnsel/engine_args.hpp"
#include "attnsel/model.hpp"
#include "attnsel/plan.hpp"
#include "attnsel/selector.hpp"
#include "cli/cli_process.hpp"

namespace attnsel {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

// The engine's settings and one layer, as each door spells them.
struct Settings {
  std::string name = {};
  std::string platform = {};
  std::optional<std::string> attention_backend = {};
  std::optional<std::string> attention_config = {};  ///< --attention-config JSON
  bool batch_invariant = false;
  bool use_dcp = false;       ///< decode context parallelism of 2 (tensor parallelism 2 in a plan)
  bool kv_connector = false;  ///< a NixlConnector KV-transfer instance
  int head_size = 128;
  std::optional<std::string> kv_cache_dtype = {};
  std::optional<int> block_size = {};
  bool has_sink = false;
  bool has_sliding_window = false;
  std::vector<std::string> facts = {};
  /// The chosen backend, or a text the failure message holds.
  std::string expected = {};
  /// A Llama-3-8B plan (head size 128, bfloat16) with these settings expresses the layer.
  bool plannable = false;
  /// `attnsel run` expresses them (no switch but the attention config).
  bool runnable = false;
};

// The chosen backend, or the error (a selection's failure object, or a failed plan group).
std::string answer_of(const json& j) {
  if (j.contains("backend") && !j.at("backend").is_null()) return j.at("backend").get<std::string>();
  return j.at("error").get<std::string>();
}

// The C++ Selector on an EngineConfig.
std::string cxx_select(const Settings& s) {
  EngineConfig engine;
  engine.attention = make_attention_config(s.attention_backend, s.attention_config);
  engine.batch_invariant = s.batch_invariant;
  engine.decode_context_parallel_size = s.use_dcp ? 2 : 1;
  engine.kv_transfer_instance = s.kv_connector;
  engine.cache.cache_dtype = cache_dtype_from(s.kv_cache_dtype.value_or("auto"));
  if (s.block_size) {
    engine.cache.block_size = *s.block_size;
    engine.cache.user_specified_block_size = true;
  }
  LayerRequest layer;
  layer.head_size = s.head_size;
  if (s.kv_cache_dtype) layer.kv_cache_dtype = cache_dtype_from(*s.kv_cache_dtype);
  layer.has_sink = s.has_sink;
  layer.has_sliding_window = s.has_sliding_window;
  Selector selector(make_platform(s.platform, s.facts));
  try {
    return selector.select(engine, layer)->backend;
  } catch (const Error& e) {
    return e.what();
  }
}

// The C API's attnsel_select_json.
std::string capi_select(const Settings& s) {
  attnsel_select_request r;
  attnsel_select_request_init(&r);
  r.platform = s.platform.c_str();
  std::vector<const char*> facts;
  for (const std::string& f : s.facts) facts.push_back(f.c_str());
  r.facts = facts.data();
  r.num_facts = static_cast<std::uint32_t>(facts.size());
  r.attention_backend = s.attention_backend ? s.attention_backend->c_str() : nullptr;
  r.attention_config = s.attention_config ? s.attention_config->c_str() : nullptr;
  r.head_size = s.head_size;
  r.kv_cache_dtype = s.kv_cache_dtype ? s.kv_cache_dtype->c_str() : nullptr;
  r.block_size = s.block_size.value_or(0);
  r.has_sink = s.has_sink;
  r.has_sliding_window = s.has_sliding_window;
  r.use_batch_invariant = s.batch_invariant;
  r.use_dcp = s.use_dcp;
  r.use_kv_connector = s.kv_connector;
  char* text = nullptr;
  (void)attnsel_select_json(&r, &text);
  if (text == nullptr) return attnsel_last_error();
  const json j = json::parse(text);
  attnsel_free_string(text);
  return answer_of(j);
}

// `attnsel select --json`.
std::string cli_select(const Settings& s) {
  std::vector<std::string> args{"select", "--json", "--platform", s.platform, "--head-size", std::to_string(s.head_size)};
  if (s.attention_backend) args.insert(args.end(), {"--attention-backend", *s.attention_backend});
  if (s.attention_config) args.insert(args.end(), {"--attention-config", *s.attention_config});
  if (s.kv_cache_dtype) args.insert(args.end(), {"--kv-cache-dtype", *s.kv_cache_dtype});
  if (s.block_size) args.insert(args.end(), {"--block-size", std::to_string(*s.block_size)});
  if (s.batch_invariant) args.emplace_back("--use-batch-invariant");
  if (s.use_dcp) args.emplace_back("--use-dcp");
  if (s.kv_connector) args.emplace_back("--use-kv-connector");
  if (s.has_sink) args.emplace_back("--has-sink");
  if (s.has_sliding_window) args.emplace_back("--has-sliding-window");
  for (const std::string& f : s.facts) args.insert(args.end(), {"--fact", f});
  const test::CliResult r = test::run_attnsel(args);
  return answer_of(json::parse(r.out));
}

// vLLM's engine arguments of a plan with these settings.
EngineArgs plan_args(const Settings& s) {
  EngineArgs a;
  a.attention_backend = s.attention_backend;
  a.attention_config = s.attention_config;
  a.kv_cache_dtype = s.kv_cache_dtype.value_or("auto");
  a.block_size = s.block_size;
  a.batch_invariant = s.batch_invariant;
  if (s.use_dcp) a.tensor_parallel_size = a.decode_context_parallel_size = 2;
  if (s.kv_connector) a.kv_transfer_config = R"({"kv_connector": "NixlConnector", "kv_role": "kv_both"})";
  return a;
}

std::string llama_path() { return std::string(ATTNSEL_SOURCE_DIR) + "/examples/models/llama.json"; }

// The only group's answer of a plan, as plan_json prints it.
std::string plan_answer(const json& j) {
  if (j.contains("groups")) return answer_of(j.at("groups").at(0));
  return j.at("error").get<std::string>();
}

std::string cxx_plan(const Settings& s) {
  const ModelSpec model = load_model_config(llama_path());
  const EngineOptions options = parse_engine_args(plan_args(s));
  Selector selector(make_plan_platform(model, options, s.platform, s.facts));
  try {
    const ModelPlan plan = make_plan(model, options, selector);
    return plan.groups.at(0).backend;
  } catch (const PlanError& e) {
    return e.what();
  }
}

std::string capi_plan(const Settings& s) {
  const EngineArgs a = plan_args(s);
  attnsel_plan_request r;
  attnsel_plan_request_init(&r);
  const std::string model = llama_path();
  r.platform = s.platform.c_str();
  r.model_path = model.c_str();
  r.attention_backend = s.attention_backend ? s.attention_backend->c_str() : nullptr;
  r.attention_config = s.attention_config ? s.attention_config->c_str() : nullptr;
  r.kv_cache_dtype = a.kv_cache_dtype.c_str();
  r.block_size = s.block_size.value_or(0);
  r.tensor_parallel_size = a.tensor_parallel_size;
  r.decode_context_parallel_size = a.decode_context_parallel_size;
  r.kv_transfer_config = s.kv_connector ? a.kv_transfer_config->c_str() : nullptr;
  r.batch_invariant = s.batch_invariant;
  char* text = nullptr;
  (void)attnsel_plan_json(&r, &text);
  if (text == nullptr) return attnsel_last_error();
  json j = json::parse(text);
  attnsel_free_string(text);
  return j.contains("plan") && !j.at("plan").is_null() ? plan_answer(j.at("plan")) : plan_answer(j);
}

std::string cli_plan(const Settings& s) {
  const EngineArgs a = plan_args(s);
  std::vector<std::string> args{"plan", "--json", "--model", llama_path(), "--platform", s.platform,
                                "--kv-cache-dtype", a.kv_cache_dtype};
  if (s.attention_backend) args.insert(args.end(), {"--attention-backend", *s.attention_backend});
  if (s.attention_config) args.insert(args.end(), {"--attention-config", *s.attention_config});
  if (s.block_size) args.insert(args.end(), {"--block-size", std::to_string(*s.block_size)});
  if (s.batch_invariant) args.emplace_back("--batch-invariant");
  if (s.use_dcp)
    args.insert(args.end(), {"--tensor-parallel-size", "2", "--decode-context-parallel-size", "2"});
  if (s.kv_connector) args.insert(args.end(), {"--kv-transfer-config", *a.kv_transfer_config});
  for (const std::string& f : s.facts) args.insert(args.end(), {"--fact", f});
  const json j = json::parse(test::run_attnsel(args).out);
  return j.contains("plan") && !j.at("plan").is_null() ? plan_answer(j.at("plan")) : plan_answer(j);
}

// `attnsel run`: the selection comes first; a failed one is the command's error.
std::string cli_run_selection_error(const Settings& s) {
  std::vector<std::string> args{"run", "--platform", s.platform, "--head-size", std::to_string(s.head_size),
                                "--decode-steps", "1", "--context", "16", "--batch", "1", "--num-layers", "1"};
  if (s.attention_backend) args.insert(args.end(), {"--attention-backend", *s.attention_backend});
  if (s.attention_config) args.insert(args.end(), {"--attention-config", *s.attention_config});
  if (s.kv_cache_dtype) args.insert(args.end(), {"--kv-cache-dtype", *s.kv_cache_dtype});
  const test::CliResult r = test::run_attnsel(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::string prefix = "attnsel: error: ";
  const std::size_t at = r.err.find(prefix);
  return at == std::string::npos ? r.err : r.err.substr(at + prefix.size(), r.err.find('\n', at) - at - prefix.size());
}

const Settings kSettingsCases[] = {
    // VLLM_BATCH_INVARIANT demotes FA4 to FA2, which has no fp8 cache on Blackwell; FlashInfer
    // has no batch invariance.
    {.name = "batch_invariance_changes_the_fa_version", .platform = "cuda:10.0", .batch_invariant = true,
     .kv_cache_dtype = "fp8", .expected = "TRITON_ATTN", .plannable = true},
    {.name = "without_batch_invariance_fa4_serves_fp8", .platform = "cuda:10.0", .kv_cache_dtype = "fp8",
     .expected = "FLASHINFER", .plannable = true},
    // AttentionConfig.flash_attn_version=2: FA2 has no fp8 cache on Hopper.
    {.name = "flash_attn_version_from_the_attention_config", .platform = "cuda:9.0",
     .attention_config = R"({"flash_attn_version": 2})", .kv_cache_dtype = "fp8", .expected = "FLASHINFER",
     .plannable = true},
    {.name = "explicit_fa_with_the_config_version", .platform = "cuda:9.0", .attention_backend = "FLASH_ATTN",
     .attention_config = R"({"flash_attn_version": 2})", .kv_cache_dtype = "fp8",
     .expected = "Selected backend FLASH_ATTN is not valid for this configuration. Reason: ['kv_cache_dtype not "
                 "supported', 'FP8 KV cache requires FA3 on SM90 or FA4 on SM100']",
     .plannable = true, .runnable = true},
    // use_trtllm_attention=false turns FlashInfer's sinks off.
    {.name = "trtllm_switch_from_the_attention_config", .platform = "cuda:10.0",
     .attention_config = R"({"use_trtllm_attention": false})", .has_sink = true, .expected = "FLASH_ATTN"},
    // DCP > 1: FA4's head-256 kernel falls back to FA2, whose kernel block is not pinned to 128.
    {.name = "dcp_unpins_the_fa4_head_256_block", .platform = "cuda:10.0", .attention_backend = "FLASH_ATTN",
     .use_dcp = true, .head_size = 256, .block_size = 64, .facts = {"model.head_size=256"}, .expected = "FLASH_ATTN"},
    {.name = "without_dcp_the_fa4_block_is_pinned", .platform = "cuda:10.0", .attention_backend = "FLASH_ATTN",
     .head_size = 256, .block_size = 64, .facts = {"model.head_size=256"},
     .expected = "Selected backend FLASH_ATTN is not valid for this configuration. Reason: ['block_size not "
                 "supported']"},
    // A KV connector: ROCM_ATTN refuses it.
    {.name = "kv_connector", .platform = "rocm:gfx942", .kv_connector = true, .expected = "ROCM_AITER_UNIFIED_ATTN",
     .plannable = true},
    // backend_per_kind from the attention config applies to the sliding-window layer.
    {.name = "per_kind_override_from_the_attention_config", .platform = "cuda:9.0",
     .attention_config = R"({"backend_per_kind": {"sliding_window": "triton_attn"}})", .has_sliding_window = true,
     .expected = "TRITON_ATTN"},
    // A user's fact wins over the engine's setting, at every door.
    {.name = "a_users_fact_wins", .platform = "cuda:10.0", .batch_invariant = true, .kv_cache_dtype = "fp8",
     .facts = {"env.vllm_batch_invariant=false"}, .expected = "FLASH_ATTN"},
};

class EngineSettingsDoors : public ::testing::TestWithParam<Settings> {
 protected:
  void SetUp() override {
    if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  }
};

TEST_P(EngineSettingsDoors, EveryEntryPointGivesTheSameAnswer) {
  const Settings& s = GetParam();
  const std::string cxx = cxx_select(s);
  EXPECT_THAT(cxx, HasSubstr(s.expected));
  EXPECT_EQ(capi_select(s), cxx) << "C API";
  EXPECT_EQ(cli_select(s), cxx) << "attnsel select";
  if (s.plannable) {
    EXPECT_EQ(cxx_plan(s), cxx) << "make_plan";
    EXPECT_EQ(capi_plan(s), cxx) << "attnsel_plan_json";
    EXPECT_EQ(cli_plan(s), cxx) << "attnsel plan";
  }
  if (s.runnable) {
    EXPECT_EQ(cli_run_selection_error(s), cxx) << "attnsel run";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, EngineSettingsDoors, ::testing::ValuesIn(kSettingsCases),
                         [](const ::testing::TestParamInfo<Settings>& info) { return info.param.name; });

// The runtime facts a selection sees are the engine's settings, whichever door asks.
TEST(EngineSettingsFacts, ListFactsShowsTheEngineSettings) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  const test::CliResult r = test::run_attnsel({"select", "--platform", "cuda:10.0", "--use-batch-invariant",
                                               "--attention-config", R"({"flash_attn_version": 2})", "--list-facts",
                                               "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  std::map<std::string, json> facts;
  for (const json& f : j.at("facts")) facts[f.at("name")] = f;
  EXPECT_EQ(facts.at("env.vllm_batch_invariant").at("value"), "true");
  EXPECT_EQ(facts.at("env.vllm_batch_invariant").at("from_engine"), true);
  EXPECT_EQ(facts.at("flash_attn_version").at("value"), "2");
  EXPECT_EQ(facts.at("kv_connector.configured").at("value"), "false");

  attnsel_select_request req;
  attnsel_select_request_init(&req);
  req.platform = "cuda:10.0";
  req.use_batch_invariant = 1;
  req.attention_config = R"({"flash_attn_version": 2})";
  char* text = nullptr;
  ASSERT_EQ(attnsel_list_facts(&req, &text), ATTNSEL_STATUS_OK) << attnsel_last_error();
  EXPECT_EQ(json::parse(text), j);
  attnsel_free_string(text);
}

TEST(EngineSettingsFacts, WithEngineKeepsThePlatformWhenNothingChanges) {
  const std::shared_ptr<const Platform> cuda = make_platform("cuda:9.0");
  EXPECT_EQ(with_engine(cuda, EngineConfig{}), cuda);
  EngineConfig invariant;
  invariant.batch_invariant = true;
  const std::shared_ptr<const Platform> derived = with_engine(cuda, invariant);
  ASSERT_NE(derived, cuda);
  EXPECT_EQ(derived->spec(), "cuda:9.0");
  EXPECT_EQ(derived->mode(), cuda->mode());
  EXPECT_TRUE(derived->env().facts.get_bool("env.vllm_batch_invariant"));
  EXPECT_TRUE(derived->env().facts.is_from_engine("env.vllm_batch_invariant"));
  EXPECT_FALSE(derived->env().facts.is_overridden("env.vllm_batch_invariant"));
  // The engine's facts replace another engine's, never a user's.
  EXPECT_FALSE(with_engine(derived, EngineConfig{})->env().facts.get_bool("env.vllm_batch_invariant"));
  const std::shared_ptr<const Platform> user = make_platform("cuda:9.0", {"env.vllm_batch_invariant=false"});
  EXPECT_EQ(with_engine(user, invariant), user);
}

TEST(EngineSettingsFacts, SelectorRunsEachEngineOnItsOwnPlatform) {
  Selector selector(make_platform("cuda:10.0"));
  EngineConfig plain;
  plain.cache.cache_dtype = CacheDType::fp8;
  EngineConfig invariant = plain;
  invariant.batch_invariant = true;
  LayerRequest layer;
  layer.head_size = 128;
  layer.kv_cache_dtype = CacheDType::fp8;
  layer.attn_type = AttentionType::decoder;
  // One selector, two engines: neither answer is served from the other's cache entry.
  EXPECT_EQ(selector.select(plain, layer)->backend, "FLASHINFER");
  EXPECT_EQ(selector.select(invariant, layer)->backend, "TRITON_ATTN");
  EXPECT_EQ(selector.select(plain, layer)->backend, "FLASHINFER");
  EXPECT_TRUE(selector.platform_for(invariant)->env().facts.get_bool("env.vllm_batch_invariant"));
  EXPECT_EQ(selector.platform_for(invariant), selector.platform_for(invariant));
}

}  // namespace
}  // namespace attnsel
