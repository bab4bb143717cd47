// FLASH_ATTN's kernel: attnsel's CUDA kernels (the kernel registry's "flash_attn_cuda") when
// this build has them and the host has a device; what FLASH_ATTN declares but they do not
// compute is a kernel gap.
#include <fmt/format.h>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/kernel.hpp"
#include "backends/flash_attn.hpp"
#include "kernels/registry/kernel_registry.hpp"

namespace attnsel::backends {

namespace {
const kernel::KernelEntry& cuda_kernel() { return kernel::find_kernel("flash_attn_cuda"); }
}  // namespace

bool FlashAttentionBackend::has_kernel() const { return cuda_kernel().unavailable_reason().empty(); }

std::string FlashAttentionBackend::missing_kernel_reason() const {
  return fmt::format("FLASH_ATTN's CUDA kernels cannot run here: {}", cuda_kernel().unavailable_reason());
}

std::vector<std::string> FlashAttentionBackend::kernel_gaps(const AttentionSelectorConfig& config,
                                                            const RuntimeEnv& env) const {
  return cuda_kernel().gaps(config, env);
}

std::unique_ptr<kernel::AttentionImpl> FlashAttentionBackend::make_impl(const kernel::LayerParams& params) const {
  return cuda_kernel().make_attention(params);
}

kernel::KernelInfo FlashAttentionBackend::kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const {
  return cuda_kernel().info(dtype, kv_cache_dtype);
}

}  // namespace attnsel::backends
