// Internal: the DeepSeek V4 sparse MLA records, which the V4.1 backends extend.
#pragma once

#include "attnsel/capabilities.hpp"

namespace attnsel::backends {

/// DeepseekV4FlashMLABackend (FLASHMLA_SPARSE_DSV4).
BackendCapabilities deepseek_v4_flashmla_capabilities();
/// DeepseekV4FlashInferMLASparseBackend (FLASHINFER_MLA_SPARSE_DSV4).
BackendCapabilities deepseek_v4_flashinfer_mla_sparse_capabilities();

}  // namespace attnsel::backends
