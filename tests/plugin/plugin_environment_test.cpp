// ATTNSEL_PLUGINS reaches every library user: a program that links libattnsel.so and never
// calls a registration function gets the plugins at the registry's first use, through the
// C++ API and the C API alike; entries that fail are warnings and never stop the program.
#include "cli/cli_process.hpp"
#include "plugin_test_support.hpp"

namespace attnsel::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kUser = ATTNSEL_PLUGIN_ENV_USER;
const std::string kRegisterAsClassLine = kRegisterAsClass + "\n";  // as the program prints it
const std::string kBuiltinCpuAttn = "attnsel::backends::CPUAttentionBackend\n";

test::CliResult run_user(const std::string& api, const std::string& plugins) {
  std::vector<std::string> env{"ATTNSEL_LOG_LEVEL=warn"};
  env.push_back(plugins.empty() ? "ATTNSEL_PLUGINS=" : "ATTNSEL_PLUGINS=" + plugins);
  return test::run_program(kUser, {api}, env);
}

class PluginEnvironment : public ::testing::TestWithParam<std::string> {};

TEST_P(PluginEnvironment, WithoutPluginsTheBuiltinClassServes) {
  const test::CliResult r = run_user(GetParam(), "");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kBuiltinCpuAttn);
  EXPECT_EQ(r.err, "");
}

TEST_P(PluginEnvironment, AUserWhoNeverRegistersGetsThePlugin) {
  const test::CliResult r = run_user(GetParam(), kRegisterAs);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kRegisterAsClassLine);
  EXPECT_EQ(r.err, "");
}

TEST_P(PluginEnvironment, BrokenEntriesAreWarningsAndTheOthersStillLoad) {
  const std::string missing = "/nonexistent/dir/libmissing.so";
  const std::string list =
      missing + "," + kNotALibrary + "," + qualified(kPluginC, "init_major_mismatch") + "," + kRegisterAs;
  const test::CliResult r = run_user(GetParam(), list);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kRegisterAsClassLine);
  EXPECT_THAT(r.err, HasSubstr("ATTNSEL_PLUGINS entry '" + missing + "': plugin library '" + missing +
                               "' does not exist"));
  EXPECT_THAT(r.err, HasSubstr("ATTNSEL_PLUGINS entry '" + kNotALibrary + "'"));
  EXPECT_THAT(r.err, HasSubstr("built for plugin ABI 2.0, but this attnsel provides plugin ABI 1.0"));
}

TEST_P(PluginEnvironment, OnlyBrokenEntriesLeaveTheBuiltinsWorking) {
  const test::CliResult r = run_user(GetParam(), "/nonexistent/libz.so:not-a-symbol,,libnothing_here.so");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kBuiltinCpuAttn);
  EXPECT_THAT(r.err, HasSubstr("ATTNSEL_PLUGINS entry '/nonexistent/libz.so:not-a-symbol'"));
  EXPECT_THAT(r.err, HasSubstr("ATTNSEL_PLUGINS entry 'libnothing_here.so'"));
  EXPECT_THAT(r.err, Not(HasSubstr("error: ")));
}

INSTANTIATE_TEST_SUITE_P(Api, PluginEnvironment, ::testing::Values("cxx", "c"));

}  // namespace
}  // namespace attnsel::testing
