// Internal: the kernel side FLASHMLA_SPARSE and FLASH_ATTN_MLA_SPARSE share: attnsel's sparse
// MLA CUDA kernel (the kernel registry's "cuda_sparse_mla", src/kernels/sparse_mla/cuda) when
// this build has it and the host has a device. What a configuration asks that the kernel does
// not compute is a kernel gap, so runnable mode rejects the backend and says why.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attnsel/backend.hpp"

namespace attnsel::backends {

class CudaSparseMlaBackend : public AttentionBackend {
 public:
  bool has_kernel() const override;
  std::string missing_kernel_reason() const override;
  std::vector<std::string> kernel_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env) const override;
  /// A sparse MLA kernel has no standard-attention form: NotImplementedError pointing to make_sparse_mla_impl.
  std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const override;
  std::unique_ptr<kernel::SparseMlaImpl> make_sparse_mla_impl(
      const kernel::SparseMlaLayerParams& params) const override;
  kernel::KernelInfo kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const override;
};

}  // namespace attnsel::backends
