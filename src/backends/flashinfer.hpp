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

  std::vector<DType> supported_dtypes(const RuntimeEnv& env) const override;
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv& env) const override;
  bool forward_includes_kv_cache_update() const override { return false; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv& env) const override;
  std::vector<int> get_supported_head_sizes(const RuntimeEnv& env) const override;
  bool supports_sink(const RuntimeEnv& env) const override;
  /// Served through FlashInfer's JIT mm-prefix variant; supports_combination has its limits.
  bool supports_mm_prefix(const RuntimeEnv&) const override { return true; }
  bool supports_sliding_window(const RuntimeEnv&) const override { return true; }
  bool supports_non_causal(const RuntimeEnv&) const override { return true; }
  bool supports_dcp() const override { return true; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv& env) const override;
  std::optional<std::string> supports_combination(const CombinationArgs& args, const RuntimeEnv& env) const override;
  /// vLLM's override: mm-prefix attention cannot run with DCP.
  std::vector<std::string> validate_configuration(const AttentionSelectorConfig& config,
                                                  const RuntimeEnv& env) const override;
};

}  // namespace attnsel::backends
