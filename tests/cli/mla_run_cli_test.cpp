// `attnsel run --model` for MLA models (DeepSeek-V2/V3, Kimi-K2) on this host, end to end at
// a small scale (one rank of TP 8 or 16, a short context): every MLA layer runs prefill and
// decode through its step plans, the outputs pass the check against the un-absorbed
// reference (fp8 caches too), --json shows each layer's softmax scale, and bad input names
// the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "cli/cli_process.hpp"

namespace attnsel {
namespace {

using ::testing::HasSubstr;
using test::run_attnsel;

std::string model_path(const std::string& name) {
  return std::string(ATTNSEL_SOURCE_DIR) + "/examples/models/" + name + ".json";
}

// One thread: the check, not the speed, is what these runs test, and a loaded host's
// OpenMP barriers would dominate their time.
const std::vector<std::string> kEnv{"OMP_NUM_THREADS=1", "OMP_DYNAMIC=false"};

nlohmann::json run_small(const std::string& model, const std::string& tp, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"run",     "--model",        model_path(model), "--tensor-parallel-size", tp,
                                "--batch", "2",              "--context",       "16",
                                "--decode-steps", "3",       "--no-progress",   "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const test::CliResult r = run_attnsel(args, kEnv);
  EXPECT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
  return nlohmann::json::parse(r.out);
}

void expect_ran_and_passed(const nlohmann::json& j, int layers, int heads) {
  EXPECT_EQ(j.at("backend"), "CPU_MLA");
  EXPECT_TRUE(j.at("model").at("mla").get<bool>());
  EXPECT_EQ(j.at("model").at("num_layers"), layers);
  EXPECT_EQ(j.at("model").at("num_heads"), heads);
  EXPECT_EQ(j.at("layers").size(), static_cast<std::size_t>(layers));
  const double scale = j.at("model").at("softmax_scale").get<double>();
  for (const nlohmann::json& l : j.at("layers")) EXPECT_DOUBLE_EQ(l.at("softmax_scale").get<double>(), scale);
  EXPECT_GT(j.at("prefill").at("tokens").get<double>(), 0.0);
  EXPECT_EQ(j.at("decode").at("steps"), 2);  // the first of three is the warm-up
  EXPECT_GT(j.at("decode").at("gflop_per_s").get<double>(), 0.0);
  EXPECT_GT(j.at("decode").at("gb_per_s").get<double>(), 0.0);
  EXPECT_GT(j.at("check").at("prefill").at("samples").get<int>(), 0);
  EXPECT_GT(j.at("check").at("decode").at("samples").get<int>(), 0);
  EXPECT_TRUE(j.at("check").at("passed").get<bool>()) << j.at("check").dump();
}

TEST(MlaRunCli, DeepSeekV3RunsEveryLayerAndReportsFractionsOfTheCeilings) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  const nlohmann::json j = run_small("deepseek_v3", "16");
  expect_ran_and_passed(j, 61, 8);
  // yarn: 192^-0.5 · (0.1 · 1 · ln 40 + 1)²
  EXPECT_NEAR(j.at("model").at("softmax_scale").get<double>(), 0.1352337789, 1e-9);
  EXPECT_GT(j.at("ceilings").at("read_gb_per_s").get<double>(), 0.0);
  EXPECT_GT(j.at("fractions").at("decode_of_read_bandwidth").get<double>(), 0.0);
  EXPECT_GT(j.at("fractions").at("prefill_of_peak").get<double>(), 0.0);
}

TEST(MlaRunCli, DeepSeekV2Runs) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  expect_ran_and_passed(run_small("deepseek_v2", "16", {"--no-ceilings"}), 27, 1);
}

TEST(MlaRunCli, KimiK2RunsWithAnFp8Cache) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  const nlohmann::json j = run_small("kimi_k2", "8", {"--no-ceilings", "--kv-cache-dtype", "fp8"});
  expect_ran_and_passed(j, 61, 8);
  EXPECT_EQ(j.at("model").at("kv_cache_dtype"), "fp8");
  EXPECT_LT(j.at("model").at("k_scale").get<double>(), 1.0);
}

TEST(MlaRunCli, HeadsThatDoNotDivideByTheTensorParallelSizeNameTheField) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  const test::CliResult r =
      run_attnsel({"run", "--model", model_path("deepseek_v3"), "--tensor-parallel-size", "3", "--no-ceilings"}, kEnv);
  EXPECT_EQ(r.exit_code, 2) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_THAT(r.err, HasSubstr("num_attention_heads"));
  EXPECT_THAT(r.err, HasSubstr("3"));
}

// kv_lora_rank makes a DeepSeek config MLA (vLLM's rule); the widths MLA then needs must be
// there, as integers in range. A sparse config (index_topk) needs kv_lora_rank itself.
TEST(MlaRunCli, AnMlaConfigWithAMissingOrInconsistentWidthNamesTheField) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  struct Case {
    std::string model, field;
    nlohmann::json value;  // null: the field is removed
    std::string expected;
  };
  const std::vector<Case> cases{
      {"deepseek_v3", "qk_rope_head_dim", nullptr, "qk_rope_head_dim"},
      {"deepseek_v3", "v_head_dim", 0, "v_head_dim"},
      {"deepseek_v3", "qk_nope_head_dim", "128", "qk_nope_head_dim"},
      {"deepseek_v3", "kv_lora_rank", 0, "field 'kv_lora_rank': expected an integer from 1"},
      {"deepseek_v3", "kv_lora_rank", "512", "field 'kv_lora_rank': expected an integer from 1"},
      {"kimi_k2", "num_attention_heads", nullptr, "num_attention_heads"},
      {"deepseek_v32", "kv_lora_rank", nullptr, "missing field 'kv_lora_rank'"}};
  for (const Case& c : cases) {
    const std::string what = c.model + " " + c.field + " = " + c.value.dump();
    std::ifstream in(model_path(c.model));
    nlohmann::json config = nlohmann::json::parse(in);
    if (c.value.is_null())
      config.erase(c.field);
    else
      config[c.field] = c.value;
    const std::string path = ::testing::TempDir() + "mla_run_bad_" + c.model + "_" + c.field + ".json";
    std::ofstream(path) << config.dump();
    const test::CliResult r = run_attnsel({"run", "--model", path, "--no-ceilings"}, kEnv);
    EXPECT_EQ(r.exit_code, 2) << what << "\nstdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.expected)) << what;
    EXPECT_EQ(r.out, "") << what;  // refused before anything ran
  }
}

}  // namespace
}  // namespace attnsel
