// The one table of capability checks: every row is complete and consistent with the
// plugin ABI, the JSON keys, the CLI flags and vLLM's field names; a backend that declares
// a capability in its record passes that row's check, and one that does not fails it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <span>
#include <string>

#include "attnsel/capability_checks.hpp"
#include "attnsel/errors.hpp"
#include "attnsel/plugin.h"
#include "attnsel/selector.hpp"

namespace attnsel {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A config that every default record accepts: head 128, bfloat16, decoder, no flags.
AttentionSelectorConfig plain_config() {
  AttentionSelectorConfig c;
  c.head_size = 128;
  return c;
}

AttentionSelectorConfig every_flag_set() {
  AttentionSelectorConfig c = plain_config();
  for (const CapabilityCheck& check : capability_checks())
    if (check.requested != nullptr) c.*check.requested = true;
  return c;
}

// A backend whose record is whatever the test gives it.
class RecordBackend final : public AttentionBackend {
 public:
  explicit RecordBackend(BackendCapabilities record) : record_(std::move(record)) {}
  std::string get_name() const override { return "CUSTOM"; }
  std::string qualname() const override { return "tests::RecordBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv&) const override { return record_; }

 private:
  BackendCapabilities record_;
};

// The generic rows: "the flag is requested => the capability is declared".
bool is_flag_row(const CapabilityCheck& check) {
  return check.requested != nullptr && check.declared != nullptr && check.applies == nullptr &&
         check.passes == nullptr && check.custom == nullptr;
}

std::string cli_flag_of(std::string_view field) {
  std::string out = "--";
  for (char c : field) out += c == '_' ? '-' : c;
  return out;
}

TEST(CapabilityChecks, EveryRowThatCanFailHasVllmsReason) {
  const AttentionSelectorConfig all = every_flag_set();
  for (const CapabilityCheck& check : capability_checks()) {
    if (check.custom != nullptr) continue;  // writes its own reasons
    const bool can_apply = check.applies == nullptr || check.applies(all);
    if (can_apply) {
      EXPECT_FALSE(check.reason.empty()) << check.capability;
      EXPECT_TRUE(check.passes != nullptr || check.declared != nullptr) << check.reason;
    } else {
      EXPECT_EQ(check.requested, nullptr) << check.capability;  // a capability selection never reads
    }
  }
}

TEST(CapabilityChecks, EveryCapabilityHasItsOwnPluginBitAndTheBitsAreAbiOnePointZero) {
  std::uint64_t all_bits = 0;
  std::set<std::string_view> names;
  for (const CapabilityCheck& check : capability_checks()) {
    if (check.capability.empty()) {
      EXPECT_EQ(check.plugin_bit, 0u) << check.reason;
      continue;
    }
    EXPECT_TRUE(names.insert(check.capability).second) << "named twice: " << check.capability;
    ASSERT_NE(check.declared, nullptr) << check.capability;
    ASSERT_NE(check.plugin_bit, 0u) << check.capability;
    EXPECT_EQ(check.plugin_bit & (check.plugin_bit - 1), 0u) << check.capability << " has more than one bit";
    EXPECT_EQ(all_bits & check.plugin_bit, 0u) << check.capability << " shares a bit";
    all_bits |= check.plugin_bit;
  }
  EXPECT_EQ(all_bits, ATTNSEL_FEATURE_ALL_V1_0);
}

TEST(CapabilityChecks, EverySelectorFlagHasVllmsNameAsJsonKeyACliFlagAndASource) {
  std::set<std::string_view> keys;
  int flags = 0;
  for (const CapabilityCheck& check : capability_checks()) {
    if (check.requested == nullptr) {
      EXPECT_TRUE(check.flag.empty()) << check.flag;
      continue;
    }
    ++flags;
    EXPECT_TRUE(keys.insert(check.flag).second) << "JSON key twice: " << check.flag;
    // The JSON key is vLLM's field name: the one repr() prints for it.
    AttentionSelectorConfig c = plain_config();
    c.*check.requested = true;
    EXPECT_NE(c.repr().find(std::string(check.flag) + "=True"), std::string::npos) << check.flag;
    EXPECT_EQ(check.cli_flag, cli_flag_of(check.flag));
    EXPECT_FALSE(check.cli_help.empty()) << check.flag;
    // Exactly one source: the layer's argument or the engine config (with a CLI setter).
    EXPECT_NE(check.layer_argument == nullptr, check.from_engine == nullptr) << check.flag;
    EXPECT_EQ(check.from_engine == nullptr, check.to_engine == nullptr) << check.flag;
  }
  EXPECT_EQ(flags, 13);  // every boolean field of vLLM's AttentionSelectorConfig, plus use_rswa
}

TEST(CapabilityChecks, TheFlagListIsTheTablesFlagRowsInOrderAndFindsEachByName) {
  std::vector<const CapabilityCheck*> rows;
  for (const CapabilityCheck& check : capability_checks())
    if (check.requested != nullptr) rows.push_back(&check);
  const std::span<const CapabilityCheck* const> flags = selector_flags();
  EXPECT_EQ(std::vector<const CapabilityCheck*>(flags.begin(), flags.end()), rows);
  for (std::size_t i = 0; i < flags.size(); ++i) EXPECT_EQ(selector_flag_index(flags[i]->flag), i);
  try {
    selector_flag_index("use_everything");
    ADD_FAILURE() << "an unknown flag was found";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith("unknown selector flag 'use_everything'; valid flags are: use_mm_prefix, "
                                                "use_mla, has_sink"));
  }
}

TEST(CapabilityChecks, TheConfigFieldsAreVllmsThenTheOtherFlagsEachOnce) {
  const std::vector<std::string_view> fields = selector_config_fields();
  EXPECT_THAT(std::vector<std::string_view>(fields.begin(), fields.begin() + 4),
              ElementsAre("head_size", "dtype", "kv_cache_dtype", "block_size"));
  EXPECT_EQ(std::count(fields.begin(), fields.end(), "attn_type"), 1);
  for (const CapabilityCheck* flag : selector_flags())
    EXPECT_EQ(std::count(fields.begin(), fields.end(), flag->flag), 1) << flag->flag;
  EXPECT_EQ(fields.size(), selector_flags().size() + 5);  // no name that is neither a flag nor a field
  EXPECT_EQ(fields.back(), "use_rswa");                    // not vLLM's: after vLLM's fields
  // repr() prints the fields in this order, every flag of vLLM's, the others only when true.
  AttentionSelectorConfig c = plain_config();
  c.use_rswa = true;
  std::size_t at = 0;
  for (std::string_view field : fields) {
    const std::size_t found = c.repr().find(std::string(field) + "=", at);
    EXPECT_NE(found, std::string::npos) << field << " in " << c.repr();
    at = found;
  }
  EXPECT_EQ(plain_config().repr().find("use_rswa"), std::string::npos);
}

TEST(CapabilityChecks, EverySelectorFlagChangesTheConfigsHash) {
  const std::size_t plain = plain_config().hash();
  std::set<std::size_t> seen = {plain};
  for (const CapabilityCheck& check : capability_checks()) {
    if (check.requested == nullptr) continue;
    AttentionSelectorConfig c = plain_config();
    c.*check.requested = true;
    EXPECT_TRUE(seen.insert(c.hash()).second) << check.flag << " does not reach AttentionSelectorConfig::hash";
  }
}

TEST(CapabilityChecks, TheEngineSettersAndGettersAgree) {
  for (const CapabilityCheck& check : capability_checks()) {
    if (check.to_engine == nullptr) continue;
    for (bool on : {true, false}) {
      EngineConfig engine;
      check.to_engine(engine, on);
      EXPECT_EQ(check.from_engine(engine), on) << check.flag;
      LayerRequest layer;
      layer.head_size = 128;
      EXPECT_EQ(make_selector_config(engine, layer).*check.requested, on) << check.flag;
    }
  }
}

TEST(CapabilityChecks, DeclaringACapabilityPassesItsCheckAndRemovingTheDeclarationFlipsIt) {
  const RuntimeEnv env;
  int rows = 0;
  for (const CapabilityCheck& check : capability_checks()) {
    if (!is_flag_row(check)) continue;
    ++rows;
    AttentionSelectorConfig c = plain_config();
    c.*check.requested = true;
    BackendCapabilities declared;
    declared.*check.declared = true;
    EXPECT_THAT(RecordBackend(declared).validate_configuration(c, env), IsEmpty()) << check.flag;
    BackendCapabilities undeclared = declared;
    undeclared.*check.declared = false;
    EXPECT_THAT(RecordBackend(undeclared).validate_configuration(c, env), ElementsAre(std::string(check.reason)))
        << check.flag;
    // Not requested: the declaration does not matter.
    EXPECT_THAT(RecordBackend(undeclared).validate_configuration(plain_config(), env), IsEmpty()) << check.flag;
  }
  EXPECT_EQ(rows, 11);
}

TEST(CapabilityChecks, ThePluginAdapterAndTheListReadTheSameBits) {
  // capability_flags names every declared field in table order, as `attnsel list` prints them.
  BackendCapabilities record;
  record.sink = true;
  record.kv_connector = false;
  std::vector<std::string> on;
  for (const auto& [name, declared] : capability_flags(record))
    if (declared) on.emplace_back(name);
  EXPECT_THAT(on, ElementsAre("sink", "device_cpu_query_lens_mismatch", "forward_includes_kv_cache_update"));
}

TEST(CapabilityChecks, MlaAndSparseMustMatchTheRequestBothWays) {
  const RuntimeEnv env;
  BackendCapabilities mla;
  mla.mla = true;
  EXPECT_THAT(RecordBackend(mla).validate_configuration(plain_config(), env), ElementsAre("non-MLA not supported"));
  AttentionSelectorConfig wants_mla = plain_config();
  wants_mla.use_mla = true;
  EXPECT_THAT(RecordBackend({}).validate_configuration(wants_mla, env), ElementsAre("MLA not supported"));
  EXPECT_THAT(RecordBackend(mla).validate_configuration(wants_mla, env), IsEmpty());
}

TEST(CapabilityChecks, ReasonsComeInVllmsOrderThenTheBackendsOwn) {
  BackendCapabilities none;
  none.head_sizes = {64};
  none.kv_connector = false;
  none.device_cpu_query_lens_mismatch = false;
  none.compute_capability_rule = [](const std::optional<DeviceCapability>&) { return false; };
  none.combination_rule = [](const CombinationArgs&) { return std::optional<std::string>("joint rule"); };
  none.own_checks = [](const AttentionSelectorConfig&) { return std::vector<std::string>{"own rule"}; };
  AttentionSelectorConfig c = every_flag_set();
  c.use_mla = false;
  c.use_sparse = false;
  c.attn_type = AttentionType::encoder;
  EXPECT_THAT(RecordBackend(none).validate_configuration(c, RuntimeEnv{}),
              ElementsAre("head_size not supported", "partial multimodal token full attention not supported",
                          "attention sinks not supported", "per-head quant scales not supported",
                          "compute capability not supported", "attention type encoder not supported",
                          "sliding window not supported", "non-causal attention not supported",
                          "batch invariance not supported", "KV connector not supported", "PCP not supported",
                          "DCP not supported",
                          "device-cpu query lens mismatch not supported, this is needed for adaptive verification",
                          "R-SWA not supported", "joint rule", "own rule"));
}

}  // namespace
}  // namespace attnsel
