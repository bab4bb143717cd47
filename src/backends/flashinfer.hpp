// Internal: FLASHINFER's backend class (vLLM's FlashInferBackend); the TRITON_FLASHINFER
// composite uses it as its causal child.
#pragma once

#include "attnsel/backend.hpp"

namespace attnsel::backends {

/// vllm/v1/attention/backends/flashinfer.py.
class FlashInferBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASHINFER"; }
  std::string qualname() const override { return "attnsel::backends::FlashInferBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override;
};

}  // namespace attnsel::backends
