// `attnsel list`, run as a process, and the backend report it is built from (called
// in-process for dynamic members, which a fresh process does not have).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>

#include "attnsel/platform.hpp"
#include "attnsel/registry.hpp"
#include "backend_report.hpp"
#include "cli/cli_process.hpp"
#include "priority_report.hpp"

namespace attnsel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test::run_attnsel;
using json = nlohmann::json;

class ListCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  }
  json list_json(std::vector<std::string> args) {
    args.insert(args.begin(), {"list", "--json"});
    const auto r = run_attnsel(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out);
  }
  static const json& backend(const json& listing, std::string_view enum_name, std::string_view name) {
    for (const json& b : listing.at("backends"))
      if (b.at("enum") == enum_name && b.at("name") == name) return b;
    static const json none = json::object();
    ADD_FAILURE() << "no backend " << enum_name << "." << name;
    return none;
  }
};

TEST_F(ListCli, JsonContainsEveryMemberOfBothEnumsInOrder) {
  const json j = list_json({"--platform", "cuda:9.0"});
  EXPECT_EQ(j.at("platform"), "cuda:9.0");
  std::vector<std::string> expected, got;
  for (const BackendEnum* e : {&AttentionBackendEnum, &MambaAttentionBackendEnum})
    for (const BackendMember& m : e->members()) expected.push_back(m.str());
  for (const json& b : j.at("backends")) got.push_back(b.at("enum").get<std::string>() + "." + b.at("name").get<std::string>());
  EXPECT_EQ(got, expected);
  // Spot checks that the new and model-driven members are there.
  for (const char* name : {"ULTRAQUANT", "TRITON_FLASHINFER", "TRITON_FLASH_ATTN", "FLASHMLA_SPARSE_DSV41", "CUSTOM"})
    EXPECT_EQ(backend(j, "AttentionBackendEnum", name).at("name"), name);
}

TEST_F(ListCli, JsonGivesEachMembersClassOrWhyItHasNone) {
  const json j = list_json({"--platform", "cuda:9.0"});
  for (const BackendEnum* e : {&AttentionBackendEnum, &MambaAttentionBackendEnum}) {
    for (const BackendMember& m : e->members()) {
      const json& b = backend(j, enum_class_name(e->kind()), m.name());
      EXPECT_EQ(b.at("overridden"), false);
      std::string path;
      try {
        path = m.get_path();
      } catch (const Error&) {
      }
      if (path.empty())
        EXPECT_TRUE(b.at("class").is_null()) << m.name();
      else
        EXPECT_EQ(b.at("class"), path) << m.name();
    }
  }
  const json& custom = backend(j, "AttentionBackendEnum", "CUSTOM");
  EXPECT_THAT(custom.at("error").get<std::string>(),
              HasSubstr("Backend CUSTOM must be registered before use. Use register_backend(Backend.CUSTOM, "
                        "'your.module.YourClass')"));
  EXPECT_TRUE(custom.at("capabilities").is_null());
}

TEST_F(ListCli, JsonCapabilitiesComeFromTheBackendOnThatPlatform) {
  const json j = list_json({"--platform", "cuda:9.0"});
  const json& fa = backend(j, "AttentionBackendEnum", "FLASH_ATTN");
  ASSERT_TRUE(fa.at("capabilities").is_object()) << fa.dump();
  const json& c = fa.at("capabilities");
  EXPECT_EQ(c.at("dtypes"), (json{"float16", "bfloat16"}));
  EXPECT_EQ(c.at("kernel_block_sizes"), (json{"MultipleOf(16)"}));
  EXPECT_EQ(c.at("attn_types"), (json{"decoder", "encoder", "encoder_only", "encoder_decoder"}));
  EXPECT_EQ(c.at("compute_capability"), true);
  EXPECT_EQ(c.at("features").at("mla"), false);
  EXPECT_EQ(c.at("features").at("sliding_window"), true);
  const json& flashmla = backend(j, "AttentionBackendEnum", "FLASHMLA").at("capabilities");
  ASSERT_TRUE(flashmla.is_object());
  EXPECT_EQ(flashmla.at("features").at("mla"), true);
  EXPECT_EQ(flashmla.at("kernel_block_sizes"), (json{"64"}));
  // Compute capability is answered for the chosen platform: FLASH_ATTN_MLA is SM 9.x only.
  const json blackwell = list_json({"--platform", "cuda:10.0"});
  EXPECT_EQ(backend(j, "AttentionBackendEnum", "FLASH_ATTN_MLA").at("capabilities").at("compute_capability"), true);
  EXPECT_EQ(backend(blackwell, "AttentionBackendEnum", "FLASH_ATTN_MLA").at("capabilities").at("compute_capability"),
            false);
}

TEST_F(ListCli, JsonReportsWhetherThisBuildCanRunEachBackend) {
  const json j = list_json({"--platform", "cpu"});
  for (const BackendMember& m : AttentionBackendEnum.members()) {
    std::shared_ptr<const AttentionBackend> cls;
    try {
      cls = m.get_attention_class();
    } catch (const Error&) {
      continue;
    }
    EXPECT_EQ(backend(j, "AttentionBackendEnum", m.name()).at("has_kernel"), cls->has_kernel()) << m.name();
  }
}

