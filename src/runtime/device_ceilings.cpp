#include "runtime/device_ceilings.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"

namespace attnsel::runtime {

DeviceReadProbe::DeviceReadProbe(std::size_t bytes) {
  if (const std::string why = kernel::cuda::cuda_kernels_unavailable_reason(); !why.empty())
    throw NotImplementedError(fmt::format("no GPU read-bandwidth probe: {}", why));
  buf_ = std::make_unique<kernel::cuda::DeviceBuffer>(bytes);
  buf_->fill_bytes(0x3C);  // not zeros: nothing may run faster on them
}

DeviceReadProbe::~DeviceReadProbe() = default;

double DeviceReadProbe::measure(int reps) { return kernel::cuda::measure_read_bandwidth(*buf_, std::max(1, reps)); }

void DeviceReadProbe::evict_async() { kernel::cuda::flush_l2(*buf_); }

DeviceCeilings measure_device_ceilings(std::size_t bytes) {
  DeviceReadProbe probe(bytes);
  const kernel::cuda::DeviceInfo d = kernel::cuda::device_info(0);
  DeviceCeilings c;
  c.device = fmt::format("{} (sm_{}{}, {} SMs)", d.name, d.major, d.minor, d.multiprocessors);
  c.read_gbps = probe.measure(5);
  return c;
}

}  // namespace attnsel::runtime
