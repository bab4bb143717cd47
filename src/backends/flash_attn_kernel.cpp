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
const kernel::KernelEntry& flash_attn_cuda_entry() { return kernel::find_kernel("flash_attn_cuda"); }
}  // namespace

bool FlashAttentionBackend::has_kernel() const { return flash_attn_cuda_entry().unavailable_reason().empty(); }

std::string FlashAttentionBackend::missing_kernel_reason() const {
  return fmt::format("FLASH_ATTN's CUDA kernels cannot run here: {}", flash_attn_cuda_entry().unavailable_reason());
}

std::vector<std::string> FlashAttentionBackend::kernel_gaps(const AttentionSelectorConfig& config,
                                                            const RuntimeEnv& env) const {
  return flash_attn_cuda_entry().gaps(config, env);
}

std::unique_ptr<kernel::AttentionImpl> FlashAttentionBackend::make_impl(const kernel::LayerParams& params) const {
  return flash_attn_cuda_entry().make_attention(params);
}

kernel::KernelInfo FlashAttentionBackend::kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const {
  return flash_attn_cuda_entry().info(dtype, kv_cache_dtype);
}

}  // namespace attnsel::backends
