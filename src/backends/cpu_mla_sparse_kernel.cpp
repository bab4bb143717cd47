// CPU_MLA_SPARSE's kernel: the CPU sparse MLA implementation (the kernel registry's
// "cpu_sparse_mla").
#include <fmt/format.h>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/sparse_mla.hpp"
#include "backends/cpu_mla_sparse.hpp"
#include "kernels/registry/kernel_registry.hpp"

namespace attnsel::backends {

namespace {
const kernel::KernelEntry& cpu_sparse_mla_entry() { return kernel::find_kernel("cpu_sparse_mla"); }
}  // namespace

// The record declares what the kernel computes, so nothing it accepts is a gap.
std::vector<std::string> CPUMLASparseBackend::kernel_gaps(const AttentionSelectorConfig& config,
                                                          const RuntimeEnv& env) const {
  return cpu_sparse_mla_entry().gaps(config, env);
}

std::unique_ptr<kernel::AttentionImpl> CPUMLASparseBackend::make_impl(const kernel::LayerParams&) const {
  throw NotImplementedError(fmt::format("{} runs sparse multi-head latent attention: make its kernel with "
                                        "make_sparse_mla_impl (kernel::SparseMlaLayerParams, attnsel/sparse_mla.hpp), "
                                        "not make_impl",
                                        get_name()));
}

std::unique_ptr<kernel::SparseMlaImpl> CPUMLASparseBackend::make_sparse_mla_impl(
    const kernel::SparseMlaLayerParams& params) const {
  return cpu_sparse_mla_entry().make_sparse_mla(params);
}

kernel::KernelInfo CPUMLASparseBackend::kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const {
  return cpu_sparse_mla_entry().info(dtype, kv_cache_dtype);
}

}  // namespace attnsel::backends
