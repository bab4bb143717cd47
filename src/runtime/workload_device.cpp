#include "runtime/workload_device.hpp"

#include <fmt/format.h>


namespace attnsel::runtime {

kernel::DeviceKind workload_device(const kernel::KernelInfo& kernel) { return kernel.device; }

std::string device_label(kernel::DeviceKind device, int index) {
  return device == kernel::DeviceKind::cuda ? fmt::format("cuda:{}", index) : std::string("cpu");
}

}  // namespace attnsel::runtime
