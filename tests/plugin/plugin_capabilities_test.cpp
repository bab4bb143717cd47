// The plugin adapter maps every feature bit of a declaration onto the capability record
// through the table of checks, so a bit and the check it enables cannot drift apart.
#include <gtest/gtest.h>

#include "attnsel/capability_checks.hpp"
#include "plugin/plugin_backend.hpp"

namespace attnsel::plugin {
namespace {

BackendDeclaration declaration(std::uint64_t features) {
  BackendDeclaration d;
  d.name = "BITS";
  d.dtypes = {DType::bfloat16};
  d.kv_cache_dtypes = {CacheDType::auto_};
  d.block_sizes = {MultipleOf{16}};
  d.attn_types = {AttentionType::decoder};
  d.features = features;
  return d;
}

TEST(PluginCapabilities, EachFeatureBitDeclaresExactlyItsRowsCapability) {
  const RuntimeEnv env;
  for (const CapabilityCheck& bit : capability_checks()) {
    if (bit.plugin_bit == 0) continue;
    const PluginBackend backend(nullptr, "tests::Bits", declaration(bit.plugin_bit));
    const BackendCapabilities record = backend.capabilities(env);
    for (const CapabilityCheck& row : capability_checks()) {
      if (row.declared == nullptr) continue;
      EXPECT_EQ(record.*row.declared, &row == &bit) << bit.capability << " set, reading " << row.capability;
    }
  }
}

TEST(PluginCapabilities, ADeclaredBitPassesItsCheckAndAMissingOneFailsIt) {
  const RuntimeEnv env;
  AttentionSelectorConfig c;
  c.head_size = 128;
  c.use_per_head_quant_scales = true;
  const PluginBackend with(nullptr, "tests::With",
                           declaration(ATTNSEL_FEATURE_VLLM_DEFAULTS | ATTNSEL_FEATURE_PER_HEAD_QUANT_SCALES));
  const PluginBackend without(nullptr, "tests::Without", declaration(ATTNSEL_FEATURE_VLLM_DEFAULTS));
  EXPECT_TRUE(with.validate_configuration(c, env).empty());
  EXPECT_EQ(without.validate_configuration(c, env), std::vector<std::string>{"per-head quant scales not supported"});
}

}  // namespace
}  // namespace attnsel::plugin
