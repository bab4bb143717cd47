// Internal: DeepSeek-V3.2's indexer-cache backend (vLLM's DeepseekV32IndexerBackend,
// vllm/v1/attention/backends/mla/indexer.py). The model fixes it for every indexer layer;
// it is no member of the backend enums and is never selected, but it shares the KV cache,
// so it takes part in the block-size and layout rules of a plan.
#pragma once

#include <memory>

#include "attnsel/backend.hpp"

namespace attnsel::backends {

/// The one instance (immutable; thread-safe).
std::shared_ptr<const AttentionBackend> deepseek_v32_indexer_backend();

}  // namespace attnsel::backends
