// Internal: DeepSeek-V3.2's indexer-cache backend (vLLM's DeepseekV32IndexerBackend,
// vllm/v1/attention/backends/mla/indexer.py). The model fixes it for every indexer layer;
// it is no member of the backend enums and is never selected, but it shares the KV cache,
// so it takes part in the block-size and layout rules of a plan. Its kernel is the lightning
// indexer of the host (wired in deepseek_v32_indexer_kernel.cpp): the CUDA one
// (src/kernels/sparse_mla/cuda) where this build has it and a device runs it, else the CPU one
// (src/kernels/sparse_mla/cpu).
#pragma once

#include <memory>

#include "attnsel/backend.hpp"

namespace attnsel::backends {

class DeepseekV32IndexerBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "DEEPSEEK_V32_INDEXER"; }
  std::string qualname() const override { return "attnsel::backends::DeepseekV32IndexerBackend"; }
  BackendCapabilities capabilities(const RuntimeEnv& env) const override;

  bool has_kernel() const override { return true; }
  /// The CPU indexer's (none) on the CPU; on a CUDA platform the CUDA indexer's (what it does
  /// not compute, or why it cannot run here); elsewhere, that the kernel runs on the CPU.
  std::vector<std::string> kernel_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env) const override;
  /// The indexer has no standard-attention form: NotImplementedError pointing to make_indexer_impl.
  std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const override;
  /// The host's indexer: the CUDA one where it runs, else the CPU one (KernelInfo says which).
  std::unique_ptr<kernel::IndexerImpl> make_indexer_impl(const kernel::IndexerLayerParams& params) const override;
  kernel::KernelInfo kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const override;
};

/// The one instance (immutable; thread-safe).
std::shared_ptr<const AttentionBackend> deepseek_v32_indexer_backend();

}  // namespace attnsel::backends
