// JSON forms of the library's values, as the attnsel command prints them.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "attnsel/platform.hpp"
#include "attnsel/selector_config.hpp"

namespace attnsel::cli {

/// {field: value} with vLLM's field names (the boolean ones from the table of checks);
/// None → null, dtype → "bfloat16".
nlohmann::ordered_json to_json(const AttentionSelectorConfig& config);
/// [{"backend", "priority", "valid", "reasons"}] in the given order.
nlohmann::ordered_json to_json(const std::vector<Candidate>& candidates);
/// {"error", "error_type", "candidates"}.
nlohmann::ordered_json failure_json(const std::string& message, const std::string& error_type,
                            const std::vector<Candidate>& candidates);

/// Prints `j` on stdout, indented, followed by a newline. UTF-8 is kept as is.
void print_json(const nlohmann::ordered_json& j);

}  // namespace attnsel::cli
