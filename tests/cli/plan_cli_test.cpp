// `attnsel plan`, run as a process: the table, --json, --explain and --compare, and the exit
// codes of success (0), bad input (2) and plans with no valid choice (3).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_process.hpp"

namespace attnsel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using test::run_attnsel;
using json = nlohmann::json;

std::string example(const std::string& name) {
#ifdef ATTNSEL_SOURCE_DIR
  return std::string(ATTNSEL_SOURCE_DIR) + "/examples/models/" + name + ".json";
#else
  return name;
#endif
}

class PlanCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  }
  test::CliResult plan(std::vector<std::string> args, int exit_code) {
    args.insert(args.begin(), "plan");
    test::CliResult r = run_attnsel(args);
    EXPECT_EQ(r.exit_code, exit_code) << "stdout: " << r.out << "\nstderr: " << r.err;
    return r;
  }
  json plan_json(std::vector<std::string> args, int exit_code) {
    args.push_back("--json");
    const test::CliResult r = plan(std::move(args), exit_code);
    try {
      return json::parse(r.out);
    } catch (const json::exception& e) {
      ADD_FAILURE() << "not one JSON object: " << e.what() << "\n" << r.out;
      return json::object();
    }
  }
};

TEST_F(PlanCli, TableOfLayerRangesKindsBackendsBlockSizeAndLayout) {
  const auto r = plan({"--model", example("gemma2"), "--platform", "cuda:9.0"}, 0);
  EXPECT_THAT(r.out, HasSubstr("Platform:   cuda:9.0 (simulated, reference mode)"));
  EXPECT_THAT(r.out, HasSubstr("dtype bfloat16 (config: float32)"));
  EXPECT_THAT(r.out, HasSubstr("Layers            Kind            Type     Backend     Block  Layout  Cache per layer"));
  EXPECT_THAT(r.out, HasSubstr("0-40 (every 2nd)  sliding_window  decoder  FLASH_ATTN  16     LBNHC   8,192 B/token"));
  EXPECT_THAT(r.out, HasSubstr("1-41 (every 2nd)  full_attention  decoder  FLASH_ATTN  16     LBNHC   8,192 B/token"));
  EXPECT_THAT(r.out, HasSubstr("Block size: 16 (FLASH_ATTN.get_preferred_block_size(16))"));
  EXPECT_THAT(r.out, HasSubstr("KV cache:   344,064 bytes per token per rank"));
}

// vLLM's get_mamba_attn_backend: a Mamba backend without batch invariance under
// VLLM_BATCH_INVARIANT is vLLM's RuntimeError.
TEST_F(PlanCli, MambaSelectorRefusesBatchInvariance) {
  const json j = plan_json({"--model", example("mamba"), "--platform", "cuda:9.0", "--batch-invariant"}, 3);
  EXPECT_EQ(j.at("error"), "VLLM batch_invariant mode is not supported for MAMBA1_ATTN.");
  EXPECT_EQ(j.at("error_type"), "RuntimeError");
  EXPECT_EQ(plan_json({"--model", example("mamba"), "--platform", "cuda:9.0"}, 0).at("groups").at(0).at("backend"),
            "MAMBA1");
}

TEST_F(PlanCli, WithoutModelPlansTheBuiltInDefault) {
  const auto r = plan({"--platform", "cpu"}, 0);
  EXPECT_THAT(r.out, HasSubstr("<built-in default> (llama, LlamaForCausalLM)"));
  EXPECT_THAT(r.out, HasSubstr("0-31    full_attention  decoder  CPU_ATTN  128"));
}

TEST_F(PlanCli, ExplainShowsCandidatesAndTheRules) {
  const auto r = plan({"--model", example("deepseek_v32"), "--platform", "cuda:9.0", "--explain"}, 0);
  EXPECT_THAT(r.out, AllOf(HasSubstr("config:     AttentionSelectorConfig(head_size=576"),
                           HasSubstr("num_heads:  128"), HasSubstr("requested:  automatic"),
                           HasSubstr("\u2713 FLASH_ATTN_MLA_SPARSE"), HasSubstr("\u2717 FLASH_ATTN_MLA: sparse not supported"),
                           HasSubstr("indexer cache: the model fixes its backend"),
                           HasSubstr("Block size 64: FLASH_ATTN_MLA_SPARSE.get_preferred_block_size(16)"),
                           HasSubstr("KV-cache layout BLNHC: candidates ['BLNHC', 'BLHNC'] (block-compact only")));
}

