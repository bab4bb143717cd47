// Internal: CPU_MLA's backend class (vLLM's CPUMLABackend). Declared in a header so that the
// kernel wiring (cpu_mla_kernel.cpp) can add has_kernel()/make_mla_impl()/kernel_gaps() to it.
#pragma once

#include "attnsel/backend.hpp"

namespace attnsel::backends {

/// vllm/v1/attention/backends/mla/cpu_mla.py.
class CPUMLABackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "CPU_MLA"; }
  std::string qualname() const override { return "attnsel::backends::CPUMLABackend"; }

  BackendCapabilities capabilities(const RuntimeEnv& env) const override;

  // The kernel (src/kernels/mla/cpu, wired in cpu_mla_kernel.cpp): every build has it.
  bool has_kernel() const override { return true; }
  std::vector<std::string> kernel_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env) const override;
  /// An MLA kernel has no standard-attention form: NotImplementedError pointing to make_mla_impl.
  std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const override;
  std::unique_ptr<kernel::MlaImpl> make_mla_impl(const kernel::MlaLayerParams& params) const override;
  kernel::KernelInfo kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const override;
};

}  // namespace attnsel::backends
