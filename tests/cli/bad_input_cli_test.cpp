// Bad command lines: every one exits 2 with a message that names the problem and the valid
// values, and never crashes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attnsel/registry.hpp"
#include "attnsel/types.hpp"
#include "cli/cli_process.hpp"

namespace attnsel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using test::kUsage;
using test::run_attnsel;

class BadInputCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  }
  // Runs `attnsel select --platform cuda:9.0 args...` and expects a usage error.
  test::CliResult select_usage_error(std::vector<std::string> args) {
    args.insert(args.begin(), {"select", "--platform", "cuda:9.0"});
    test::CliResult r = run_attnsel(args);
    EXPECT_EQ(r.exit_code, kUsage) << "stdout: " << r.out << "\nstderr: " << r.err;
    return r;
  }
};

TEST_F(BadInputCli, UnknownFlagIsAUsageError) {
  auto r = select_usage_error({"--no-such-flag"});
  EXPECT_THAT(r.err, HasSubstr("--no-such-flag"));
}

TEST_F(BadInputCli, MissingSubcommandIsAUsageError) {
  auto r = run_attnsel({});
  EXPECT_EQ(r.exit_code, kUsage);
  EXPECT_THAT(r.err, HasSubstr("subcommand"));
}

TEST_F(BadInputCli, HelpExitsZeroAndDocumentsEveryFlag) {
  auto r = run_attnsel({"select", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--platform", "--head-size", "--dtype", "--kv-cache-dtype", "--block-size", "--attn-type", "--num-heads",
        "--use-mla", "--has-sink", "--use-sparse", "--use-mm-prefix", "--use-per-head-quant-scales",
        "--has-sliding-window", "--use-non-causal", "--use-batch-invariant", "--use-kv-connector", "--use-pcp",
        "--use-dcp", "--use-adaptive-verification", "--use-rswa", "--attention-backend", "--backend-per-kind",
        "--fact", "--list-facts", "--mode", "--json"})
    EXPECT_THAT(r.out, HasSubstr(flag));
}

TEST_F(BadInputCli, UnknownDtypeNamesTheValidDtypes) {
  auto r = select_usage_error({"--dtype", "float64"});
  EXPECT_THAT(r.err, AllOf(HasSubstr("float64"), HasSubstr("float16, bfloat16, float32")));
}

TEST_F(BadInputCli, UnknownAttentionTypeNamesTheValidTypes) {
  auto r = select_usage_error({"--attn-type", "cross"});
  EXPECT_THAT(r.err, AllOf(HasSubstr("cross"), HasSubstr("decoder, encoder, encoder_only, encoder_decoder")));
}

TEST_F(BadInputCli, UnknownModeNamesTheValidModes) {
  auto r = select_usage_error({"--mode", "fastest"});
  EXPECT_THAT(r.err, AllOf(HasSubstr("fastest"), HasSubstr("reference, runnable")));
}

TEST_F(BadInputCli, NonNumericHeadSizeIsAUsageError) {
  auto r = select_usage_error({"--head-size", "abc"});
  EXPECT_THAT(r.err, AllOf(HasSubstr("--head-size"), HasSubstr("abc")));
}

TEST_F(BadInputCli, NonPositiveNumbersAreUsageErrors) {
  for (const char* flag : {"--head-size", "--block-size", "--num-heads"}) {
    auto r = select_usage_error({flag, "0"});
    EXPECT_THAT(r.err, HasSubstr(flag)) << flag;
    r = select_usage_error({flag, "-16"});
  }
}

TEST_F(BadInputCli, OverflowingNumberIsAUsageError) {
  auto r = select_usage_error({"--block-size", "99999999999999999999"});
  EXPECT_THAT(r.err, HasSubstr("--block-size"));
}

TEST_F(BadInputCli, UnknownBackendListsEveryValidName) {
  auto r = select_usage_error({"--attention-backend", "NO_SUCH_BACKEND"});
  EXPECT_THAT(r.err, HasSubstr("Unknown attention backend: 'NO_SUCH_BACKEND'. Valid options are: FLASH_ATTN, "));
  for (const BackendMember& m : AttentionBackendEnum.members()) EXPECT_THAT(r.err, HasSubstr(m.name()));
}

TEST_F(BadInputCli, BackendNamesAreCaseInsensitiveButAutoIsNotABackend) {
  auto r = select_usage_error({"--backend-per-kind", "full_attention=auto"});
  EXPECT_THAT(r.err, HasSubstr("Unknown attention backend: 'AUTO'"));
}

TEST_F(BadInputCli, UnknownKindListsTheValidKinds) {
  auto r = select_usage_error({"--backend-per-kind", "full=FLASH_ATTN"});
  EXPECT_THAT(r.err, HasSubstr("Unknown KV cache group kind 'full' in backend_per_kind. Valid kinds are: "
                               "chunked_local_attention, cross_attention, encoder_only_attention, full_attention, "
                               "mamba, mla_attention, sink_full_attention, sliding_window, sliding_window_mla, "
                               "unknown."));
}

TEST_F(BadInputCli, PerKindOverrideWithAnUnknownBackendListsTheValidNames) {
  auto r = select_usage_error({"--backend-per-kind", "sliding_window=NOPE"});
  EXPECT_THAT(r.err, HasSubstr("Unknown attention backend: 'NOPE'. Valid options are: FLASH_ATTN"));
}

