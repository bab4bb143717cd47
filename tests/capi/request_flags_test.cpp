// The C API's selector flags: every flag of the table is set by name
// (attnsel_select_request_set_flag) and listed (attnsel_list_selector_flags), and reaches the
// selection; an unknown name is refused with the valid ones; the fields of C API 2.2 and a
// caller's 2.2-sized struct still work.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "attnsel/attnsel.h"
#include "attnsel/capability_checks.hpp"

namespace attnsel {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

json take_json(char* text) {
  const json j = text != nullptr ? json::parse(text) : json();
  attnsel_free_string(text);
  return j;
}

json listed_flags() {
  char* text = nullptr;
  EXPECT_EQ(attnsel_list_selector_flags(&text), ATTNSEL_STATUS_OK) << attnsel_last_error();
  return take_json(text);
}

// The selector config a request reaches, whether the selection succeeds or fails.
json config_of(const attnsel_select_request& request) {
  char* text = nullptr;
  (void)attnsel_select_json(&request, &text);
  const json j = take_json(text);
  EXPECT_TRUE(j.contains("config")) << attnsel_last_error();
  return j.value("config", json::object());
}

attnsel_select_request hopper_request() {
  attnsel_select_request r;
  attnsel_select_request_init(&r);
  r.platform = "cuda:9.0";
  return r;
}

TEST(CApiSelectorFlags, TheListIsTheTablesFlagsInOrder) {
  const json listed = listed_flags();
  std::vector<std::string> names;
  for (const json& f : listed.at("flags")) {
    names.push_back(f.at("name"));
    EXPECT_THAT(f.at("source").get<std::string>(), ::testing::AnyOf("layer", "engine"));
  }
  std::vector<std::string> table;
  for (const CapabilityCheck* flag : selector_flags()) table.emplace_back(flag->flag);
  EXPECT_EQ(names, table);
  EXPECT_LE(names.size(), 64u) << "attnsel_select_request.flags has 64 bits";
  for (const std::string& name : names)
    EXPECT_EQ(std::count(listed.at("config_fields").begin(), listed.at("config_fields").end(), name), 1) << name;
}

TEST(CApiSelectorFlags, EveryListedFlagSetByNameReachesTheSelectionAloneAndClears) {
  const json flags = listed_flags().at("flags");
  for (const json& listed : flags) {
    const std::string name = listed.at("name");
    attnsel_select_request r = hopper_request();
    ASSERT_EQ(attnsel_select_request_set_flag(&r, name.c_str(), 1), ATTNSEL_STATUS_OK) << attnsel_last_error();
    const json on = config_of(r);
    for (const json& other : flags)
      EXPECT_EQ(on.value(other.at("name").get<std::string>(), false), other.at("name") == name)
          << "setting " << name << ", reading " << other.at("name");
    ASSERT_EQ(attnsel_select_request_set_flag(&r, name.c_str(), 0), ATTNSEL_STATUS_OK);
    EXPECT_EQ(config_of(r).value(name, true), false) << name;
  }
}

TEST(CApiSelectorFlags, AnUnknownNameIsRefusedWithTheValidOnes) {
  attnsel_select_request r = hopper_request();
  const attnsel_select_request before = r;
  EXPECT_EQ(attnsel_select_request_set_flag(&r, "use_everything", 1), ATTNSEL_STATUS_VALUE_ERROR);
  const std::string message = attnsel_last_error();
  EXPECT_THAT(message, HasSubstr("unknown selector flag 'use_everything'; valid flags are: "));
  for (const CapabilityCheck* flag : selector_flags()) EXPECT_THAT(message, HasSubstr(std::string(flag->flag)));
  EXPECT_EQ(r.flags, before.flags);
  EXPECT_EQ(attnsel_select_request_set_flag(&r, nullptr, 1), ATTNSEL_STATUS_VALUE_ERROR);
  EXPECT_EQ(attnsel_select_request_set_flag(nullptr, "has_sink", 1), ATTNSEL_STATUS_VALUE_ERROR);
  EXPECT_EQ(attnsel_list_selector_flags(nullptr), ATTNSEL_STATUS_VALUE_ERROR);
}

// The fields of C API 2.2, set directly, as programs built against it set them.
TEST(CApiSelectorFlags, TheFieldsOfVersionTwoPointTwoStillSetTheirFlags) {
  const std::pair<const char*, std::uint8_t attnsel_select_request::*> fields[] = {
      {"use_mla", &attnsel_select_request::use_mla},
      {"has_sink", &attnsel_select_request::has_sink},
      {"use_sparse", &attnsel_select_request::use_sparse},
      {"use_mm_prefix", &attnsel_select_request::use_mm_prefix},
      {"use_per_head_quant_scales", &attnsel_select_request::use_per_head_quant_scales},
      {"has_sliding_window", &attnsel_select_request::has_sliding_window},
      {"use_non_causal", &attnsel_select_request::use_non_causal},
      {"use_batch_invariant", &attnsel_select_request::use_batch_invariant},
      {"use_kv_connector", &attnsel_select_request::use_kv_connector},
      {"use_pcp", &attnsel_select_request::use_pcp},
      {"use_dcp", &attnsel_select_request::use_dcp},
      {"use_adaptive_verification", &attnsel_select_request::use_adaptive_verification},
      {"use_rswa", &attnsel_select_request::use_rswa}};
  for (const auto& [name, field] : fields) {
    attnsel_select_request r = hopper_request();
    r.*field = 1;
    EXPECT_EQ(config_of(r).value(name, false), true) << name;
    // Turning the flag off by name clears the field too.
    ASSERT_EQ(attnsel_select_request_set_flag(&r, name, 0), ATTNSEL_STATUS_OK);
    EXPECT_EQ(r.*field, 0) << name;
  }
}

TEST(CApiSelectorFlags, ARequestOfVersionTwoPointTwoIsReadWithoutTheFlagsWord) {
  attnsel_select_request r = hopper_request();
  ASSERT_EQ(attnsel_select_request_set_flag(&r, "has_sink", 1), ATTNSEL_STATUS_OK);
  r.has_sink = 0;  // only the bit holds it now
  EXPECT_EQ(config_of(r).value("has_sink", false), true);
  r.struct_size = offsetof(attnsel_select_request, flags);  // a caller built against 2.2
  EXPECT_EQ(config_of(r).value("has_sink", true), false);
  r.struct_size = offsetof(attnsel_select_request, flags) - 1;
  char* text = nullptr;
  EXPECT_EQ(attnsel_select_json(&r, &text), ATTNSEL_STATUS_VALUE_ERROR);
  attnsel_free_string(text);
  EXPECT_THAT(attnsel_last_error(), HasSubstr("attnsel_select_request.struct_size"));
}

}  // namespace
}  // namespace attnsel