TEST_F(ListCli, ReadableListingHasBothEnums) {
  const auto r = run_attnsel({"list", "--platform", "rocm:gfx942"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Backends registered, with their capabilities on rocm:gfx942 (simulated, reference "
                               "mode):"));
  EXPECT_THAT(r.out, HasSubstr("\nAttentionBackendEnum:\n  FLASH_ATTN  attnsel::backends::FlashAttentionBackend"));
  EXPECT_THAT(r.out, HasSubstr("\nMambaAttentionBackendEnum:\n  MAMBA1  "));
  EXPECT_THAT(r.out, HasSubstr("CUSTOM  (no class)\n      unavailable: ValueError: Backend CUSTOM must be registered"));
}

TEST_F(ListCli, MarkdownIsOneTablePerEnum) {
  const auto r = run_attnsel({"list", "--platform", "cuda:9.0", "--markdown"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("## `cuda:9.0`\n\n| Backend | Class | dtypes |"));
  EXPECT_THAT(r.out, HasSubstr("\n| FLASH_ATTN | `attnsel::backends::FlashAttentionBackend` | float16, bfloat16 |"));
  EXPECT_THAT(r.out, HasSubstr("| Mamba backend | Class | batch invariance |"));
}

TEST_F(ListCli, PrioritiesFollowTheSeedsCudaLists) {
  const auto r = run_attnsel({"list", "--platform", "cuda:9.0", "--priorities", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const json& dense = j.at("configurations").at(0);
  EXPECT_EQ(dense.at("configuration"), "dense decoder, head 128, bfloat16");
  EXPECT_EQ(dense.at("priorities"),
            (json{"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"}));
  EXPECT_EQ(dense.at("chosen"), "FLASH_ATTN");
  const json& mla = j.at("configurations").at(5);
  EXPECT_EQ(mla.at("configuration"), "MLA, head 576");
  EXPECT_EQ(mla.at("priorities"), (json{"FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA",
                                        "FLASH_ATTN_MLA_SPARSE", "FLASHMLA_SPARSE"}));
}

// --- the report itself, in-process -----------------------------------------------------

class TestOnlyBackend final : public AttentionBackend {
 public:
  std::string get_name() const override { return "CLI_TEST_BACKEND"; }
  std::string qualname() const override { return "attnsel_test::CliTestBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c;
    c.head_sizes = {64, 96};
    c.sink = true;
    return c;
  }
};

class BackendReportTest : public ::testing::Test {
 protected:
  void TearDown() override { reset_registry_for_testing(); }
};

TEST_F(BackendReportTest, ListsDynamicMembersAndOverrides) {
  register_backend_class<TestOnlyBackend>("CLI_TEST_BACKEND");
  register_backend(AttentionBackendEnum["CUSTOM"], "attnsel_test::CliTestBackend");
  const auto platform = make_platform("cuda:9.0");
  const auto reports = cli::report_backends(*platform);
  std::set<std::string> overridden;
  const cli::BackendReport* dynamic = nullptr;
  for (const cli::BackendReport& r : reports) {
    if (r.overridden) overridden.insert(r.name);
    if (r.name == "CLI_TEST_BACKEND") dynamic = &r;
  }
  ASSERT_NE(dynamic, nullptr);
  EXPECT_EQ(dynamic->class_path, "attnsel_test::CliTestBackend");
  ASSERT_TRUE(dynamic->capabilities.has_value());
  EXPECT_EQ(dynamic->capabilities->head_sizes, "64, 96");
  EXPECT_EQ(overridden, (std::set<std::string>{"CLI_TEST_BACKEND", "CUSTOM"}));
  const auto j = cli::to_json(*dynamic);
  EXPECT_EQ(j.at("capabilities").at("features").at("sink"), true);
  EXPECT_EQ(j.at("capabilities").at("features").at("mla"), false);
}

TEST_F(BackendReportTest, AClassThatCannotBeResolvedIsReportedNotFatal) {
  register_backend("CLI_MISSING_BACKEND", "attnsel_test::NotThere");
  const auto platform = make_platform("cpu");
  for (const cli::BackendReport& r : cli::report_backends(*platform)) {
    if (r.name != "CLI_MISSING_BACKEND") continue;
    EXPECT_THAT(r.error, HasSubstr("ImportError: "));
    EXPECT_THAT(r.error, HasSubstr("attnsel_test::NotThere"));
    EXPECT_FALSE(r.capabilities.has_value());
    return;
  }
  FAIL() << "the dynamic member is missing";
}

class HeadSizeRuleBackend final : public AttentionBackend {
 public:
  std::string get_name() const override { return "RULE"; }
  std::string qualname() const override { return "attnsel_test::Rule"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override {
    BackendCapabilities c;
    c.head_size_rule = [](int h) { return h % 8 == 0 && h <= 256; };
    return c;
  }
};

TEST_F(BackendReportTest, HeadSizeRulesAreSummarisedFromTheRuleItself) {
  register_backend_class<HeadSizeRuleBackend>("CLI_RULE_BACKEND");
  const auto platform = make_platform("cpu");
  for (const cli::BackendReport& r : cli::report_backends(*platform))
    if (r.name == "CLI_RULE_BACKEND") {
      ASSERT_TRUE(r.capabilities.has_value());
      EXPECT_EQ(r.capabilities->head_sizes, "multiples of 8 up to 256");
    }
}

}  // namespace
}  // namespace attnsel
