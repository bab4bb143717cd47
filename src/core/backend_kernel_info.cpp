// AttentionBackend::kernel_info's default: what is known of a kernel without asking it.
#include "attnsel/backend.hpp"
#include "attnsel/kernel.hpp"

namespace attnsel {

kernel::KernelInfo AttentionBackend::kernel_info(kernel::ScalarType, CacheDType) const {
  kernel::KernelInfo k;
  k.available = has_kernel();
  return k;
}

}  // namespace attnsel
