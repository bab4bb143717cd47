// `attnsel plan --decode-context-parallel-size R`: whether vLLM accepts the configuration
// (its head rules and its interleave rule, refused with vLLM's reason as vLLM refuses them
// at start-up), and how one sequence's KV cache divides among the DCP ranks, in bytes per
// rank.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "attnsel/model.hpp"
#include "attnsel/plan.hpp"

namespace attnsel::cli {

struct DcpPlanRequest {
  int size = 1;                  ///< --decode-context-parallel-size
  int interleave = 1;            ///< --cp-kv-cache-interleave-size
  std::int64_t seq_len = 131072;  ///< --max-model-len: the sequence whose cache is divided
};

/// vLLM's head rules for the model's attention layers under DCP with this tensor-parallel
/// size (ModelConfig.verify_with_parallel_config): the broken rule's message, or nullopt.
std::optional<std::string> dcp_head_problem(const ModelSpec& model, int tensor_parallel_size, const DcpPlanRequest& r);
/// ValueError, with vLLM's reason, for an interleave size the plan's block size does not
/// allow (vllm/config/parallel.py), and for a rank's share of the --max-model-len sequence
/// whose bytes do not fit in 64 bits; nothing for size 1.
void check_dcp_plan(const ModelPlan& plan, const DcpPlanRequest& r);

/// Text lines for the plan's summary (empty when size is 1), for a plan check_dcp_plan accepts.
std::string render_dcp_text(const ModelSpec& model, const ModelPlan& plan, const DcpPlanRequest& r);
/// The same as one JSON object (null when size is 1).
nlohmann::json dcp_json(const ModelSpec& model, const ModelPlan& plan, const DcpPlanRequest& r);

}  // namespace attnsel::cli
