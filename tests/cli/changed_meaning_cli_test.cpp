// Bad input never changes meaning: a value the command cannot take as written is refused
// with a message naming the option, the value and what it accepts — never read as "not
// given", wrapped, clamped or read in another base.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "attnsel/facts.hpp"
#include "cli/cli_process.hpp"

namespace attnsel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using test::kUsage;
using test::run_attnsel;

class ChangedMeaningCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::cli_path().empty()) GTEST_SKIP() << "the attnsel command is not built";
  }
  // Runs the command, expects a usage error, and returns its stderr.
  std::string usage_error(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    const test::CliResult r = run_attnsel(args, env);
    std::string command;
    for (const std::string& a : args) command += "'" + a + "' ";
    EXPECT_EQ(r.exit_code, kUsage) << command << "\nstdout: " << r.out << "\nstderr: " << r.err;
    return r.err;
  }
  // A file in the build's temporary folder, removed with the fixture.
  std::string write_file(const std::string& name, const std::string& text) {
    const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                       ("attnsel-changed-meaning-" + std::to_string(::getpid()) + "-" + name);
    std::ofstream(path, std::ios::binary) << text;
    files_.push_back(path);
    return path.string();
  }
  void TearDown() override {
    for (const auto& f : files_) std::filesystem::remove(f);
  }

 private:
  std::vector<std::filesystem::path> files_;
};

TEST_F(ChangedMeaningCli, AnEmptyValueGivenIsRefusedNotTakenAsNotGiven) {
  EXPECT_THAT(usage_error({"plan", "--model", ""}), HasSubstr("the model path is empty"));
  EXPECT_THAT(usage_error({"run", "--model", ""}), HasSubstr("the model path is empty"));
  EXPECT_THAT(usage_error({"plan", "--attention-config", ""}),
              HasSubstr("--attention-config is empty: give a JSON object"));
  EXPECT_THAT(usage_error({"plan", "--kv-transfer-config", " "}),
              HasSubstr("--kv-transfer-config is empty: give a JSON object"));
  EXPECT_THAT(usage_error({"plan", "--kv-cache-layout", ""}), HasSubstr("Unknown KV cache layout ''. Valid layouts:"));
  EXPECT_THAT(usage_error({"plan", "--attention-backend", ""}), HasSubstr("Unknown attention backend: ''"));
  EXPECT_THAT(usage_error({"plan", "--platform", ""}), HasSubstr("Invalid platform '': unknown platform"));
  EXPECT_THAT(usage_error({"run", "--layout", "", "--num-layers", "1"}),
              HasSubstr("unknown --layout ''; valid values are: NHD, HND"));
  EXPECT_THAT(usage_error({"bench", "--layout", ""}), HasSubstr("unknown --layout ''"));
  EXPECT_THAT(usage_error({"plan", "--compare", ""}), HasSubstr("entry 1 of '' is empty"));
  EXPECT_THAT(usage_error({"plan", "--compare", "cpu,,cuda:9.0"}), HasSubstr("entry 2 of 'cpu,,cuda:9.0' is empty"));
  EXPECT_THAT(usage_error({"plan", "--compare", "cpu,"}), HasSubstr("entry 2 of 'cpu,' is empty"));
  EXPECT_THAT(usage_error({"select", "--kv-cache-dtype", ""}), HasSubstr("--kv-cache-dtype '' is not a cache dtype"));
}

TEST_F(ChangedMeaningCli, IntegersAreReadInDecimalAndNeverClamped) {
  // CLI11 alone reads 010 as octal 8: the selector must see 10.
  const test::CliResult r = run_attnsel({"select", "--platform", "cuda:9.0", "--block-size", "010", "--json"});
  ASSERT_FALSE(r.out.empty()) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("config").at("block_size"), 10);
  EXPECT_THAT(usage_error({"select", "--platform", "cuda:9.0", "--block-size", "0x10"}),
              HasSubstr("--block-size: must be a positive integer, got '0x10'"));
  EXPECT_THAT(usage_error({"select", "--platform", "cuda:9.0", "--head-size", "64.5"}),
              HasSubstr("--head-size: must be a positive integer, got '64.5'"));
  // Past 2^63 the number was clamped to 2^63 - 1.
  EXPECT_THAT(usage_error({"plan", "--max-model-len", "99999999999999999999"}),
              HasSubstr("--max-model-len: must be a positive integer no larger than 9223372036854775807, got "
                        "99999999999999999999"));
  EXPECT_THAT(usage_error({"run", "--context", "-1"}), HasSubstr("--context: must be a non-negative integer, got -1"));
  EXPECT_THAT(usage_error({"plan", "--tensor-parallel-size", "4294967298"}),
              HasSubstr("--tensor-parallel-size: must be an integer no larger than 2147483647"));
}

