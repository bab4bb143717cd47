#include "backends/cuda_sparse_mla_backend.hpp"

#include <fmt/format.h>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/sparse_mla.hpp"
#include "kernels/registry/kernel_registry.hpp"

namespace attnsel::backends {

namespace {
const kernel::KernelEntry& cuda_sparse_mla_entry() { return kernel::find_kernel("cuda_sparse_mla"); }
}  // namespace

bool CudaSparseMlaBackend::has_kernel() const { return cuda_sparse_mla_entry().unavailable_reason().empty(); }

std::string CudaSparseMlaBackend::missing_kernel_reason() const {
  return fmt::format("{}'s CUDA kernel cannot run here: {}", get_name(), cuda_sparse_mla_entry().unavailable_reason());
}

std::vector<std::string> CudaSparseMlaBackend::kernel_gaps(const AttentionSelectorConfig& config,
                                                           const RuntimeEnv& env) const {
  return cuda_sparse_mla_entry().gaps(config, env);
}

std::unique_ptr<kernel::AttentionImpl> CudaSparseMlaBackend::make_impl(const kernel::LayerParams&) const {
  throw NotImplementedError(
      fmt::format("{} runs sparse multi-head latent attention: make its kernel with "
                  "make_sparse_mla_impl (kernel::SparseMlaLayerParams, attnsel/sparse_mla.hpp), "
                  "not make_impl",
                  get_name()));
}

std::unique_ptr<kernel::SparseMlaImpl> CudaSparseMlaBackend::make_sparse_mla_impl(
    const kernel::SparseMlaLayerParams& params) const {
  return cuda_sparse_mla_entry().make_sparse_mla(params);
}

kernel::KernelInfo CudaSparseMlaBackend::kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const {
  return cuda_sparse_mla_entry().info(dtype, kv_cache_dtype);
}

}  // namespace attnsel::backends
