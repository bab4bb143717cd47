// `attnsel select`, run as a process: golden --json objects, the readable explanation,
// and the exit codes of success and of failed selections.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attnsel/facts.hpp"
#include "attnsel/platform.hpp"
#include "attnsel/registry.hpp"
#include "cli/cli_process.hpp"

namespace attnsel {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using test::run_attnsel;

using json = nlohmann::json;

class SelectCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  }
  // `attnsel select --json args...`, expecting `exit_code` (-1: any); returns the parsed object.
  json select_json(std::vector<std::string> args, int exit_code = 0) {
    args.insert(args.begin(), {"select", "--json"});
    last_ = run_attnsel(args);
    if (exit_code >= 0) {
      EXPECT_EQ(last_.exit_code, exit_code) << "stdout: " << last_.out << "\nstderr: " << last_.err;
    }
    try {
      return json::parse(last_.out);
    } catch (const json::exception& e) {
      ADD_FAILURE() << "not JSON: " << e.what() << "\n" << last_.out;
      return json::object();
    }
  }
  static std::vector<std::string> names(const json& candidates) {
    std::vector<std::string> out;
    for (const json& c : candidates) out.push_back(c.at("backend"));
    return out;
  }
  static const json& candidate(const json& j, std::string_view name) {
    for (const json& c : j.at("candidates"))
      if (c.at("backend") == name) return c;
    static const json none = json::object();
    ADD_FAILURE() << "no candidate " << name;
    return none;
  }
  test::CliResult last_;
};

TEST_F(SelectCli, Hopper128DenseGoldenJson) {
  const json j = select_json({"--platform", "cuda:9.0", "--head-size", "128", "--dtype", "bfloat16"});
  EXPECT_EQ(j.at("backend"), "FLASH_ATTN");
  EXPECT_EQ(j.at("class"), "attnsel::backends::FlashAttentionBackend");
  EXPECT_EQ(j.at("priority"), 0);
  EXPECT_EQ(j.at("platform"), "cuda:9.0");
  EXPECT_EQ(j.at("mode"), "reference");
  EXPECT_EQ(j.at("warnings"), json::array());
  const json& c = j.at("config");
  EXPECT_EQ(c.at("head_size"), 128);
  EXPECT_EQ(c.at("dtype"), "bfloat16");
  EXPECT_TRUE(c.at("kv_cache_dtype").is_null());
  EXPECT_TRUE(c.at("block_size").is_null());
  EXPECT_EQ(c.at("attn_type"), "decoder");
  for (const char* flag : {"use_mla", "has_sink", "use_sparse", "use_mm_prefix", "use_per_head_quant_scales",
                           "has_sliding_window", "use_non_causal", "use_batch_invariant", "use_kv_connector",
                           "use_pcp", "use_adaptive_verification", "use_dcp", "use_rswa"})
    EXPECT_EQ(c.at(flag), false) << flag;
  // The seed's SM 9.x list, in order, each candidate with its priority.
  EXPECT_THAT(names(j.at("candidates")),
              ElementsAre("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"));
  for (std::size_t i = 0; i < j.at("candidates").size(); ++i) EXPECT_EQ(j["candidates"][i].at("priority"), i);
  EXPECT_EQ(candidate(j, "FLASH_ATTN"), (json{{"backend", "FLASH_ATTN"}, {"priority", 0}, {"valid", true},
                                              {"reasons", json::array()}}));
}

