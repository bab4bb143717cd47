// Internal: CPU_MLA_SPARSE, attnsel's own backend class for DeepSeek-V3.2's sparse MLA on the
// CPU. vLLM has none (its CPU platform raises "Sparse Attention is not supported on CPU."),
// so this record is attnsel's: what its kernel (src/kernels/sparse_mla/cpu) computes. The CPU
// platform routes sparse layers to it in runnable mode only (docs/DECISIONS.md). Declared in
// a header so that the kernel wiring (cpu_mla_sparse_kernel.cpp) can add to it.
#pragma once

#include "attnsel/backend.hpp"

namespace attnsel::backends {

class CPUMLASparseBackend : public AttentionBackend {
 public:
  std::string get_name() const override { return "CPU_MLA_SPARSE"; }
  std::string qualname() const override { return "attnsel::backends::CPUMLASparseBackend"; }

  BackendCapabilities capabilities(const RuntimeEnv& env) const override;

  // The kernel (src/kernels/sparse_mla/cpu, wired in cpu_mla_sparse_kernel.cpp): every build has it.
  bool has_kernel() const override { return true; }
  std::vector<std::string> kernel_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env) const override;
  /// A sparse MLA kernel has no standard-attention form: NotImplementedError pointing to make_sparse_mla_impl.
  std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const override;
  std::unique_ptr<kernel::SparseMlaImpl> make_sparse_mla_impl(const kernel::SparseMlaLayerParams& params) const override;
  kernel::KernelInfo kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const override;
};

}  // namespace attnsel::backends
