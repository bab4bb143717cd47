// fa_utils' get_flash_attn_version logs what it falls back from, with vLLM's words, once per
// process: each case runs `attnsel select` in a fresh process with the log on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/cli_process.hpp"

namespace attnsel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct FaMessageCase {
  std::string name;
  std::vector<std::string> args;
  std::string line;  ///< the log line, level letter included
};

class FaVersionMessages : public ::testing::TestWithParam<FaMessageCase> {
 protected:
  void SetUp() override {
    if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  }
};

TEST_P(FaVersionMessages, LogsVllmsLine) {
  std::vector<std::string> args{"select"};
  args.insert(args.end(), GetParam().args.begin(), GetParam().args.end());
  const test::CliResult r = test::run_attnsel(args, {"ATTNSEL_LOG_LEVEL=info"});
  EXPECT_THAT(r.err, HasSubstr(GetParam().line + "\n")) << r.err;
}

const FaMessageCase kCases[] = {
    {"blackwell_fa3", {"--platform", "cuda:10.0", "--attention-config", R"({"flash_attn_version": 3})"},
     "W attnsel: Cannot use FA version 3 on Blackwell platform, defaulting to FA version 4 if supported, otherwise FA2."},
    {"batch_invariance", {"--platform", "cuda:10.0", "--use-batch-invariant"},
     "W attnsel: Cannot use FA version 4 with batch invariance, defaulting to FA version 2."},
    {"hd256_quantized_cache", {"--platform", "cuda:10.0", "--head-size", "256", "--kv-cache-dtype", "fp8"},
     "W attnsel: FA4's Blackwell head_size=256 kernel does not support quantized KV cache dtype fp8, defaulting to FA "
     "version 2."},
    {"hd256_sinks", {"--platform", "cuda:10.0", "--head-size", "256", "--has-sink", "--kv-cache-dtype", "fp8"},
     "W attnsel: FA4's Blackwell head_size=256 kernel does not support attention sinks, defaulting to FA version 2."},
    {"hd256_block_size", {"--platform", "cuda:10.0", "--head-size", "256", "--use-mm-prefix", "--block-size", "64"},
     "W attnsel: FA4's Blackwell head_size=256 kernel does not support a KV cache block size of 64, defaulting to FA "
     "version 2."},
    {"hd256_mm_prefix", {"--platform", "cuda:10.0", "--head-size", "256", "--use-mm-prefix"},
     "W attnsel: FA4's Blackwell head_size=256 kernel does not support mm_prefix bidirectional attention, defaulting "
     "to FA version 2."},
    {"hd256_dcp", {"--platform", "cuda:10.0", "--head-size", "256", "--fact", "model.head_size=256", "--use-dcp"},
     "W attnsel: FA4's Blackwell head_size=256 kernel does not support decode context parallelism, defaulting to FA "
     "version 2."},
    {"tmem", {"--platform", "cuda:10.0", "--head-size", "512", "--kv-cache-dtype", "fp8"},
     "W attnsel: FA4 on Blackwell does not support head_size=512 due to TMEM capacity limits, defaulting to FA version "
     "2."},
    {"hopper_upgrade", {"--platform", "cuda:9.0", "--head-size", "512", "--kv-cache-dtype", "fp8"},
     "I attnsel: FA3 does not support head_size=512 on SM90: upgrading FlashAttention 3 -> 4"},
};

INSTANTIATE_TEST_SUITE_P(Cases, FaVersionMessages, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<FaMessageCase>& info) { return info.param.name; });

// No fallback, no line.
TEST(FaVersionMessagesQuiet, TheDefaultVersionLogsNothing) {
  if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  const test::CliResult r = test::run_attnsel({"select", "--platform", "cuda:10.0"}, {"ATTNSEL_LOG_LEVEL=info"});
  EXPECT_THAT(r.err, Not(HasSubstr("FA version")));
}

}  // namespace
}  // namespace attnsel
