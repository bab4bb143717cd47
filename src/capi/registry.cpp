// The registry through the C API: vLLM's AttentionBackendEnum / MambaAttentionBackendEnum,
// their overrides and register_backend, and the backend listing.
#include <fmt/format.h>

#include "attnsel/attnsel.h"
#include "attnsel/capabilities.hpp"
#include "attnsel/platform.hpp"
#include "attnsel/registry.hpp"
#include "attnsel/selector.hpp"
#include "capi/request.hpp"
#include "capi/status.hpp"
#include "report/backend_report.hpp"
#include "report/selection_json.hpp"

using namespace attnsel;
using namespace attnsel::capi;

namespace {

const BackendEnum& enum_of(attnsel_enum which) {
  switch (which) {
    case ATTNSEL_ENUM_ATTENTION: return AttentionBackendEnum;
    case ATTNSEL_ENUM_MAMBA: return MambaAttentionBackendEnum;
    default:
      throw ValueError(fmt::format("unknown backend enum {}; valid values are: {} (ATTNSEL_ENUM_ATTENTION), {} "
                                   "(ATTNSEL_ENUM_MAMBA)",
                                   which, ATTNSEL_ENUM_ATTENTION, ATTNSEL_ENUM_MAMBA));
  }
}

// vLLM's Enum[name]: exact, with its unknown-member message.
BackendMember member_of(attnsel_enum which, const char* name) {
  require(name, "name");
  return enum_of(which)[name];
}

// A class as get_class() describes it: {"name", "class", "is_ssm"[, "is_mla", "is_sparse", "has_kernel"]}.
std::string class_json(const BackendClass& cls) {
  nlohmann::ordered_json j = {{"name", cls.get_name()}, {"class", cls.qualname()}, {"is_ssm", cls.is_ssm()}};
  if (const auto* attn = dynamic_cast<const AttentionBackend*>(&cls)) {
    // MLA and sparse are properties of the class, the same in every environment.
    const BackendCapabilities record = attn->capabilities(detect_host_platform()->env());
    j["is_mla"] = record.mla;
    j["is_sparse"] = record.sparse;
    j["has_kernel"] = attn->has_kernel();
  }
  return report::dump(j, -1);
}

}  // namespace

extern "C" {

attnsel_status attnsel_enum_members(attnsel_enum which, char** out_json) {
  return guarded([&] {
    require(out_json, "out_json");
    *out_json = nullptr;
    const BackendEnum& e = enum_of(which);
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const BackendMember& m : e.members()) {
      const std::optional<std::string> value = m.value();
      j.push_back({{"name", m.name()},
                   {"value", value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr)},
                   {"overridden", m.is_overridden()}});
    }
    *out_json = copy_string(report::dump(j, -1));
  });
}

attnsel_status attnsel_list_backends(const char* platform, const char* mode, char** out_json) {
  return guarded([&] {
    require(out_json, "out_json");
    *out_json = nullptr;
    const std::shared_ptr<Platform> p = make_request_platform(platform, mode, {});
    std::vector<report::BackendReport> reports;
    for (const BackendEnum* e : {&AttentionBackendEnum, &MambaAttentionBackendEnum})
      for (const BackendMember& m : e->members()) reports.push_back(report::report_member(m, *p));
    *out_json = copy_string(report::dump(report::backends_json(*p, reports)));
  });
}

attnsel_status attnsel_member_check(attnsel_enum which, const char* name) {
  return guarded([&] { (void)member_of(which, name); });
}

attnsel_status attnsel_member_get_path(attnsel_enum which, const char* name, int include_classname, char** out_path) {
  return guarded([&] {
    require(out_path, "out_path");
    *out_path = nullptr;
    *out_path = copy_string(member_of(which, name).get_path(include_classname != 0));
  });
}

attnsel_status attnsel_member_get_class(attnsel_enum which, const char* name, char** out_json) {
  return guarded([&] {
    require(out_json, "out_json");
    *out_json = nullptr;
    *out_json = copy_string(class_json(*member_of(which, name).get_class()));
  });
}

attnsel_status attnsel_member_is_overridden(attnsel_enum which, const char* name, int* out) {
  return guarded([&] {
    require(out, "out");
    *out = member_of(which, name).is_overridden() ? 1 : 0;
  });
}

attnsel_status attnsel_member_clear_override(attnsel_enum which, const char* name) {
  return guarded([&] { member_of(which, name).clear_override(); });
}

attnsel_status attnsel_register_backend(attnsel_enum which, const char* name, const char* class_path) {
  return guarded([&] {
    require(name, "name");
    require(class_path, "class_path");
    const BackendEnum& e = enum_of(which);
    if (const std::optional<BackendMember> m = e.find(name))
      register_backend(*m, class_path);
    else
      (void)register_backend(name, class_path, which == ATTNSEL_ENUM_MAMBA);
  });
}

attnsel_status attnsel_register_member(attnsel_enum which, const char* name, const char* value) {
  return guarded([&] {
    require(name, "name");
    require(value, "value");
    (void)enum_of(which).register_member(name, value);
  });
}

attnsel_status attnsel_get_mamba_attn_backend(const char* mamba_type, int batch_invariant, char** out_json) {
  return guarded([&] {
    require(out_json, "out_json");
    *out_json = nullptr;
    const BackendMember member = member_of(ATTNSEL_ENUM_MAMBA, mamba_type);
    *out_json = copy_string(class_json(*get_mamba_attn_backend(member, batch_invariant != 0)));
  });
}

}  // extern "C"
