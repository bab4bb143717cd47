#include "model/rope_parameters.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <string_view>

namespace attnsel::model {

namespace {

// The types vLLM's get_rope builds (vllm/model_executor/layers/rotary_embedding/__init__.py),
// after patch_rope_parameters has renamed the legacy "su" and "mrope".
constexpr std::array<std::string_view, 12> kRopeTypes = {
    "default", "linear", "dynamic", "ntk", "yarn", "longrope", "llama3", "mllama4", "xdrope", "deepseek_yarn",
    "deepseek_llama_scaling", "openpangu"};

// The numeric fields the rotary embeddings read besides the factor.
constexpr std::array<std::string_view, 6> kNumberFields = {
    "mscale", "mscale_all_dim", "beta_fast", "beta_slow", "attention_factor", "extrapolation_factor"};

// A JSON number that is finite; anything else fails with `expected`.
std::optional<double> opt_finite_number(const ConfigReader& r, std::string_view name, std::string_view expected) {
  const nlohmann::json* v = r.value(name);
  if (!v) return std::nullopt;
  if (!v->is_number() || !std::isfinite(v->get<double>())) r.fail_type(name, expected);
  return v->get<double>();
}

// transformers 5 writes `rope_parameters`, older versions `rope_scaling`; a file may carry
// both only when they agree.
std::string block_field(const ConfigReader& c) {
  const nlohmann::json* modern = c.value("rope_parameters");
  const nlohmann::json* legacy = c.value("rope_scaling");
  if (modern && legacy && *modern != *legacy)
    c.fail("rope_parameters", "differs from field 'rope_scaling'; give the RoPE parameters once");
  if (modern) return "rope_parameters";
  if (legacy) return "rope_scaling";
  return "";
}

// vLLM's patch_rope_parameters_dict: "rope_type", else the legacy "type"; the two must agree.
std::string read_type(const ConfigReader& r) {
  const std::optional<std::string> modern = r.opt_string("rope_type");
  const std::optional<std::string> legacy = r.opt_string("type");
  if (modern && legacy && *modern != *legacy && !(*legacy == "su" && *modern == "longrope") &&
      !(*legacy == "mrope" && *modern == "default"))
    r.fail("rope_type", fmt::format("Found conflicts between 'rope_type={}' (modern field) and 'type={}' (legacy "
                                    "field). You should only specify one of them.",
                                    printable(*modern), printable(*legacy)));
  if (!modern && !legacy)
    r.fail_missing("rope_type", "a string, or the legacy 'type' (vLLM: rope_parameters should have a 'rope_type' key)");
  std::string type = modern ? *modern : *legacy;
  if (type == "su") type = "longrope";
  if (type == "mrope") {
    if (!r.has("mrope_section"))
      r.fail_missing("mrope_section", "an array (vLLM: Legacy rope_type 'mrope' requires 'mrope_section' in "
                                      "rope_parameters)");
    type = "default";
  }
  if (std::find(kRopeTypes.begin(), kRopeTypes.end(), type) == kRopeTypes.end())
    r.fail(modern ? "rope_type" : "type", fmt::format("Unknown RoPE scaling type {} (vLLM's get_rope knows {})",
                                                      printable(type), fmt::join(kRopeTypes, ", ")));
  return type;
}

}  // namespace

RopeParameters read_rope_parameters(const ConfigReader& c) {
  RopeParameters p;
  p.original_max_position_embeddings = c.opt_int64("original_max_position_embeddings", 1, kMaxWidth);
  p.field = block_field(c);
  if (p.field.empty()) return p;
  const std::optional<ConfigReader> block = c.opt_object(p.field);
  const ConfigReader& r = *block;
  p.rope_type = read_type(r);
  p.factor = opt_finite_number(r, "factor", "a positive number (the RoPE scaling factor)");
  if (p.factor && *p.factor <= 0) r.fail_type("factor", "a positive number (the RoPE scaling factor)");
  for (std::string_view name : kNumberFields) (void)opt_finite_number(r, name, "a number");
  p.mscale_all_dim = opt_finite_number(r, "mscale_all_dim", "a number");
  p.apply_yarn_scaling = r.opt_bool("apply_yarn_scaling", true);
  if (auto ompe = r.opt_int64("original_max_position_embeddings", 1, kMaxWidth))
    p.original_max_position_embeddings = ompe;
  return p;
}

}  // namespace attnsel::model
