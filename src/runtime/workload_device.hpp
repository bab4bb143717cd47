// Where a run's tensors live: `attnsel run` and `attnsel bench` build their synthetic
// workload in the memory the chosen backend's kernel reads, as its kernel declares it
// (see docs/DECISIONS.md for plugins).
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "attnsel/kernel.hpp"

namespace attnsel::runtime {

/// Where a backend's kernel reads its tensors, as the kernel declares it
/// (AttentionBackend::kernel_info): device memory for attnsel's CUDA kernels, host memory
/// for the CPU kernels and for backends that declare nothing (plugins, whose ABI does not
/// say where their kernel runs).
kernel::DeviceKind workload_device(const kernel::KernelInfo& kernel);

/// "cpu" or "cuda:0".
std::string device_label(kernel::DeviceKind device, int index = 0);

}  // namespace attnsel::runtime
