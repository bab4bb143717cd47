// throw_cuda_error (cuda_error.hpp), for the CUDA build.
#include "kernels/device/cuda/cuda_error.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "attnsel/errors.hpp"

namespace attnsel::kernel::cuda {

[[noreturn]] void throw_cuda_error(int code, const char* what, const std::string& config) {
  const auto err = static_cast<cudaError_t>(code);
  throw RuntimeError(fmt::format("CUDA error in {}: {} ({}){}{}", what, cudaGetErrorString(err), cudaGetErrorName(err),
                                 config.empty() ? "" : "; configuration: ", config));
}

}  // namespace attnsel::kernel::cuda
