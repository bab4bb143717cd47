// Internal: what the host has (an NVIDIA GPU through the driver, the CPU's ISA features).
#pragma once

#include <optional>
#include <string>

#include "attnsel/types.hpp"

namespace attnsel::platforms {

struct CudaDeviceInfo {
  std::string name;
  DeviceCapability capability;
  int device_count = 0;
};
/// Device 0 through libcuda.so.1 (dlopen); nullopt when there is no driver or no device.
std::optional<CudaDeviceInfo> detect_cuda_device();

struct CpuFeatures {
  bool avx2 = false;
  bool avx512f = false;
  bool avx512_bf16 = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  std::string describe() const;  ///< "AVX2 AVX-512 AVX-512-BF16"
};
CpuFeatures detect_cpu_features();

}  // namespace attnsel::platforms
