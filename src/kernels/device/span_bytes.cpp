// span_bytes (device_memory.hpp): plain host arithmetic, in every build with or without CUDA.
#include "kernels/device/cuda/device_memory.hpp"

namespace attnsel::kernel::cuda {

std::size_t span_bytes(const TensorView& t) {
  std::int64_t last = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) return 0;
    last += (t.shape[d] - 1) * t.stride[d];
  }
  return static_cast<std::size_t>(last + 1) * element_size(t.dtype);
}

}  // namespace attnsel::kernel::cuda
