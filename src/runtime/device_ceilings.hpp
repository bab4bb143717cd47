// The GPU's ceiling measured in the same run as a GPU job or benchmark: device-memory read
// bandwidth (a read-only kernel over a buffer far larger than the L2 cache, timed with
// CUDA events). There is no GPU compute probe: prefill on a GPU is reported in TFLOP/s
// without a fraction rather than against a CPU peak or a datasheet figure.
// Thread-safety: not synchronised (it measures the whole device).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace attnsel::kernel::cuda {
class DeviceBuffer;
}

namespace attnsel::runtime {

struct DeviceCeilings {
  std::string device;      ///< e.g. "NVIDIA H200 (sm_90, 132 SMs)"
  double read_gbps = 0.0;  ///< GB/s (1e9 bytes per second)
};

/// A read pass over a device buffer, kept allocated so passes can be interleaved with the
/// work they measure. Throws NotImplementedError without a usable GPU.
class DeviceReadProbe {
 public:
  explicit DeviceReadProbe(std::size_t bytes = std::size_t{2} << 30);
  ~DeviceReadProbe();
  DeviceReadProbe(const DeviceReadProbe&) = delete;
  DeviceReadProbe& operator=(const DeviceReadProbe&) = delete;
  /// GB/s: the median of `reps` timed passes (after two untimed ones).
  double measure(int reps = 1);
  /// Queues one untimed pass and returns at once: the L2 cache holds none of the work's
  /// data afterwards, and the host's launches of the timed work overlap this pass instead of
  /// leaving the GPU idle inside the timed region.
  void evict_async();

 private:
  std::unique_ptr<kernel::cuda::DeviceBuffer> buf_;
};

/// The device's name and its read bandwidth (median of 5 passes over `bytes`).
DeviceCeilings measure_device_ceilings(std::size_t bytes = std::size_t{2} << 30);

}  // namespace attnsel::runtime
