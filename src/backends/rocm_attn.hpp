// Internal: ROCM_ATTN's capability record, which its ROCM_SEGMENTED_ATTN subclass extends.
#pragma once

#include "attnsel/capabilities.hpp"

namespace attnsel::backends {

/// vllm/v1/attention/backends/rocm_attn.py.
BackendCapabilities rocm_attention_capabilities();

}  // namespace attnsel::backends
