// Internal: TRITON_ATTN's backend class (vLLM's TritonAttentionBackend); the composites use it
// as their general (image-mask) child, and TRITON_ATTN_DIFFKV extends its record.
#pragma once

#include "attnsel/backend.hpp"

namespace attnsel::backends {

/// vllm/v1/attention/backends/triton_attn.py.
class TritonAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "TRITON_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::TritonAttentionBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override;
};

}  // namespace attnsel::backends
