#include "report/selector_flags_json.hpp"

#include <fmt/format.h>

#include "attnsel/capability_checks.hpp"

namespace attnsel::report {

namespace {

// Where get_attn_backend reads the flag: the layer's argument or the engine config.
std::string_view source_of(const CapabilityCheck& flag) { return flag.layer_argument != nullptr ? "layer" : "engine"; }

}  // namespace

nlohmann::ordered_json selector_flags_json() {
  nlohmann::ordered_json flags = nlohmann::ordered_json::array();
  for (const CapabilityCheck* flag : selector_flags())
    flags.push_back({{"name", flag->flag},
                     {"cli_flag", flag->cli_flag},
                     {"help", flag->cli_help},
                     {"source", source_of(*flag)},
                     {"capability", flag->capability}});
  return {{"flags", std::move(flags)}, {"config_fields", selector_config_fields()}};
}

std::string selector_flags_markdown() {
  std::string out =
      "| Flag (C API, Python, JSON) | CLI | Read from | Backend capability | Meaning |\n|---|---|---|---|---|\n";
  for (const CapabilityCheck* flag : selector_flags())
    out += fmt::format("| `{}` | `{}` | {} | `{}` | {} |\n", flag->flag, flag->cli_flag, source_of(*flag),
                       flag->capability, flag->cli_help);
  return out;
}

}  // namespace attnsel::report
