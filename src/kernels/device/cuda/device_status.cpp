// Whether this build's CUDA kernels can run on this host (device_memory.hpp), for the CUDA build.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <string>

#include "kernels/device/cuda/device_memory.hpp"

namespace attnsel::kernel::cuda {

bool cuda_kernels_built() { return true; }

std::string cuda_kernels_unavailable_reason() {
  static const std::string reason = [] {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return fmt::format("no CUDA device: {}", cudaGetErrorString(err));
    }
    if (n == 0) return std::string("no CUDA device: the driver reports none");
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      return std::string("no CUDA device: its compute capability cannot be read");
    }
    if (major < 8) return fmt::format("attnsel's CUDA kernels need compute capability 8.0 or newer (device 0 is {}.x)", major);
    if (major > 9)
      return fmt::format("attnsel's CUDA kernels are built for sm_80 and sm_90a; compute capability {}.x has no kernel "
                         "image in this build",
                         major);
    return std::string();
  }();
  return reason;
}

}  // namespace attnsel::kernel::cuda
