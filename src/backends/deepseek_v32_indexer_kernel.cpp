// DEEPSEEK_V32_INDEXER's kernel: the CPU lightning indexer (the kernel registry's
// "cpu_indexer"); on a CUDA platform the GPU indexer ("cuda_indexer") would run it, and its
// gaps say why it does not yet.
#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/sparse_mla.hpp"
#include "backends/deepseek_v32_indexer.hpp"
#include "kernels/registry/kernel_registry.hpp"

namespace attnsel::backends {

namespace {
const kernel::KernelEntry& cpu_kernel() { return kernel::find_kernel("cpu_indexer"); }
const kernel::KernelEntry& cuda_kernel() { return kernel::find_kernel("cuda_indexer"); }
}  // namespace

std::vector<std::string> DeepseekV32IndexerBackend::kernel_gaps(const AttentionSelectorConfig& config,
                                                                const RuntimeEnv& env) const {
  if (env.device.kind != PlatformKind::cuda) return cpu_kernel().gaps(config, env);
  std::vector<std::string> gaps;
  if (const std::string why = cuda_kernel().unavailable_reason(); !why.empty())
    gaps.push_back(fmt::format("the lightning indexer's CUDA kernel cannot run here: {}", why));
  for (std::string& gap : cuda_kernel().gaps(config, env)) gaps.push_back(std::move(gap));
  return gaps;
}

std::unique_ptr<kernel::AttentionImpl> DeepseekV32IndexerBackend::make_impl(const kernel::LayerParams&) const {
  throw NotImplementedError(fmt::format("{} runs DeepSeek-V3.2's lightning indexer: make its kernel with "
                                        "make_indexer_impl (kernel::IndexerLayerParams, attnsel/sparse_mla.hpp), not "
                                        "make_impl",
                                        get_name()));
}

// The CPU indexer on every platform: the CUDA one is made through the kernel registry
// ("cuda_indexer") until it has passed its tests on an H200 and selection takes it.
std::unique_ptr<kernel::IndexerImpl> DeepseekV32IndexerBackend::make_indexer_impl(
    const kernel::IndexerLayerParams& params) const {
  return cpu_kernel().make_indexer(params);
}

kernel::KernelInfo DeepseekV32IndexerBackend::kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const {
  return cpu_kernel().info(dtype, kv_cache_dtype);
}

}  // namespace attnsel::backends