TEST_F(SelectCli, Blackwell128DensePrefersFlashInfer) {
  const json j = select_json({"--platform", "cuda:10.0", "--head-size", "128"});
  EXPECT_EQ(j.at("backend"), "FLASHINFER");
  EXPECT_EQ(j.at("class"), "attnsel::backends::FlashInferBackend");
  EXPECT_EQ(j.at("priority"), 0);
  EXPECT_THAT(names(j.at("candidates")),
              ElementsAre("FLASHINFER", "FLASH_ATTN", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"));
}

TEST_F(SelectCli, NonCausalOnBlackwellPrefersFlashAttention) {
  const json j = select_json({"--platform", "cuda:10.0", "--use-non-causal"});
  EXPECT_EQ(j.at("config").at("use_non_causal"), true);
  EXPECT_EQ(names(j.at("candidates")).front(), "FLASH_ATTN");
}

TEST_F(SelectCli, MultimodalPrefixOnHopperChoosesTheTritonFlashAttentionComposite) {
  const json j = select_json({"--platform", "cuda:9.0", "--head-size", "256", "--use-mm-prefix"});
  EXPECT_EQ(j.at("backend"), "TRITON_FLASH_ATTN");
  EXPECT_EQ(j.at("priority"), 0);
}

TEST_F(SelectCli, MultimodalPrefixOnBlackwellChoosesTheTritonFlashInferComposite) {
  const json j = select_json({"--platform", "cuda:10.0", "--head-size", "256", "--use-mm-prefix"});
  EXPECT_EQ(j.at("backend"), "TRITON_FLASHINFER");
}

TEST_F(SelectCli, ExplicitBackendIsCaseInsensitiveAndHasNoPriority) {
  const json j = select_json({"--platform", "cuda:9.0", "--attention-backend", "triton_attn"});
  EXPECT_EQ(j.at("backend"), "TRITON_ATTN");
  EXPECT_EQ(j.at("class"), "attnsel::backends::TritonAttentionBackend");
  EXPECT_TRUE(j.at("priority").is_null());
  EXPECT_EQ(j.at("requested"), "TRITON_ATTN");
}

TEST_F(SelectCli, ExplicitInvalidBackendExitsThreeWithVllmsMessage) {
  const json j = select_json({"--platform", "cuda:9.0", "--attention-backend", "FLASHMLA"}, 3);
  EXPECT_EQ(j.at("error_type"), "ValueError");
  EXPECT_THAT(j.at("error").get<std::string>(),
              AllOf(StartsWith("Selected backend FLASHMLA is not valid for this "
                               "configuration. Reason: ['"),
                    HasSubstr("'non-MLA not supported'")));
  EXPECT_THAT(last_.err, HasSubstr("Selected backend FLASHMLA is not valid"));
}

TEST_F(SelectCli, PerKindOverrideAppliesToItsKindOnly) {
  const json sliding = select_json({"--platform", "cuda:9.0", "--has-sliding-window", "--backend-per-kind",
                                    "sliding_window=TRITON_ATTN"});
  EXPECT_EQ(sliding.at("backend"), "TRITON_ATTN");
  EXPECT_EQ(sliding.at("config").at("has_sliding_window"), true);
  const json full = select_json({"--platform", "cuda:9.0", "--backend-per-kind", "sliding_window=TRITON_ATTN"});
  EXPECT_EQ(full.at("backend"), "FLASH_ATTN");
  EXPECT_TRUE(full.at("requested").is_null());
}

TEST_F(SelectCli, BlockSizeIsUserSpecifiedOnlyWhenGiven) {
  EXPECT_EQ(select_json({"--platform", "cuda:9.0", "--block-size", "32"}).at("config").at("block_size"), 32);
  EXPECT_TRUE(select_json({"--platform", "cuda:9.0"}).at("config").at("block_size").is_null());
}

TEST_F(SelectCli, EngineLevelFlagsReachTheSelectorConfig) {
  const json j = select_json({"--platform", "cuda:9.0", "--use-dcp", "--use-pcp", "--use-kv-connector",
                              "--use-batch-invariant", "--use-adaptive-verification", "--kv-cache-dtype", "fp8",
                              "--attn-type", "encoder_only", "--num-heads", "16"},
                             -1);
  // The config is reported whether or not a backend accepts it.
  const json& c = j.at("config");
  EXPECT_EQ(c.at("use_dcp"), true);
  EXPECT_EQ(c.at("use_pcp"), true);
  EXPECT_EQ(c.at("use_kv_connector"), true);
  EXPECT_EQ(c.at("use_batch_invariant"), true);
  EXPECT_EQ(c.at("use_adaptive_verification"), true);
  EXPECT_EQ(c.at("kv_cache_dtype"), "fp8");
  EXPECT_EQ(c.at("attn_type"), "encoder_only");
  if (last_.exit_code == 0) {
    EXPECT_EQ(j.at("num_heads"), 16);
  }
}

TEST_F(SelectCli, BlockSizeThatPrecludesBetterBackendsIsAWarning) {
  const json j = select_json({"--platform", "cuda:10.0", "--use-mla", "--head-size", "576", "--block-size", "16"});
  EXPECT_EQ(j.at("backend"), "TRITON_MLA");
  EXPECT_EQ(j.at("priority"), 5);
  EXPECT_EQ(j.at("warnings"),
            (json{"--block-size 16 precluded higher-priority backend(s) FLASHINFER_MLA, CUTLASS_MLA. Using "
                  "TRITON_MLA instead, which may result in reduced performance. Consider removing --block-size to "
                  "auto-select the optimal block size."}));
  EXPECT_EQ(candidate(j, "FLASHINFER_MLA").at("reasons"), (json{"block_size not supported"}));
  const auto r = run_attnsel({"select", "--platform", "cuda:10.0", "--use-mla", "--head-size", "576",
                              "--block-size", "16"});
  EXPECT_THAT(r.out, HasSubstr("Warnings:\n  --block-size 16 precluded higher-priority backend(s) FLASHINFER_MLA"));
}

TEST_F(SelectCli, NumHeadsOrdersTheBlackwellSparseMlaTail) {
  // FlashMLA pads heads: with 16 heads or fewer FlashInfer's sparse kernel comes first.
  const std::vector<std::string> sparse{"--platform", "cuda:10.0", "--use-mla", "--use-sparse", "--head-size", "576"};
  auto with_heads = [&](const char* n) {
    std::vector<std::string> args = sparse;
    args.insert(args.end(), {"--num-heads", n});
    return select_json(args);
  };
  EXPECT_EQ(with_heads("128").at("backend"), "FLASHMLA_SPARSE");
  const json few = with_heads("16");
  EXPECT_EQ(few.at("backend"), "FLASHINFER_MLA_SPARSE");
  EXPECT_EQ(few.at("num_heads"), 16);
}

TEST_F(SelectCli, LibraryLogsFollowAttnselLogLevelAndStayOffStdout) {
  const std::vector<std::string> args{"select", "--platform", "cuda:9.0"};
  const auto info = run_attnsel(args, {"ATTNSEL_LOG_LEVEL=info"});
  ASSERT_EQ(info.exit_code, 0);
  EXPECT_THAT(info.err, HasSubstr("Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', "
                                  "'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION']."));
  EXPECT_THAT(info.out, Not(HasSubstr("potential backends")));
  const auto off = run_attnsel(args, {"ATTNSEL_LOG_LEVEL=off"});
  EXPECT_EQ(off.err, "");
  EXPECT_EQ(off.out, info.out);
}

TEST_F(SelectCli, NoValidBackendExitsThreeWithEveryCandidatesReasons) {
  // Head size 20 with an e5m2 cache: FLEX takes the head size but not the cache, the rest
  // reject the head size.
  const json j = select_json({"--platform", "cuda:9.0", "--head-size", "20", "--kv-cache-dtype", "fp8_e5m2"}, 3);
  EXPECT_EQ(j.at("error_type"), "ValueError");
  EXPECT_THAT(j.at("error").get<std::string>(), StartsWith("No valid attention backend found for cuda with "
                                                           "AttentionSelectorConfig(head_size=20"));
  EXPECT_THAT(names(j.at("candidates")),
              ElementsAre("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"));
  for (const json& c : j.at("candidates")) {
    EXPECT_EQ(c.at("valid"), false);
    EXPECT_FALSE(c.at("reasons").empty());
  }
  EXPECT_THAT(j.at("candidates").at(3).at("reasons").get<std::vector<std::string>>(),
              ElementsAre("kv_cache_dtype not supported"));
}

TEST_F(SelectCli, OtherPlatformHasNoBackends) {
  const json j = select_json({"--platform", "other:acme"}, 3);
  EXPECT_EQ(j.at("error"), "Invalid attention backend for acme");
  EXPECT_EQ(j.at("error_type"), "ValueError");
}

TEST_F(SelectCli, SparseOnCpuIsNotImplemented) {
  const json j = select_json({"--platform", "cpu", "--use-mla", "--use-sparse", "--head-size", "576"}, 3);
  EXPECT_EQ(j.at("error"), "Sparse Attention is not supported on CPU.");
  EXPECT_EQ(j.at("error_type"), "NotImplementedError");
}

TEST_F(SelectCli, RunnableModeRejectsBackendsWithoutAKernelHere) {
  const json j = select_json({"--platform", "cuda:9.0", "--mode", "runnable"}, -1);
  if (!j.contains("candidates")) FAIL() << j.dump();
  EXPECT_EQ(j.value("mode", "runnable"), "runnable");
  const auto cls = AttentionBackendEnum["FLASH_ATTN"].get_attention_class();
  const json& fa = candidate(j, "FLASH_ATTN");
  if (!cls->has_kernel()) {
    EXPECT_EQ(fa.at("valid"), false);
    EXPECT_THAT(fa.at("reasons").at(0).get<std::string>(), StartsWith("ImportError: "));
  }
}

TEST_F(SelectCli, ReadableExplanationShowsPlatformConfigCandidatesAndChoice) {
  const auto r = run_attnsel({"select", "--platform", "cuda:9.0", "--head-size", "128"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Platform:  cuda:9.0 (simulated, reference mode)\n"));
  EXPECT_THAT(r.out, HasSubstr("Config:    AttentionSelectorConfig(head_size=128, dtype=torch.bfloat16, "
                               "kv_cache_dtype=None, block_size=None, use_mla=False"));
  EXPECT_THAT(r.out, HasSubstr("Requested: auto (the platform's priority order)\n"));
  EXPECT_THAT(r.out, HasSubstr("Candidates, in priority order:\n  [0] \u2713 FLASH_ATTN\n"));
  EXPECT_THAT(r.out, HasSubstr("Chosen:    FLASH_ATTN (attnsel::backends::FlashAttentionBackend, priority 0)\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("Warnings:")));
}

TEST_F(SelectCli, ReadableExplanationShowsRejectionReasons) {
  const auto r = run_attnsel({"select", "--platform", "cuda:9.0", "--head-size", "72"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // FlashAttention needs a multiple of 8 up to 256; FlashInfer lists 64, 128, 256, 512.
  EXPECT_THAT(r.out, HasSubstr("[1] \u2717 FLASHINFER: head_size not supported"));
}

TEST_F(SelectCli, ReadableFailureShowsTheCandidatesThenTheError) {
  const auto r =
      run_attnsel({"select", "--platform", "cuda:9.0", "--head-size", "20", "--kv-cache-dtype", "fp8_e5m2"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("\u2717 FLASH_ATTN: "));
  EXPECT_THAT(r.out, HasSubstr("head_size not supported"));
  EXPECT_THAT(r.err, HasSubstr("attnsel: error: No valid attention backend found for cuda"));
}

TEST_F(SelectCli, ReadableExplicitRequestSaysThereIsNoFallback) {
  const auto r = run_attnsel({"select", "--platform", "cuda:9.0", "--attention-backend", "FLEX_ATTENTION"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Requested: FLEX_ATTENTION (explicit, no fallback)"));
  EXPECT_THAT(r.out, HasSubstr("Chosen:    FLEX_ATTENTION (attnsel::backends::FlexAttentionBackend)\n"));
}

TEST_F(SelectCli, ListFactsDocumentsEveryFactWithItsDefaultOnThePlatform) {
  const auto platform = make_platform("rocm:gfx942");
  const auto r = run_attnsel({"select", "--platform", "rocm:gfx942", "--list-facts"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const FactDefinition& d : fact_definitions()) {
    const std::string line = std::string(d.name) + " = " +
                             fact_value_to_string(platform->env().facts.values().at(std::string(d.name))) +
                             " (default)";
    EXPECT_THAT(r.out, HasSubstr(line));
    EXPECT_THAT(r.out, HasSubstr(std::string(d.doc)));
  }
}

TEST_F(SelectCli, ListFactsShowsAnOverriddenValueAndItsDefault) {
  const json j = select_json({"--platform", "cuda:9.0", "--fact", "flash_attn_version=2", "--list-facts"});
  bool found = false;
  for (const json& f : j.at("facts")) {
    if (f.at("name") != "flash_attn_version") continue;
    found = true;
    EXPECT_EQ(f.at("value"), "2");
    EXPECT_EQ(f.at("overridden"), true);
    EXPECT_EQ(f.at("type"), "int");
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(j.at("facts").size(), fact_definitions().size());
}

// vLLM's platform messages at the command: CpuPlatform.check_and_update_config's block-size
// warning, and ROCm's lines for a layer with a TurboQuant cache.
TEST_F(SelectCli, CpuBlockSizeWarning) {
  const json j = select_json({"--platform", "cpu", "--block-size", "16"});
  EXPECT_THAT(j.at("warnings"), ElementsAre("CPU backend prefers block_size is multiples of 32, otherwise the "
                                            "performance is not optimized."));
  EXPECT_TRUE(select_json({"--platform", "cpu", "--block-size", "64"}).at("warnings").empty());
}

TEST_F(SelectCli, RocmTurboQuantLayerLogsVllmsLines) {
  const std::vector<std::string> layer{"select", "--platform", "rocm:gfx942", "--kv-cache-dtype", "turboquant_k8v4",
                                       "--head-size", "128"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = layer;
    args.insert(args.end(), more.begin(), more.end());
    return run_attnsel(args, {"ATTNSEL_LOG_LEVEL=info"});
  };
  const test::CliResult explicit_choice = with({"--attention-backend", "TURBOQUANT"});
  EXPECT_EQ(explicit_choice.exit_code, 0) << explicit_choice.err;
  EXPECT_THAT(explicit_choice.err, HasSubstr("Using TURBOQUANT backend (selected via --attention-backend)."));
  const test::CliResult replaced = with({"--attention-backend", "ROCM_ATTN"});
  EXPECT_EQ(replaced.exit_code, 0) << replaced.err;
  EXPECT_THAT(replaced.out, HasSubstr("Chosen:    TURBOQUANT"));
  EXPECT_THAT(replaced.err, HasSubstr("Found incompatible backend(s) [ROCM_ATTN, ROCM_AITER_UNIFIED_ATTN, "
                                      "TRITON_ATTN] with decoder. Overriding with TURBOQUANT out of potential "
                                      "backends: ['TURBOQUANT']."));
}

}  // namespace
}  // namespace attnsel
