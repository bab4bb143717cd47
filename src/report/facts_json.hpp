// The JSON form of a platform's runtime facts (`attnsel select --list-facts --json`).
#pragma once

#include <nlohmann/json.hpp>

#include "attnsel/platform.hpp"

namespace attnsel::report {

/// {"platform", "facts": [{"name", "type", "value", "default", "overridden", "from_engine", "doc"}]}.
nlohmann::ordered_json facts_json(const Platform& platform);

}  // namespace attnsel::report
