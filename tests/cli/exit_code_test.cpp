// The CLI's error → exit-code mapping, called directly (the internal-error case cannot be
// provoked from the command line of a correct program).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <stdexcept>

#include "common_options.hpp"

namespace attnsel::cli {
namespace {

using ::testing::HasSubstr;

int run_quietly(const std::function<int()>& body, Failure* seen = nullptr) {
  // Keep the test log clean: the mapping prints to stderr.
  ::testing::internal::CaptureStderr();
  const int code = run_command(false, body, [&](Failure& f) {
    if (seen != nullptr) *seen = f;
  });
  (void)::testing::internal::GetCapturedStderr();
  return code;
}

TEST(CliExitCode, SuccessPassesTheBodysStatusThrough) { EXPECT_EQ(run_quietly([] { return 0; }), 0); }

TEST(CliExitCode, UsageErrorIsTwo) {
  Failure f;
  EXPECT_EQ(run_quietly([]() -> int { throw UsageError("bad flag"); }, &f), kExitUsage);
  EXPECT_EQ(f.error_type, "UsageError");
  EXPECT_EQ(f.message, "bad flag");
}

TEST(CliExitCode, LibraryErrorsInTheUsagePhaseAreUsageErrorsWithTheirType) {
  Failure f;
  EXPECT_EQ(run_quietly([]() -> int { return as_usage([]() -> int { throw ValueError("Unknown x"); }); }, &f),
            kExitUsage);
  EXPECT_EQ(f.error_type, "ValueError");
}

TEST(CliExitCode, SelectionErrorIsThreeAndKeepsItsCandidates) {
  Failure f;
  std::vector<Candidate> candidates{{"FLASH_ATTN", 0, false, {"head_size not supported"}}};
  EXPECT_EQ(run_quietly([&]() -> int { throw SelectionError(ErrorKind::value, "No valid", candidates); }, &f),
            kExitNoBackend);
  EXPECT_EQ(f.error_type, "ValueError");
  ASSERT_EQ(f.candidates.size(), 1u);
  EXPECT_EQ(f.candidates[0].reasons[0], "head_size not supported");
}

TEST(CliExitCode, NotImplementedFromSelectionIsThree) {
  Failure f;
  EXPECT_EQ(run_quietly([]() -> int { throw NotImplementedError("MLA is not supported on CPU."); }, &f),
            kExitNoBackend);
  EXPECT_EQ(f.error_type, "NotImplementedError");
}

TEST(CliExitCode, UnexpectedExceptionIsFourNeverACrash) {
  Failure f;
  EXPECT_EQ(run_quietly([]() -> int { throw std::logic_error("broken invariant"); }, &f), kExitInternal);
  EXPECT_EQ(f.error_type, "InternalError");
  EXPECT_THAT(f.message, HasSubstr("broken invariant"));
  EXPECT_EQ(run_quietly([]() -> int { throw 42; }), kExitInternal);
}

TEST(CliExitCode, JsonFailureIsOneObjectOnStdout) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = run_command(true, []() -> int {
    throw SelectionError(ErrorKind::value, "Invalid attention backend for acme", {});
  });
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, kExitNoBackend);
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j.at("error"), "Invalid attention backend for acme");
  EXPECT_EQ(j.at("error_type"), "ValueError");
  EXPECT_TRUE(j.at("candidates").is_array());
  EXPECT_THAT(err, HasSubstr("Invalid attention backend for acme"));
}

}  // namespace
}  // namespace attnsel::cli
