// Where a run's tensors live: `attnsel run` and `attnsel bench` build their synthetic
// workload in the memory the chosen backend's kernel reads — device memory for attnsel's
// own CUDA kernels (FLASH_ATTN), host memory for everything else (the CPU kernels, and
// plugins, whose ABI does not say where their kernel runs; see docs/DECISIONS.md).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "attnsel/kernel.hpp"

namespace attnsel::runtime {

/// cuda when `backend` is a built-in backend whose kernel is one of attnsel's CUDA kernels
/// (`builtin_class`: the selection's class is the one attnsel registers for that name, not
/// a plugin's override); cpu otherwise.
kernel::DeviceKind workload_device(std::string_view backend, bool builtin_class);

/// "cpu" or "cuda:0".
std::string device_label(kernel::DeviceKind device, int index = 0);

}  // namespace attnsel::runtime
