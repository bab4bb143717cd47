// How `attnsel plan` prints a whole-model plan: the table, the explanation, the JSON
// object, and the cross-platform matrix of --compare.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "attnsel/model.hpp"
#include "attnsel/plan.hpp"
#include "report/plan_json.hpp"

namespace attnsel::cli {

/// The plan as a table of groups, with the block size, layout and cache sizes below it.
std::string render_plan_text(const ModelSpec& model, const ModelPlan& plan);
/// The reasons behind each choice: every group's selector inputs and candidates, the block
/// size rule, the layout resolution, the logged warnings.
std::string render_plan_explanation(const ModelPlan& plan);
using report::plan_json;

/// One platform's outcome for --compare: a plan, or the error with the partial plan.
struct PlatformOutcome {
  std::string platform;
  std::optional<ModelPlan> plan;  ///< the full plan, or the partial one of a failure
  std::optional<std::string> error;
};

std::string render_compare_text(const ModelSpec& model, const std::vector<PlatformOutcome>& outcomes);
nlohmann::json compare_json(const ModelSpec& model, const std::vector<PlatformOutcome>& outcomes);

/// "1,234,567".
std::string with_thousands(std::int64_t n);

}  // namespace attnsel::cli
