// JSON forms of a selection and its inputs, as `attnsel select --json` prints them and the
// C API returns them: vLLM's field names, None as null, dtypes by name.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "attnsel/platform.hpp"
#include "attnsel/selector_config.hpp"

namespace attnsel::report {

/// {field: value} with vLLM's field names; None → null, dtype → "bfloat16".
nlohmann::ordered_json to_json(const AttentionSelectorConfig& config);
/// [{"backend", "priority", "valid", "reasons"}] in the given order.
nlohmann::ordered_json to_json(const std::vector<Candidate>& candidates);
/// {"error", "error_type", "candidates"}.
nlohmann::ordered_json failure_json(const std::string& message, const std::string& error_type,
                                    const std::vector<Candidate>& candidates);
/// {"backend", "class", "priority", "platform", "mode", "config", "num_heads", "requested",
///  "candidates", "warnings"}.
nlohmann::ordered_json selection_json(const Selection& s, const Platform& platform,
                                      const AttentionSelectorConfig& config, std::optional<int> num_heads,
                                      const std::optional<BackendMember>& requested);

/// Indented text. Invalid UTF-8 (a plugin's name, say) is replaced, never thrown on.
std::string dump(const nlohmann::ordered_json& j, int indent = 2);
std::string dump(const nlohmann::json& j, int indent = 2);

}  // namespace attnsel::report
