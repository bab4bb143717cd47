// The platform's automatic priority lists for the main layer configurations, and what the
// automatic path chooses for each: `attnsel list --priorities` and docs/priorities.md.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "attnsel/platform.hpp"

namespace attnsel::cli {

struct PriorityReport {
  std::string label;                  ///< "dense decoder, head 128, bfloat16"
  AttentionSelectorConfig config;
  std::optional<int> num_heads;
  std::vector<std::string> priorities;  ///< Platform::backend_priorities; empty = routed without a list
  std::string chosen;                   ///< the automatic choice, empty on failure
  std::string error;                    ///< the selection error, empty on success
};

/// One report per main configuration, in a fixed order.
std::vector<PriorityReport> report_priorities(const Platform& platform);

nlohmann::ordered_json to_json(const PriorityReport& r);
std::string render_text(const Platform& platform, const std::vector<PriorityReport>& reports);
std::string render_markdown(const Platform& platform, const std::vector<PriorityReport>& reports);

}  // namespace attnsel::cli
