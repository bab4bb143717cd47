// `attnsel --plugin` and ATTNSEL_PLUGINS, run as a process.
#include <nlohmann/json.hpp>

#include "cli/cli_process.hpp"
#include "plugin_test_support.hpp"

namespace attnsel::testing {
namespace {

using ::testing::HasSubstr;
using test::run_attnsel;

class PluginCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  }
  static nlohmann::json parse(const test::CliResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    try {
      return nlohmann::json::parse(r.out);
    } catch (const nlohmann::json::exception& e) {
      ADD_FAILURE() << "not JSON: " << r.out << r.err;
      return nlohmann::json::object();
    }
  }
};

TEST_F(PluginCli, FlagAfterTheSubcommandOverridesCpuAttn) {
  const auto j = parse(run_attnsel({"select", "--json", "--plugin", kRegisterAs, "--platform", "cpu", "--mode", "reference"}));
  EXPECT_EQ(j["backend"], "CPU_ATTN");
  EXPECT_EQ(j["class"], kRegisterAsClass);
}

TEST_F(PluginCli, RepeatedFlagBeforeTheSubcommand) {
  const auto j = parse(run_attnsel({"--plugin", kPluginC, "--plugin", kRegisterAs, "select", "--json", "--platform",
                                    "cuda:9.0", "--attention-backend", "c_reg_new"}));
  EXPECT_EQ(j["backend"], "C_REG_NEW");
  EXPECT_EQ(j["class"], kRegisterAsClass);
}

TEST_F(PluginCli, PluginThatFailsToLoadIsAUsageErrorWithTheReason) {
  const test::CliResult r = run_attnsel({"select", "--plugin", qualified(kPluginC, "init_major_mismatch")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("built for plugin ABI 2.0, but this attnsel provides plugin ABI 1.0"));
  const test::CliResult missing = run_attnsel({"list", "--plugin", "/nonexistent/libnope.so"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("plugin library '/nonexistent/libnope.so' does not exist"));
}

TEST_F(PluginCli, EnvironmentPluginsLoadAtStartUpAndFailuresOnlyWarn) {
  const test::CliResult r =
      run_attnsel({"select", "--json", "--platform", "cpu", "--mode", "reference"},
                  {"ATTNSEL_PLUGINS=" + kRegisterAs + ",/nonexistent/libz.so", "ATTNSEL_LOG_LEVEL=warn"});
  EXPECT_EQ(parse(r)["class"], kRegisterAsClass);
  EXPECT_THAT(r.err, HasSubstr("ATTNSEL_PLUGINS entry '/nonexistent/libz.so': plugin library '/nonexistent/libz.so' "
                               "does not exist"));
}

TEST_F(PluginCli, RunExecutesThePluginKernelAndChecksItAgainstTheReference) {
  const auto j = parse(run_attnsel({"run", "--json", "--plugin", std::string(ATTNSEL_EXAMPLE_PLUGIN) + ":attnsel_example_as_cpu_attn",
                                    "--platform", "cpu", "--mode", "runnable", "--num-heads", "4", "--num-kv-heads", "2",
                                    "--head-size", "32", "--num-layers", "1", "--batch", "2", "--context", "40",
                                    "--decode-steps", "2", "--no-ceilings", "--no-progress"}));
  EXPECT_EQ(j["backend"], "CPU_ATTN");
  EXPECT_EQ(j["class"], file_name(ATTNSEL_EXAMPLE_PLUGIN) + ":attnsel_example_as_cpu_attn");
  EXPECT_EQ(j["isa"], "-");  // not the built-in kernel's
  EXPECT_EQ(j["check"]["passed"], true);
  EXPECT_GT(j["check"]["prefill"]["tokens"].get<int>(), 0);
  EXPECT_GT(j["check"]["decode"]["tokens"].get<int>(), 0);
}

}  // namespace
}  // namespace attnsel::testing
