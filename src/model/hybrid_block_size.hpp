// Internal: vLLM's block-size alignment for hybrid attention + Mamba models
// (Platform._align_hybrid_block_size in vllm/platforms/interface.py, run by
// update_block_size_for_backend after the backends are known): the attention block size
// grows until one attention page holds a Mamba state page, and the Mamba page is padded to
// the attention page.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "attnsel/backend.hpp"
#include "attnsel/platform.hpp"

namespace attnsel::model {

struct HybridAlignment {
  int block_size = 0;                               ///< the block size after alignment
  std::int64_t attn_page_bytes_per_token = 0;       ///< the attention page of one token
  std::int64_t mamba_page_bytes = 0;                ///< one Mamba-like layer's state
  std::optional<std::int64_t> mamba_page_padded;    ///< the padded Mamba page, when padding was needed
  std::vector<LogLine> logs;                        ///< vLLM's info lines
};

/// `block_size` is the size update_block_size_for_backend chose before (the user's, or the
/// backend's preference); `backend` is the first non-SSM backend. Mamba cache mode "none":
/// vLLM leaves prefix caching off by default for hybrid models.
HybridAlignment align_hybrid_block_size(int block_size, std::int64_t attn_page_bytes_per_token,
                                        std::int64_t mamba_page_bytes, const AttentionBackend& backend,
                                        const RuntimeEnv& env);

}  // namespace attnsel::model
