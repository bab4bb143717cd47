// What a user reads for everyday mistakes and results: counts that must be positive, an
// unknown ROCm architecture, and the thread count of the measured ceilings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/cli_process.hpp"

namespace attnsel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using test::run_attnsel;

class UserMessagesCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  }
};

TEST_F(UserMessagesCli, ANonPositiveCountSaysItMustBeAPositiveInteger) {
  const std::vector<std::vector<std::string>> commands = {
      {"select", "--platform", "cuda:9.0", "--head-size", "0"},
      {"select", "--platform", "cuda:9.0", "--block-size", "-16"},
      {"bench", "--block-size", "0"},
      {"run", "--batch", "0"},
      // Options that CLI11's PositiveNumber once checked, printing its floating-point range.
      {"bench", "--context", "5", "--batch", "0"},
      {"run", "--dcp", "0"},
      {"run", "--cp-kv-cache-interleave-size", "0"},
      {"plan", "--cp-kv-cache-interleave-size", "0"},
      {"plan", "--max-model-len", "0"},
  };
  for (const auto& args : commands) {
    const test::CliResult r = run_attnsel(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args[args.size() - 2] << "\n" << r.err;
    EXPECT_THAT(r.err, AllOf(HasSubstr(args[args.size() - 2]),
                             HasSubstr("must be a positive integer, got " + args.back()), Not(HasSubstr("range"))));
  }
}

TEST_F(UserMessagesCli, AnUnknownRocmArchitectureNamesTheKnownOnes) {
  const test::CliResult r = run_attnsel({"select", "--platform", "rocm:gfx999"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.err, AllOf(HasSubstr("unknown ROCm architecture gfx999"), HasSubstr("gfx90a"), HasSubstr("gfx942"),
                           HasSubstr("gfx950"), HasSubstr("gfx1100")));
  EXPECT_EQ(run_attnsel({"select", "--platform", "rocm:gfx950"}).exit_code, 0);
}

TEST_F(UserMessagesCli, OneThreadIsNotPlural) {
  const test::CliResult r = run_attnsel(
      {"bench", "--scale", "0.01", "--repeats", "1", "--case", "decode-long"}, {"OMP_NUM_THREADS=1", "OMP_DYNAMIC=false"});
  if (r.out.find("Ceilings:  read") == std::string::npos) GTEST_SKIP() << "this host benchmarks on a GPU: " << r.out;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("(1 thread, measured now)"), Not(HasSubstr("1 threads"))));
}

}  // namespace
}  // namespace attnsel
