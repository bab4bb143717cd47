// The JSON form of a whole-model plan, as `attnsel plan --json` prints it and the C API
// returns it.
#pragma once

#include <nlohmann/json.hpp>

#include "attnsel/model.hpp"
#include "attnsel/plan.hpp"

namespace attnsel::report {

/// {"model", "platform", "mode", "dtype", "kv_cache_dtype", "tensor_parallel_size", "groups",
///  "block_size", "layout", "kv_bytes_per_token", ..., "warnings"}.
nlohmann::json plan_json(const ModelSpec& model, const ModelPlan& plan);

}  // namespace attnsel::report
