#include "report/selection_json.hpp"

#include "attnsel/capability_checks.hpp"

namespace attnsel::report {

nlohmann::ordered_json to_json(const AttentionSelectorConfig& c) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["head_size"] = c.head_size;
  j["dtype"] = std::string(dtype_name(c.dtype));
  j["kv_cache_dtype"] = c.kv_cache_dtype ? nlohmann::ordered_json(std::string(cache_dtype_name(*c.kv_cache_dtype)))
                                         : nlohmann::ordered_json(nullptr);
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

nlohmann::ordered_json selection_json(const Selection& s, const Platform& platform,
                                      const AttentionSelectorConfig& config, std::optional<int> num_heads,
                                      const std::optional<BackendMember>& requested) {
  using J = nlohmann::ordered_json;
  return {{"backend", s.backend},
          {"class", s.class_path},
          {"priority", s.priority ? J(*s.priority) : J(nullptr)},
          {"platform", platform.spec()},
          {"mode", std::string(mode_name(platform.mode()))},
          {"config", to_json(config)},
          {"num_heads", num_heads ? J(*num_heads) : J(nullptr)},
          {"requested", requested ? J(requested->name()) : J(nullptr)},
          {"candidates", to_json(s.candidates)},
          {"warnings", s.warnings()}};
}

std::string dump(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string dump(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace attnsel::report
