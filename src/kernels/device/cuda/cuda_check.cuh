// Internal: CUDA error checks that name the kernel and its configuration, and the raise of a
// kernel's dynamic shared-memory limit, shared by every family's CUDA kernels.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>

#include "kernels/device/cuda/cuda_error.hpp"

namespace attnsel::kernel::cuda {

/// "{}"-style formatting for configuration strings (fmt's headers do not build under nvcc).
template <class... A>
std::string cfg_string(const char* f, const A&... a) {
  std::ostringstream out;
  auto put = [&](const auto& v) {
    while (*f && !(f[0] == '{' && f[1] == '}')) out << *f++;
    if (*f) f += 2;
    out << v;
  };
  (put(a), ...);
  out << f;
  return out.str();
}

/// Checks a launch (and, in debug builds of the tests, nothing more: kernels run async).
inline void check_launch(const char* kernel, const std::string& config) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), kernel, config);
}

inline void check_cuda(cudaError_t err, const char* what, const std::string& config) {
  if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), what, config);
}

/// Launch checks whose configuration text is built only on failure: a layer's launch
/// formats nothing on the way (the host's cost per launch is what a decode step is made of).
template <class Cfg>
void check_launch_lazy(const char* kernel, const Cfg& config) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), kernel, config());
}

/// Raises a kernel's dynamic shared-memory limit on the current device the first time it is
/// launched there (`done`: one bit per device, a static of the kernel's launcher).
template <class K, class Cfg>
void set_max_smem_once(std::atomic<std::uint64_t>& done, K kernel, int bytes, const char* what, const Cfg& config) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) device = 63;
  const std::uint64_t bit = std::uint64_t{1} << device;
  if (done.load(std::memory_order_acquire) & bit) return;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err != cudaSuccess) throw_cuda_error(static_cast<int>(err), what, config());
  done.fetch_or(bit, std::memory_order_acq_rel);
}

}  // namespace attnsel::kernel::cuda
