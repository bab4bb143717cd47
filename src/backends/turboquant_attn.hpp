// Internal: TURBOQUANT's capability record, which its ULTRAQUANT subclass extends.
#pragma once

#include <vector>

#include "attnsel/capabilities.hpp"

namespace attnsel::backends {

/// vllm/v1/attention/backends/turboquant_attn.py, serving the given packed cache presets.
BackendCapabilities turboquant_capabilities(std::vector<CacheDType> kv_cache_dtypes);

}  // namespace attnsel::backends