TEST_F(BadInputCli, MalformedPerKindOverrideShowsTheExpectedForm) {
  auto r = select_usage_error({"--backend-per-kind", "full_attention"});
  EXPECT_THAT(r.err, HasSubstr("--backend-per-kind expects KIND=NAME, got 'full_attention'"));
}

TEST_F(BadInputCli, ConflictingPerKindOverridesAreRejected) {
  auto r = select_usage_error(
      {"--backend-per-kind", "full_attention=FLASH_ATTN", "--backend-per-kind", "full_attention=FLASHINFER"});
  EXPECT_THAT(r.err, HasSubstr("conflicting --backend-per-kind values for full_attention: 'FLASH_ATTN' and "
                               "'FLASHINFER'"));
}

TEST_F(BadInputCli, RepeatingTheSameOverrideIsNotAConflict) {
  auto r = run_attnsel({"select", "--platform", "other:acme", "--backend-per-kind", "full_attention=FLASH_ATTN",
                        "--backend-per-kind", "full_attention=FLASH_ATTN"});
  EXPECT_NE(r.exit_code, kUsage) << r.err;
}

TEST_F(BadInputCli, MalformedPlatformListsTheValidForms) {
  for (const char* spec : {"cuda:nine", "cuda", "rocm:mi300", "tpu", "other:", ""}) {
    auto r = run_attnsel({"select", "--platform", spec});
    EXPECT_EQ(r.exit_code, kUsage) << spec << ": " << r.err;
    EXPECT_THAT(r.err, AllOf(HasSubstr(std::string("Invalid platform '") + spec + "'"),
                             HasSubstr("cuda:MAJOR.MINOR"), HasSubstr("rocm:gfxNNN"), HasSubstr("xpu"),
                             HasSubstr("cpu"), HasSubstr("other:NAME")))
        << spec;
  }
}

TEST_F(BadInputCli, UnknownFactNamesTheKnownFacts) {
  auto r = select_usage_error({"--fact", "no_such_fact=1"});
  EXPECT_THAT(r.err, AllOf(HasSubstr("Unknown fact 'no_such_fact'. Valid facts are: "),
                           HasSubstr("flash_attn_version")));
}

TEST_F(BadInputCli, MalformedFactShowsTheExpectedForm) {
  auto r = select_usage_error({"--fact", "flash_attn_version"});
  EXPECT_THAT(r.err, HasSubstr("--fact expects NAME=VALUE, got 'flash_attn_version'"));
}

TEST_F(BadInputCli, BadFactValueNamesTheFactAndItsType) {
  auto r = select_usage_error({"--fact", "flash_attn_version=three"});
  EXPECT_THAT(r.err, AllOf(HasSubstr("'three'"), HasSubstr("flash_attn_version"), HasSubstr("integer")));
}

TEST_F(BadInputCli, ConflictingFactsAreRejected) {
  auto r = select_usage_error({"--fact", "flash_attn_version=2", "--fact", "flash_attn_version=3"});
  EXPECT_THAT(r.err, HasSubstr("conflicting --fact values for flash_attn_version: '2' and '3'"));
}

TEST_F(BadInputCli, UnknownKvCacheDtypeListsTheValidDtypes) {
  auto r = select_usage_error({"--kv-cache-dtype", "fp9"});
  std::string valid;
  for (CacheDType d : all_cache_dtypes()) valid += (valid.empty() ? "" : ", ") + std::string(cache_dtype_name(d));
  EXPECT_THAT(r.err, HasSubstr("--kv-cache-dtype 'fp9' is not a cache dtype; valid values are: " + valid));
}

TEST_F(BadInputCli, EmptyKvCacheDtypeIsNotTheSameAsNone) {
  auto r = select_usage_error({"--kv-cache-dtype", ""});
  EXPECT_THAT(r.err, HasSubstr("--kv-cache-dtype '' is not a cache dtype; valid values are: auto, "));
}

TEST_F(BadInputCli, TwoPlatformsConflict) {
  auto r = select_usage_error({"--platform", "cpu"});
  EXPECT_THAT(r.err, HasSubstr("--platform"));
}

TEST_F(BadInputCli, UsageErrorWithJsonPrintsTheErrorObject) {
  auto r = select_usage_error({"--json", "--attention-backend", "NOPE"});
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("error_type"), "ValueError");
  EXPECT_THAT(j.at("error").get<std::string>(), HasSubstr("Unknown attention backend: 'NOPE'"));
  EXPECT_TRUE(j.at("candidates").empty());
}

TEST_F(BadInputCli, ListRejectsJsonTogetherWithMarkdown) {
  auto r = run_attnsel({"list", "--platform", "cpu", "--json", "--markdown"});
  EXPECT_EQ(r.exit_code, kUsage);
  EXPECT_THAT(r.err, AllOf(HasSubstr("--markdown"), HasSubstr("--json")));
}

TEST_F(BadInputCli, ListRejectsAMalformedPlatform) {
  auto r = run_attnsel({"list", "--platform", "cuda:x.y"});
  EXPECT_EQ(r.exit_code, kUsage);
  EXPECT_THAT(r.err, HasSubstr("Valid forms"));
}

}  // namespace
}  // namespace attnsel