TEST_F(ChangedMeaningCli, FactsOutsideTheirRangeAreRefusedWithTheRange) {
  struct Case {
    const char* platform;
    const char* fact;
    const char* message;
  };
  const Case cases[] = {
      {"cuda:9.0", "flash_attn_version=7", "Invalid value '7' for fact flash_attn_version: expected 0 (auto), 2, 3 or 4"},
      {"cuda:9.0", "flash_attn_version=1", "expected 0 (auto), 2, 3 or 4"},
      {"rocm:gfx942", "rocm.cdna_version=-1", "Invalid value '-1' for fact rocm.cdna_version: expected 0 (unknown) to 4"},
      {"cuda:9.0", "model.head_size=-5", "fact model.head_size: expected 0 (no model config) to 65536"},
      {"cuda:9.0", "parallel.decode_context_parallel_size=-2",
       "fact parallel.decode_context_parallel_size: expected a positive integer"},
      {"cuda:9.0", "flashinfer.use_trtllm_attention=maybe",
       "Invalid value 'maybe' for fact flashinfer.use_trtllm_attention: expected auto, true or false"},
  };
  for (const Case& c : cases)
    EXPECT_THAT(usage_error({"select", "--platform", c.platform, "--fact", c.fact}), HasSubstr(c.message)) << c.fact;
}

TEST_F(ChangedMeaningCli, PlatformFieldsAreDigitsInTheirRange) {
  for (const char* spec : {"cuda:9.-0", "cuda:09.0", "cuda:+9.0", "cuda:9.10", "cuda:0.0", "cuda:100.0", "cuda:9. 0"})
    EXPECT_THAT(usage_error({"select", "--platform", spec}),
                HasSubstr("expected a compute capability MAJOR.MINOR with MAJOR from 1 to 99 and MINOR from 0 to 9"))
        << spec;
}

