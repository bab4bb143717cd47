// Internal: TRITON_ATTN's backend class (vLLM's TritonAttentionBackend); the composites use it
// as their general (image-mask) child.
#pragma once

#include "attnsel/backend.hpp"

namespace attnsel::backends {

/// vllm/v1/attention/backends/triton_attn.py.
class TritonAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "TRITON_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::TritonAttentionBackend"; }

  std::vector<DType> supported_dtypes(const RuntimeEnv& env) const override;
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv& env) const override;
  bool forward_includes_kv_cache_update() const override { return false; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv& env) const override;
  bool supports_block_size(std::optional<int> block_size, const RuntimeEnv& env) const override;
  bool supports_head_size(int head_size, const RuntimeEnv& env) const override;
  bool supports_sink(const RuntimeEnv&) const override { return true; }
  bool supports_mm_prefix(const RuntimeEnv&) const override { return true; }
  bool supports_sliding_window(const RuntimeEnv&) const override { return true; }
  bool supports_non_causal(const RuntimeEnv&) const override { return true; }
  bool supports_batch_invariance(const RuntimeEnv&) const override { return true; }
  bool supports_rswa(const RuntimeEnv&) const override { return true; }
  bool supports_attn_type(AttentionType) const override { return true; }
  bool supports_alibi_sqrt() const override { return true; }
};

}  // namespace attnsel::backends
