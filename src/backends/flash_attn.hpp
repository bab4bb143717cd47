// Internal: FLASH_ATTN's backend class (vLLM's FlashAttentionBackend). Declared in a header so
// that the kernel code can add has_kernel()/make_impl()/kernel_gaps() to it.
#pragma once

#include "attnsel/backend.hpp"

namespace attnsel::backends {

/// vllm/v1/attention/backends/flash_attn.py. Most capabilities depend on the FlashAttention
/// version that resolves on the device (runtime_facts.hpp).
class FlashAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASH_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::FlashAttentionBackend"; }

  std::vector<DType> supported_dtypes(const RuntimeEnv& env) const override;
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv& env) const override;
  bool forward_includes_kv_cache_update() const override { return false; }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv& env) const override;
  int get_preferred_block_size(int default_block_size, const RuntimeEnv& env) const override;
  bool supports_kv_cache_dtype(const std::optional<std::string>& d, const RuntimeEnv& env) const override;
  bool supports_head_size(int head_size, const RuntimeEnv& env) const override;
  bool supports_sink(const RuntimeEnv& env) const override;
  bool supports_mm_prefix(const RuntimeEnv& env) const override;
  bool supports_per_head_quant_scales(const RuntimeEnv& env) const override;
  bool supports_sliding_window(const RuntimeEnv&) const override { return true; }
  bool supports_non_causal(const RuntimeEnv&) const override { return true; }
  bool supports_batch_invariance(const RuntimeEnv&) const override { return true; }
  bool supports_dcp() const override { return true; }
  bool supports_attn_type(AttentionType) const override { return true; }
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv& env) const override;
  std::optional<std::string> supports_combination(const CombinationArgs& args, const RuntimeEnv& env) const override;

  // The kernel: attnsel's own CUDA kernels (src/kernels/cuda), in flash_attn_kernel.cpp.
  bool has_kernel() const override;
  std::string missing_kernel_reason() const override;
  std::vector<std::string> kernel_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env) const override;
  std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const override;
  kernel::KernelInfo kernel_info(kernel::ScalarType dtype, const std::string& kv_cache_dtype) const override;

 protected:
  /// vLLM's class attribute head_size_v: None for FLASH_ATTN, the V head size for DiffKV.
  virtual std::optional<int> head_size_v() const { return std::nullopt; }
  /// FA4's dedicated head-256 kernel pins the kernel page to 128 tokens for the served model.
  std::optional<int> fa4_hd256_block_size(const RuntimeEnv& env) const;
};

}  // namespace attnsel::backends
