// `attnsel select` and the table's selector flags: --list-flags prints the C API's list (JSON)
// and the docs' table (Markdown), and every flag of the table is an option that reaches the
// selection.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "attnsel/attnsel.h"
#include "attnsel/capability_checks.hpp"
#include "cli/cli_process.hpp"

namespace attnsel {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using test::run_attnsel;

class SelectorFlagsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  }
};

TEST_F(SelectorFlagsCli, ListFlagsJsonIsTheCApisList) {
  const test::CliResult r = run_attnsel({"select", "--list-flags", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  char* text = nullptr;
  ASSERT_EQ(attnsel_list_selector_flags(&text), ATTNSEL_STATUS_OK);
  const json capi = json::parse(text);
  attnsel_free_string(text);
  EXPECT_EQ(json::parse(r.out), capi);
}

TEST_F(SelectorFlagsCli, ListFlagsMarkdownHasOneRowPerFlag) {
  const test::CliResult r = run_attnsel({"select", "--list-flags", "--markdown"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const CapabilityCheck* flag : selector_flags())
    EXPECT_THAT(r.out, HasSubstr("| `" + std::string(flag->flag) + "` | `" + std::string(flag->cli_flag) + "` |"));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), static_cast<long>(selector_flags().size()) + 2);
  EXPECT_EQ(run_attnsel({"select", "--markdown"}).exit_code, 2);  // only with --list-flags
}

TEST_F(SelectorFlagsCli, EveryFlagIsAnOptionThatReachesTheConfig) {
  std::vector<std::string> args{"select", "--json", "--platform", "cuda:9.0"};
  for (const CapabilityCheck* flag : selector_flags()) args.emplace_back(flag->cli_flag);
  const test::CliResult r = run_attnsel(args);
  ASSERT_FALSE(r.out.empty()) << r.err;  // a failed selection prints its failure object, config included
  const json config = json::parse(r.out).at("config");
  for (const CapabilityCheck* flag : selector_flags()) EXPECT_EQ(config.at(std::string(flag->flag)), true) << flag->flag;
}

}  // namespace
}  // namespace attnsel
