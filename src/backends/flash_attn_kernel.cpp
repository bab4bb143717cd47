// FLASH_ATTN's kernel: attnsel's CUDA kernels when this build has them and the host has a
// device; what FLASH_ATTN declares but they do not compute is a kernel gap.
#include <fmt/format.h>

#include "attnsel/kernel.hpp"
#include "backends/flash_attn.hpp"
#include "kernels/cuda/flash_attn_cuda.hpp"

namespace attnsel::backends {

bool FlashAttentionBackend::has_kernel() const {
  return kernel::cuda::cuda_kernels_built() && kernel::cuda::cuda_kernels_unavailable_reason().empty();
}

std::string FlashAttentionBackend::missing_kernel_reason() const {
  return fmt::format("FLASH_ATTN's CUDA kernels cannot run here: {}", kernel::cuda::cuda_kernels_unavailable_reason());
}

std::vector<std::string> FlashAttentionBackend::kernel_gaps(const AttentionSelectorConfig& config,
                                                            const RuntimeEnv& env) const {
  return kernel::cuda::flash_attn_cuda_gaps(config, env);
}

std::unique_ptr<kernel::AttentionImpl> FlashAttentionBackend::make_impl(const kernel::LayerParams& params) const {
  return kernel::cuda::make_flash_attn_cuda_impl(params);
}

kernel::KernelInfo FlashAttentionBackend::kernel_info(kernel::ScalarType, const std::string&) const {
  kernel::KernelInfo k = kernel::cuda::flash_attn_cuda_kernel_info();
  k.available = has_kernel();
  return k;
}

}  // namespace attnsel::backends
