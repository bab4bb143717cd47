// Internal: DeepSeek-V3.2's indexer-cache backend (vLLM's DeepseekV32IndexerBackend). The
// model fixes it for every indexer layer; it is no member of the backend enums and is never
// selected, but it shares the KV cache, so it takes part in the block-size and layout rules.
#pragma once

#include <memory>

#include "attnsel/backend.hpp"

namespace attnsel::model {

/// The one instance (immutable; thread-safe).
std::shared_ptr<const AttentionBackend> deepseek_v32_indexer_backend();

/// Bytes of one token's indexer key: fp8 values plus one float32 scale per 128 values.
int indexer_bytes_per_token(int index_head_dim);

}  // namespace attnsel::model
