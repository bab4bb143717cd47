// The selector flags of the table of checks (attnsel/capability_checks.hpp) as JSON and as a
// Markdown table: what `attnsel select --list-flags` prints, attnsel_list_selector_flags
// returns and docs/selector-flags.md holds.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace attnsel::report {

/// {"flags": [{"name", "cli_flag", "help", "source", "capability"}], "config_fields": [...]},
/// the flags in table order; "source" is "layer" or "engine".
nlohmann::ordered_json selector_flags_json();

/// One row per flag: its name, CLI flag, source, capability and help.
std::string selector_flags_markdown();

}  // namespace attnsel::report