TEST_F(ChangedMeaningCli, DuplicateJsonKeysAreWarnedNamingTheKey) {
  const test::CliResult r = run_attnsel(
      {"plan", "--platform", "cuda:9.0", "--attention-config", R"({"use_non_causal": true, "use_non_causal": false})"},
      {"ATTNSEL_LOG_LEVEL=warn"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--attention-config: key 'use_non_causal' appears more than once"));
  const std::string model = write_file(
      "dup.json", R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 8,
          "text_config": {"a": 1, "a": 2}, "num_attention_heads": 4})");
  const test::CliResult m = run_attnsel({"plan", "--platform", "cuda:9.0", "--model", model}, {"ATTNSEL_LOG_LEVEL=warn"});
  EXPECT_EQ(m.exit_code, 0) << m.err;
  EXPECT_THAT(m.err, AllOf(HasSubstr("key 'num_attention_heads' appears more than once"),
                           HasSubstr("key 'text_config.a' appears more than once")));
}

TEST_F(ChangedMeaningCli, AParseErrorShowsTheFilesBytesEscaped) {
  const std::string model = write_file("utf8.json", "{\"model_type\": \"ll\xff\xfe\"}");
  const std::string err = usage_error({"plan", "--model", model});
  EXPECT_THAT(err, AllOf(HasSubstr("malformed JSON"), HasSubstr("\\xff")));
  EXPECT_EQ(err.find('\xff'), std::string::npos) << "a raw byte from the file reached the message";
}

TEST_F(ChangedMeaningCli, DcpConfigurationsVllmRefusesAreErrorsWithVllmsReason) {
  EXPECT_THAT(usage_error({"plan", "--platform", "cuda:9.0", "--decode-context-parallel-size", "2",
                           "--tensor-parallel-size", "2"}),
              HasSubstr("vLLM refuses this DCP configuration: tensor parallel size 2 must be greater than total num kv "
                        "heads 8 when enable decode context parallel for GQA/MQA"));
  EXPECT_THAT(usage_error({"plan", "--platform", "cuda:9.0", "--decode-context-parallel-size", "16",
                           "--tensor-parallel-size", "16"}),
              HasSubstr("decode context parallel size must less than or equal to (tensor parallel size 16 // total num "
                        "kv heads 8) = 2, but got 16"));
  EXPECT_THAT(usage_error({"plan", "--platform", "cuda:9.0", "--decode-context-parallel-size", "2",
                           "--tensor-parallel-size", "16", "--cp-kv-cache-interleave-size", "3", "--json"}),
              HasSubstr("vLLM refuses this DCP configuration: block_size (16) must be greater than or equal to and "
                        "divisible by cp_kv_cache_interleave_size (3)"));
  // `run`: the same rules and reasons, before any rank starts; an interleave size without
  // --dcp would be ignored, so it is refused too.
  EXPECT_THAT(usage_error({"run", "--dcp", "2", "--cp-kv-cache-interleave-size", "3", "--block-size", "16"}),
              HasSubstr("vLLM refuses this DCP configuration: block_size (16) must be greater than or equal to and "
                        "divisible by cp_kv_cache_interleave_size (3)"));
  EXPECT_THAT(usage_error({"run", "--dcp", "2", "--num-heads", "12", "--num-kv-heads", "4"}),
              HasSubstr("vLLM refuses this DCP configuration: Total number of q per kv attn heads (3) must be "
                        "divisible by dcp world size"));
  EXPECT_THAT(usage_error({"run", "--cp-kv-cache-interleave-size", "2"}),
              HasSubstr("--cp-kv-cache-interleave-size applies to --dcp runs"));
  // A configuration vLLM accepts: every rank's share.
  const test::CliResult ok = run_attnsel({"plan", "--platform", "cuda:9.0", "--decode-context-parallel-size", "2",
                                          "--tensor-parallel-size", "16", "--max-model-len", "1000", "--json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const nlohmann::json ranks = nlohmann::json::parse(ok.out).at("dcp").at("ranks");
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].at("tokens"), 500);
  EXPECT_EQ(ranks[1].at("kv_cache_bytes"), 500 * 16384);
}

TEST_F(ChangedMeaningCli, SizesThatDoNotFitIn64BitsAreRefusedNotWrapped) {
  // 2^62 tokens a rank at 16384 bytes each: the product once printed as 0 and a negative.
  EXPECT_THAT(usage_error({"plan", "--platform", "cuda:9.0", "--decode-context-parallel-size", "2",
                           "--tensor-parallel-size", "16", "--max-model-len", "9223372036854775807"}),
              HasSubstr("--max-model-len 9223372036854775807: rank 0's 4611686018427387904 tokens at 16384 bytes per "
                        "token are more than 9223372036854775807 bytes of KV cache"));
  // A Mamba state page that needs an attention block of more tokens than a block size holds
  // was cut to a wrong (or negative) block size.
  std::ifstream in(std::string(ATTNSEL_SOURCE_DIR) + "/examples/models/nemotron_h.json");
  nlohmann::json model = nlohmann::json::parse(in);
  model["mamba_num_heads"] = 65536;
  model["mamba_head_dim"] = 65536;
  model["ssm_state_size"] = 1 << 20;
  model["hidden_size"] = 1 << 24;
  const test::CliResult r = run_attnsel({"plan", "--platform", "cuda:9.0", "--model",
                                         write_file("huge_mamba.json", model.dump())});
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_THAT(r.err, AllOf(HasSubstr("needs an attention block of more than 2147483647 tokens"),
                           HasSubstr("no block size can hold it")));
  EXPECT_THAT(r.out, Not(HasSubstr("Block size: -")));
}

}  // namespace
}  // namespace attnsel
