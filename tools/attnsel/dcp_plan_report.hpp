// `attnsel plan --decode-context-parallel-size R`: how one sequence's KV cache divides
// among the DCP ranks (vLLM's interleave rule), in bytes per rank, and whether vLLM would
// accept the head and block-size configuration.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "attnsel/model.hpp"
#include "attnsel/plan.hpp"

namespace attnsel::cli {

struct DcpPlanRequest {
  int size = 1;                  ///< --decode-context-parallel-size
  int interleave = 1;            ///< --cp-kv-cache-interleave-size
  std::int64_t seq_len = 131072;  ///< --max-model-len: the sequence whose cache is divided
};

/// Text lines for the plan's summary (empty when size is 1).
std::string render_dcp_text(const ModelSpec& model, const ModelPlan& plan, const DcpPlanRequest& r);
/// The same as one JSON object (null when size is 1).
nlohmann::json dcp_json(const ModelSpec& model, const ModelPlan& plan, const DcpPlanRequest& r);

}  // namespace attnsel::cli
