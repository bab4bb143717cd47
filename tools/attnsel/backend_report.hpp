// How `attnsel list` and the generated docs render the backend reports (src/report): as
// text or Markdown. Nothing here is written by hand.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnsel/platform.hpp"
#include "attnsel/registry.hpp"
#include "report/backend_report.hpp"

namespace attnsel::cli {

using report::AttentionCapabilities;
using report::BackendReport;
using report::report_backends;
using report::to_json;

/// The readable listing (one block per backend).
std::string render_text(const Platform& platform, const std::vector<BackendReport>& reports);
/// The capability tables (attention, then Mamba) for the docs.
std::string render_markdown(const Platform& platform, const std::vector<BackendReport>& reports);

}  // namespace attnsel::cli
