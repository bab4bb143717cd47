// Internal: vLLM's per-architecture config hooks (verify_and_update_config in
// vllm/model_executor/models/config.py) that change what selection sees.
#pragma once

#include <vector>

#include "attnsel/engine_args.hpp"
#include "attnsel/model.hpp"
#include "attnsel/platform.hpp"

namespace attnsel::model {

/// The engine options after the model's hooks; each change is logged in `logs`.
EngineOptions apply_model_hooks(const ModelSpec& model, const EngineOptions& options, std::vector<LogLine>& logs);

}  // namespace attnsel::model