TEST_F(PlanCli, JsonDescribesEveryGroup) {
  const json j = plan_json({"--model", example("qwen3_next"), "--platform", "cuda:9.0"}, 0);
  ASSERT_EQ(j.at("groups").size(), 2u);
  const json& gdn = j["groups"][0];
  EXPECT_EQ(gdn["mixer"], "mamba");
  EXPECT_EQ(gdn["backend"], "GDN_ATTN");
  EXPECT_EQ(gdn["request_source"], "Mamba selector");
  EXPECT_EQ(gdn["layer_indices"].size(), 36u);
  const json& attn = j["groups"][1];
  EXPECT_EQ(attn["kind"], "full_attention");
  EXPECT_EQ(attn["backend"], "FLASH_ATTN");
  EXPECT_EQ(attn["config"]["head_size"], 256);
  EXPECT_EQ(attn["candidates"][0]["backend"], "FLASH_ATTN");
  // vLLM raises a hybrid's block size until an attention page holds a GDN state page.
  EXPECT_EQ(j["block_size"]["value"], 544);
  EXPECT_EQ(j["block_size"]["raised_from"], 16);
  EXPECT_EQ(j["block_size"]["mamba_page_bytes"], 1097728);
  EXPECT_EQ(j["block_size"]["mamba_page_padded"], 544 * 2048);
  EXPECT_EQ(j["layout"]["value"], "LBNHC");
  EXPECT_EQ(j["layout"]["mixed_hnc_shapes"], true);
  EXPECT_EQ(j["kv_bytes_per_token"], 24576);
}

// Kimi-K2 (model_type kimi_k2) runs vLLM's DeepSeek MLA by its architecture; each MLA group
// shows its heads per rank, widths and softmax scale.
TEST_F(PlanCli, MlaGroupsShowTheirShapeAndSoftmaxScale) {
  const std::vector<std::string> args = {"--model", example("kimi_k2"), "--platform", "cuda:9.0",
                                         "--tensor-parallel-size", "8"};
  const auto r = plan(args, 0);
  EXPECT_THAT(r.out, HasSubstr("kimi_k2.json (kimi_k2, DeepseekV3ForCausalLM)"));
  EXPECT_THAT(r.out, HasSubstr("MLA:        layers 0-60: 8 heads per rank, latent 576 (512 + 64), q/k 192 (128 + 64), "
                               "v 128; softmax scale 0.13086079996 = 192^-0.5 x 1.3465736^2 (deepseek_yarn, factor 32, "
                               "mscale_all_dim 1)\n"));
  std::vector<std::string> explain = args;
  explain.push_back("--explain");
  EXPECT_THAT(plan(explain, 0).out, HasSubstr("    mla:        8 heads per rank, latent 576 (512 + 64)"));

  const json j = plan_json(args, 0);
  EXPECT_EQ(j["model"]["model_type"], "kimi_k2");
  EXPECT_EQ(j["model"]["architecture"], "DeepseekV3ForCausalLM");
  const json& mla = j["groups"][0]["mla"];
  EXPECT_EQ(mla["num_heads"], 8);
  EXPECT_EQ(mla["kv_lora_rank"], 512);
  EXPECT_EQ(mla["qk_rope_head_dim"], 64);
  EXPECT_EQ(mla["qk_nope_head_dim"], 128);
  EXPECT_EQ(mla["v_head_dim"], 128);
  EXPECT_EQ(mla["q_lora_rank"], 1536);
  EXPECT_EQ(mla["latent_size"], 576);
  EXPECT_EQ(mla["qk_head_size"], 192);
  EXPECT_EQ(mla["rope_type"], "deepseek_yarn");
  EXPECT_EQ(mla["rope_factor"], 32.0);
  EXPECT_EQ(mla["mscale_all_dim"], 1.0);
  EXPECT_NEAR(mla["softmax_scale"].get<double>(), 0.13086079996295005, 1e-12 * 0.13086079996295005);
  EXPECT_NEAR(mla["yarn_mscale"].get<double>(), 1.3465735902799727, 1e-15);

  // Other groups have none; a config without rope_scaling gets 192^-0.5.
  EXPECT_TRUE(plan_json({"--model", example("llama"), "--platform", "cuda:9.0"}, 0)["groups"][0]["mla"].is_null());
  const json v32 = plan_json({"--model", example("deepseek_v32"), "--platform", "cuda:9.0"}, 0);
  EXPECT_NEAR(v32["groups"][0]["mla"]["softmax_scale"].get<double>(), 0.1352337788608801, 1e-13);
  EXPECT_TRUE(v32["groups"][1]["mla"].is_null());  // the indexer
}

