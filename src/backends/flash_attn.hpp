// Internal: FLASH_ATTN's backend class (vLLM's FlashAttentionBackend). Declared in a header so
// that the kernel code can add has_kernel()/make_impl()/kernel_gaps() to it, and subclasses can
// extend it.
#pragma once

#include "attnsel/backend.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

/// vllm/v1/attention/backends/flash_attn.py. Most capabilities depend on the FlashAttention
/// version that resolves on the device (runtime_facts.hpp).
class FlashAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "FLASH_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::FlashAttentionBackend"; }

  BackendCapabilities capabilities(const RuntimeEnv& env) const override;

  // The kernel: attnsel's own CUDA kernels (src/kernels/cuda), in flash_attn_kernel.cpp.
  bool has_kernel() const override;
  std::string missing_kernel_reason() const override;
  std::vector<std::string> kernel_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env) const override;
  std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const override;
  kernel::KernelInfo kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const override;

 protected:
  /// vLLM's class attribute head_size_v: None for FLASH_ATTN, the V head size for DiffKV.
  virtual std::optional<int> head_size_v() const { return std::nullopt; }
  /// FA4's dedicated head-256 kernel pins the kernel page to 128 tokens for the served model.
  std::optional<int> fa4_hd256_block_size(const RuntimeEnv& env) const;
  /// get_flash_attn_version()'s query for the layer `args` describes: its head size, sinks and
  /// block size, FA4's head-256 kernel allowed.
  static FaVersionQuery layer_query(const CombinationArgs& args);
  /// supports_combination(), which a subclass may extend.
  virtual std::optional<std::string> combination_reason(const CombinationArgs& args, const RuntimeEnv& env) const;
};

}  // namespace attnsel::backends
