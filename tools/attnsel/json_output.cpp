#include "json_output.hpp"

#include <cstdio>

#include "attnsel/capability_checks.hpp"

namespace attnsel::cli {

nlohmann::ordered_json to_json(const AttentionSelectorConfig& c) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["head_size"] = c.head_size;
  j["dtype"] = std::string(dtype_name(c.dtype));
  j["kv_cache_dtype"] = c.kv_cache_dtype ? nlohmann::ordered_json(*c.kv_cache_dtype) : nlohmann::ordered_json(nullptr);
  j["block_size"] = c.block_size ? nlohmann::ordered_json(*c.block_size) : nlohmann::ordered_json(nullptr);
  j["attn_type"] = std::string(attn_type_name(c.attn_type));
  for (const CapabilityCheck& check : capability_checks())
    if (check.requested != nullptr) j[std::string(check.flag)] = c.*check.requested;
  return j;
}

nlohmann::ordered_json to_json(const std::vector<Candidate>& candidates) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Candidate& c : candidates)
    out.push_back({{"backend", c.backend}, {"priority", c.priority}, {"valid", c.valid}, {"reasons", c.reasons}});
  return out;
}

nlohmann::ordered_json failure_json(const std::string& message, const std::string& error_type,
                            const std::vector<Candidate>& candidates) {
  return {{"error", message}, {"error_type", error_type}, {"candidates", to_json(candidates)}};
}

void print_json(const nlohmann::ordered_json& j) {
  // Replace rather than throw on invalid UTF-8: a plugin's name must never crash the CLI.
  const std::string text = j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace attnsel::cli