TEST_F(PlanCli, AHybridShowsTheRaisedBlockSizeAndThePaddedMambaPage) {
  const auto r = plan({"--model", example("jamba"), "--platform", "cuda:9.0"}, 0);
  EXPECT_THAT(r.out, HasSubstr("Block size: 80 (FLASH_ATTN.get_preferred_block_size(16); raised from 16 to hold a "
                               "Mamba state page)"));
  EXPECT_THAT(r.out, HasSubstr("Mamba page: 311,296 bytes per layer, padded to the attention page of 327,680"));
  const auto e = plan({"--model", example("jamba"), "--platform", "cuda:9.0", "--explain"}, 0);
  EXPECT_THAT(e.out, AllOf(HasSubstr("Raised from 16 so that one attention page holds a Mamba state page"),
                           HasSubstr("Note: Setting attention block size to 80 tokens to ensure that attention page "
                                     "size is >= mamba page size.")));
}

TEST_F(PlanCli, CompareMatrixAcrossPlatforms) {
  const auto r = plan({"--model", example("gemma3"), "--compare", "cuda:9.0,cuda:10.0,rocm:gfx942,cpu"}, 0);
  EXPECT_THAT(r.out, HasSubstr("Layers                            Kind            cuda:9.0           cuda:10.0"));
  EXPECT_THAT(r.out, HasSubstr("TRITON_FLASH_ATTN  TRITON_FLASHINFER"));
  EXPECT_THAT(r.out, HasSubstr("CPU_ATTN"));
  EXPECT_THAT(r.out, HasSubstr("block size"));
  const json j = plan_json({"--model", example("gemma3"), "--compare", "cuda:9.0,cpu"}, 0);
  ASSERT_EQ(j.at("platforms").size(), 2u);
  EXPECT_EQ(j["platforms"][1]["platform"], "cpu");
  EXPECT_EQ(j["platforms"][1]["plan"]["block_size"]["value"], 128);
}

TEST_F(PlanCli, CompareReportsAFailingPlatformAndExits3) {
  const auto r = plan({"--model", example("deepseek_v32"), "--compare", "cuda:9.0,cpu"}, 3);
  EXPECT_THAT(r.out, HasSubstr("\u2717 none valid"));
  EXPECT_THAT(r.out, HasSubstr("cpu: Sparse Attention is not supported on CPU."));
}

TEST_F(PlanCli, NoValidBackendExits3WithThePartialPlan) {
  const auto r = plan({"--model", example("deepseek_v32"), "--platform", "cpu"}, 3);
  EXPECT_THAT(r.out, HasSubstr("\u2717 none valid"));
  EXPECT_THAT(r.err, HasSubstr("attnsel: error: Sparse Attention is not supported on CPU."));
  const json j = plan_json({"--model", example("deepseek_v32"), "--platform", "cpu"}, 3);
  EXPECT_EQ(j["error"], "Sparse Attention is not supported on CPU.");
  EXPECT_EQ(j["error_type"], "NotImplementedError");
  EXPECT_EQ(j["plan"]["groups"][0]["error"], "Sparse Attention is not supported on CPU.");
}

