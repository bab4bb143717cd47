// `attnsel bench` and `attnsel run` on this host, end to end, at a tiny scale: the
// block-size option reaches the workload, the result is checked against the reference, a
// shape of one's own, the step plan's figures, and bad values (and runs too large for the
// machine) are usage errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_process.hpp"

namespace attnsel {
namespace {

using ::testing::HasSubstr;
using test::run_attnsel;

TEST(BenchCli, BlockSizeReachesTheWorkloadAndTheResultIsChecked) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  const test::CliResult r = run_attnsel({"bench", "--scale", "0.01", "--repeats", "1", "--case", "decode-long",
                                         "--block-size", "32", "--json"},
                                        {"OMP_DYNAMIC=false"});
  ASSERT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("results").size(), 1u);
  const nlohmann::json& res = j.at("results")[0];
  EXPECT_EQ(res.at("case"), "decode-long");
  EXPECT_THAT(res.at("shape").get<std::string>(), HasSubstr("block 32"));
  EXPECT_TRUE(res.at("check_passed").get<bool>());
  EXPECT_GT(res.at("figure").get<double>(), 0.0);
}

TEST(BenchCli, ABlockSizeOfZeroIsAUsageError) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  const test::CliResult r = run_attnsel({"bench", "--block-size", "0"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--block-size"));
}

TEST(BenchCli, ADecodeCaseOfAGivenShape) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  const test::CliResult r =
      run_attnsel({"bench", "--batch", "3", "--context", "200", "--repeats", "1", "--json"}, {"OMP_DYNAMIC=false"});
  ASSERT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("results").size(), 1u);
  EXPECT_EQ(j.at("results")[0].at("case"), "decode-shape");
  EXPECT_THAT(j.at("results")[0].at("shape").get<std::string>(), HasSubstr("3 × 200 tokens"));
  const test::CliResult half = run_attnsel({"bench", "--batch", "3"});
  EXPECT_EQ(half.exit_code, 2) << half.err;
  EXPECT_THAT(half.err, HasSubstr("--batch and --context go together"));
}

TEST(BenchCli, AnFp8ShapeIsTimedAgainstTheSameShapeOnA16BitCache) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  const test::CliResult r = run_attnsel(
      {"bench", "--batch", "2", "--context", "300", "--kv-cache-dtype", "fp8", "--repeats", "1", "--json"},
      {"OMP_DYNAMIC=false"});
  ASSERT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("results").size(), 1u);
  const nlohmann::json& res = j.at("results")[0];
  EXPECT_EQ(res.at("case"), "decode-shape");
  EXPECT_THAT(res.at("shape").get<std::string>(), HasSubstr("2 × 300 tokens"));
  EXPECT_THAT(res.at("shape").get<std::string>(), HasSubstr("fp8"));
  EXPECT_EQ(res.at("anchor_kv_cache_dtype"), "auto");
  EXPECT_GT(res.at("anchor_seconds").get<double>(), 0.0);
  EXPECT_NEAR(res.at("time_vs_anchor").get<double>(),
              res.at("seconds").get<double>() / res.at("anchor_seconds").get<double>(), 1e-9);
  EXPECT_EQ(res.at("ceiling_name"), "read bandwidth");
  EXPECT_GT(res.at("pct_of_ceiling").get<double>(), 0.0);
  EXPECT_TRUE(res.at("check_passed").get<bool>());
}

TEST(RunCli, ReportsThePlanAndTheHostTimePerLayer) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  const test::CliResult r = run_attnsel({"run", "--num-layers", "3", "--batch", "2", "--context", "40",
                                         "--decode-steps", "3", "--no-ceilings", "--json"},
                                        {"OMP_DYNAMIC=false"});
  ASSERT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& d = j.at("decode");
  EXPECT_EQ(d.at("steps"), 2);  // the first of the three is the warm-up, reported apart
  EXPECT_EQ(j.at("decode_warmup").at("steps"), 1);
  EXPECT_GT(j.at("decode_warmup").at("seconds").get<double>(), 0.0);
  EXPECT_GT(d.at("plan_us_per_step").get<double>(), 0.0);
  EXPECT_GT(d.at("host_us_per_layer").get<double>(), 0.0);
  EXPECT_GT(d.at("layer_us").get<double>(), 0.0);
  EXPECT_EQ(j.at("kernel").at("graph_support"), "never");
  EXPECT_TRUE(j.at("check").at("passed").get<bool>());
}

TEST(RunCli, MemoryIsCheckedBeforeItIsTaken) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  // 1000 sequences × 100k tokens: ~400 GB of KV cache. Nothing is allocated; exit 2.
  const test::CliResult r = run_attnsel(
      {"run", "--num-layers", "1000000", "--context", "100000", "--batch", "1000", "--no-ceilings", "--json"});
  EXPECT_EQ(r.exit_code, 2) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_THAT(r.err, HasSubstr("this run needs"));
  EXPECT_THAT(r.err, HasSubstr("GiB"));
  EXPECT_THAT(r.err, HasSubstr("available"));
  EXPECT_THAT(r.err, HasSubstr("lower --batch or --context"));
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("error_type"), "MemoryError");
}

TEST(RunCli, CudaGraphsNeedAKernelThatCanBeCaptured) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  const test::CliResult r = run_attnsel({"run", "--attention-backend", "CPU_ATTN", "--cuda-graphs", "--num-layers",
                                         "1", "--batch", "1", "--context", "16", "--decode-steps", "1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--cuda-graphs"));
  EXPECT_THAT(r.err, HasSubstr("never"));
}

}  // namespace
}  // namespace attnsel
