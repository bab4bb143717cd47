// JSON output of the attnsel command: the library's JSON forms (src/report), printed.
#pragma once

#include <nlohmann/json.hpp>

#include "report/selection_json.hpp"

namespace attnsel::cli {

using report::failure_json;
using report::to_json;

/// Prints `j` on stdout, indented, followed by a newline. UTF-8 is kept as is.
void print_json(const nlohmann::ordered_json& j);

}  // namespace attnsel::cli
