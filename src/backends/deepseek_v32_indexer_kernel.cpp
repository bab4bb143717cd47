// DEEPSEEK_V32_INDEXER's kernel: the CPU lightning indexer (the kernel registry's "cpu_indexer").
#include <fmt/format.h>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/sparse_mla.hpp"
#include "backends/deepseek_v32_indexer.hpp"
#include "kernels/registry/kernel_registry.hpp"

namespace attnsel::backends {

namespace {
const kernel::KernelEntry& cpu_kernel() { return kernel::find_kernel("cpu_indexer"); }
}  // namespace

std::vector<std::string> DeepseekV32IndexerBackend::kernel_gaps(const AttentionSelectorConfig& config,
                                                                const RuntimeEnv& env) const {
  return cpu_kernel().gaps(config, env);
}

std::unique_ptr<kernel::AttentionImpl> DeepseekV32IndexerBackend::make_impl(const kernel::LayerParams&) const {
  throw NotImplementedError(fmt::format("{} runs DeepSeek-V3.2's lightning indexer: make its kernel with "
                                        "make_indexer_impl (kernel::IndexerLayerParams, attnsel/sparse_mla.hpp), not "
                                        "make_impl",
                                        get_name()));
}

std::unique_ptr<kernel::IndexerImpl> DeepseekV32IndexerBackend::make_indexer_impl(
    const kernel::IndexerLayerParams& params) const {
  return cpu_kernel().make_indexer(params);
}

kernel::KernelInfo DeepseekV32IndexerBackend::kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const {
  return cpu_kernel().info(dtype, kv_cache_dtype);
}

}  // namespace attnsel::backends
