// `attnsel bench` on this host, end to end, at a tiny scale: the block-size option reaches
// the workload, the result is checked against the reference, and bad values are usage errors.
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

}  // namespace
}  // namespace attnsel
