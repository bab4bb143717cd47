#include "runtime/workload_device.hpp"

#include <fmt/format.h>

#include <array>

namespace attnsel::runtime {

namespace {
// Built-in backends whose make_impl returns a kernel over device memory.
constexpr std::array<std::string_view, 1> kCudaKernelBackends = {"FLASH_ATTN"};
}  // namespace

kernel::DeviceKind workload_device(std::string_view backend, bool builtin_class) {
  if (!builtin_class) return kernel::DeviceKind::cpu;
  for (std::string_view b : kCudaKernelBackends)
    if (b == backend) return kernel::DeviceKind::cuda;
  return kernel::DeviceKind::cpu;
}

std::string device_label(kernel::DeviceKind device, int index) {
  return device == kernel::DeviceKind::cuda ? fmt::format("cuda:{}", index) : std::string("cpu");
}

}  // namespace attnsel::runtime
