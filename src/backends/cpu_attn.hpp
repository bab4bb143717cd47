// Internal: CPU_ATTN's backend class (vLLM's CPUAttentionBackend). Declared in a header so
// that the CPU kernel code can add has_kernel()/make_impl()/kernel_gaps() to it.
#pragma once

#include "attnsel/backend.hpp"

namespace attnsel::backends {

/// vllm/v1/attention/backends/cpu_attn.py.
class CPUAttentionBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "CPU_ATTN"; }
  std::string qualname() const override { return "attnsel::backends::CPUAttentionBackend"; }

  BackendCapabilities capabilities(const RuntimeEnv& env) const override;

  // The kernel (src/kernels/cpu, wired in cpu_attn_kernel.cpp): every build has it.
  bool has_kernel() const override { return true; }
  std::vector<std::string> kernel_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env) const override;
  std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const override;
  kernel::KernelInfo kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const override;
};

}  // namespace attnsel::backends
