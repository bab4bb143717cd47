// DEEPSEEK_V32_INDEXER's kernel: the lightning indexer of the host, the kernel registry's
// "cuda_indexer" where this build has it and a device runs it, else "cpu_indexer".
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
const kernel::KernelEntry& cpu_indexer_entry() { return kernel::find_kernel("cpu_indexer"); }
const kernel::KernelEntry& cuda_indexer_entry() { return kernel::find_kernel("cuda_indexer"); }
// Whether the GPU indexer runs depends on the build and the host, both fixed for the process.
const kernel::KernelEntry& host_indexer_entry() {
  static const kernel::KernelEntry& entry =
      cuda_indexer_entry().unavailable_reason().empty() ? cuda_indexer_entry() : cpu_indexer_entry();
  return entry;
}
}  // namespace

std::vector<std::string> DeepseekV32IndexerBackend::kernel_gaps(const AttentionSelectorConfig& config,
                                                                const RuntimeEnv& env) const {
  if (env.device.kind != PlatformKind::cuda) return cpu_indexer_entry().gaps(config, env);
  std::vector<std::string> gaps;
  if (const std::string why = cuda_indexer_entry().unavailable_reason(); !why.empty())
    gaps.push_back(fmt::format("the lightning indexer's CUDA kernel cannot run here: {}", why));
  for (std::string& gap : cuda_indexer_entry().gaps(config, env)) gaps.push_back(std::move(gap));
  return gaps;
}

std::unique_ptr<kernel::AttentionImpl> DeepseekV32IndexerBackend::make_impl(const kernel::LayerParams&) const {
  throw NotImplementedError(fmt::format("{} runs DeepSeek-V3.2's lightning indexer: make its kernel with "
                                        "make_indexer_impl (kernel::IndexerLayerParams, attnsel/sparse_mla.hpp), not "
                                        "make_impl",
                                        get_name()));
}

std::unique_ptr<kernel::IndexerImpl> DeepseekV32IndexerBackend::make_indexer_impl(
    const kernel::IndexerLayerParams& params) const {
  return host_indexer_entry().make_indexer(params);
}

kernel::KernelInfo DeepseekV32IndexerBackend::kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const {
  return host_indexer_entry().info(dtype, kv_cache_dtype);
}

}  // namespace attnsel::backends
