// The selection request's selector flags: the fields of C API 2.2 and the `flags` bits of
// later versions, both read against the table of checks (attnsel/capability_checks.hpp), so
// that a flag added to the table reaches the C API (and the Python package over it) by name.
#include <fmt/format.h>

#include <cstddef>

#include "attnsel/capability_checks.hpp"
#include "capi/request.hpp"
#include "capi/status.hpp"
#include "report/selection_json.hpp"
#include "report/selector_flags_json.hpp"

namespace attnsel::capi {

namespace {

// The flags with a field of their own: C API 2.2's, frozen by the ABI.
struct FlagField {
  std::string_view name;
  std::uint8_t attnsel_select_request::*field;
};
constexpr FlagField kFlagFields[] = {
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
    {"use_rswa", &attnsel_select_request::use_rswa},
};

std::uint8_t attnsel_select_request::* field_of(std::string_view name) {
  for (const FlagField& f : kFlagFields)
    if (f.name == name) return f.field;
  return nullptr;
}

constexpr std::size_t kFlagBits = 64;

}  // namespace

std::vector<bool> requested_flags(const attnsel_select_request& r) {
  require_struct(r.struct_size, kSelectRequestMinimumSize, "attnsel_select_request");
  const std::span<const CapabilityCheck* const> flags = selector_flags();
  const std::uint64_t bits = ATTNSEL_CAPI_HAS(&r, flags) ? r.flags : 0;
  std::vector<bool> on(flags.size());
  for (std::size_t i = 0; i < flags.size(); ++i) {
    const auto field = field_of(flags[i]->flag);
    on[i] = (i < kFlagBits && (bits >> i & 1) != 0) || (field != nullptr && r.*field != 0);
  }
  return on;
}

}  // namespace attnsel::capi

using namespace attnsel;
using namespace attnsel::capi;

extern "C" {

attnsel_status attnsel_select_request_set_flag(attnsel_select_request* request, const char* name, int value) {
  return guarded([&] {
    require(request, "request");
    require(name, "name");
    require_struct(request->struct_size, sizeof(attnsel_select_request), "attnsel_select_request");
    const std::size_t index = selector_flag_index(name);
    if (index >= kFlagBits)
      throw ValueError(fmt::format("selector flag '{}' has no bit in attnsel_select_request.flags", name));
    const std::uint64_t bit = std::uint64_t{1} << index;
    request->flags = value != 0 ? request->flags | bit : request->flags & ~bit;
    if (const auto field = field_of(name)) request->*field = value != 0 ? 1 : 0;
  });
}

attnsel_status attnsel_list_selector_flags(char** out_json) {
  return guarded([&] {
    require(out_json, "out_json");
    *out_json = nullptr;
    *out_json = copy_string(report::dump(report::selector_flags_json()));
  });
}

}  // extern "C"