TEST_F(PlanCli, BlockSizeNoGroupCanUseExits3AndSaysWhatWorks) {
  const auto r = plan({"--model", example("deepseek_v32"), "--platform", "cuda:10.0", "--tensor-parallel-size", "8"}, 3);
  EXPECT_THAT(r.err, AllOf(HasSubstr("No common block size for 32. "), HasSubstr("DEEPSEEK_V32_INDEXER"),
                           HasSubstr("pass --block-size 64")));
  plan({"--model", example("deepseek_v32"), "--platform", "cuda:10.0", "--tensor-parallel-size", "8", "--block-size",
        "64"},
       0);
}

TEST_F(PlanCli, EngineOptionsAsVllmSpellsThem) {
  const json j = plan_json({"--model", example("gemma2"), "--platform", "cuda:9.0", "--attention-config",
                            R"({"backend_per_kind": {"sliding_window": "triton_attn"}})", "--kv-cache-dtype", "fp8",
                            "--kv-transfer-config", R"({"kv_connector": "NixlConnector", "kv_role": "kv_both"})"},
                           0);
  EXPECT_EQ(j["groups"][0]["backend"], "TRITON_ATTN");
  EXPECT_EQ(j["groups"][0]["request_source"], "backend_per_kind[sliding_window]");
  EXPECT_EQ(j["groups"][1]["backend"], "FLASH_ATTN");
  EXPECT_EQ(j["kv_cache_dtype"], "fp8");
  EXPECT_EQ(j["groups"][0]["config"]["use_kv_connector"], true);
  EXPECT_EQ(j["layout"]["decided_by"], "connector");
}

TEST_F(PlanCli, BadInputExits2NamingTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--model", "/no/such/config.json"}, "no such file or folder"},
      {{"--model", example("llama"), "--tensor-parallel-size", "3"},
       "field 'num_attention_heads': Total number of attention heads (32) must be divisible by tensor parallel size "
       "(3)."},
      {{"--attention-backend", "FLASH_ATTN", "--attention-config", R"({"backend": "TRITON_ATTN"})"},
       "attention_backend and attention_config.backend are mutually exclusive"},
      {{"--attention-config", R"({"backend_per_kind": {"sliding": "TRITON_ATTN"}})"},
       "Unknown KV cache group kind 'sliding' in backend_per_kind."},
      {{"--attention-config", "{not json"}, "--attention-config: malformed JSON"},
      {{"--kv-cache-dtype", "fp4"}, "--kv-cache-dtype 'fp4' is not a cache dtype; valid values are: auto, "},
      {{"--kv-cache-layout", "NHC"}, "Unknown KV cache layout 'NHC'."},
      {{"--kv-transfer-config", R"({"kv_connector": "NixlConnector"})"}, "Please specify kv_disagg_role"},
      {{"--dtype", "int8"}, "--dtype: invalid choice 'int8'"},
      {{"--platform", "tpu"}, "tpu"},
      {{"--compare", "cuda:9.0,gpu"}, "gpu"},
      {{"--fact", "flash_attn_version"}, "--fact expects NAME=VALUE"},
      {{"--model", example("kimi_k2"), "--tensor-parallel-size", "3"},
       "kimi_k2.json: field 'num_attention_heads': Total number of attention heads (64) must be divisible by tensor "
       "parallel size (3)."},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    if (std::find(args.begin(), args.end(), "--platform") == args.end() &&
        std::find(args.begin(), args.end(), "--compare") == args.end()) {
      args.push_back("--platform");
      args.push_back("cuda:9.0");
    }
    const auto r = plan(args, 2);
    EXPECT_THAT(r.err, HasSubstr(c.message)) << args.front();
  }
  // A bad config file names the file and the field.
  const auto r = plan({"--model", example("gemma2") + ".missing"}, 2);
  EXPECT_THAT(r.err, HasSubstr("gemma2.json.missing"));
}

TEST_F(PlanCli, HelpDocumentsEveryOption) {
  const auto r = plan({"--help"}, 0);
  for (const char* flag :
       {"--model", "--platform", "--fact", "--mode", "--attention-backend", "--attention-config", "--kv-cache-dtype",
        "--block-size", "--dtype", "--tensor-parallel-size", "--decode-context-parallel-size",
        "--prefill-context-parallel-size", "--kv-transfer-config", "--kv-cache-layout", "--explain", "--compare",
        "--json"})
    EXPECT_THAT(r.out, HasSubstr(flag));
}

}  // namespace
}  // namespace attnsel
