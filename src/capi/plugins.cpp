// Plugin loading through the C API.
#include "attnsel/attnsel.h"
#include "attnsel/plugin_loader.hpp"
#include "capi/status.hpp"
#include "report/selection_json.hpp"

using namespace attnsel;
using namespace attnsel::capi;

namespace {

nlohmann::ordered_json to_json(const PluginInfo& p) {
  nlohmann::ordered_json backends = nlohmann::ordered_json::array();
  for (const PluginBackendInfo& b : p.backends)
    backends.push_back({{"name", b.name},
                        {"qualname", b.qualname},
                        {"available", b.available},
                        {"unavailable_reason", b.unavailable_reason},
                        {"has_kernel", b.has_kernel},
                        {"registered_as", b.registered_as}});
  return {{"library", p.library}, {"symbol", p.symbol}, {"name", p.name}, {"version", p.version},
          {"backends", backends}};
}

}  // namespace

extern "C" {

attnsel_status attnsel_load_plugin(const char* spec, char** out_json) {
  return guarded([&] {
    require(spec, "spec");
    if (out_json) *out_json = nullptr;
    const PluginInfo info = load_plugin(std::string_view(spec));
    if (out_json) *out_json = copy_string(report::dump(to_json(info)));
  });
}

attnsel_status attnsel_loaded_plugins(char** out_json) {
  return guarded([&] {
    require(out_json, "out_json");
    *out_json = nullptr;
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const PluginInfo& p : loaded_plugins()) j.push_back(to_json(p));
    *out_json = copy_string(report::dump(j));
  });
}

}  // extern "C"
