// Small host-side helpers over the CUDA runtime for the tests, the benchmark and the tools
// (no CUDA headers here): device buffers, synchronisation that reports errors, device
// facts, event timing and an L2 flush. Without CUDA each throws NotImplementedError.
//
// Thread-safety: a DeviceBuffer is not shared between threads; the free functions are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "attnsel/kernel.hpp"

namespace attnsel::kernel::cuda {

/// True when this build contains the CUDA kernels.
bool cuda_kernels_built();
/// Empty when the kernels can run here; else why not ("attnsel was built without CUDA
/// (nvcc not found)", "no CUDA device: ...").
std::string cuda_kernels_unavailable_reason();

/// Owning device allocation (cudaMalloc). Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const;
  /// Sets every byte (e.g. 0xFF poisons 16-bit outputs with NaNs).
  void fill_bytes(std::uint8_t value);

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;
  int multiprocessors = 0;
  std::size_t l2_bytes = 0;
  std::size_t memory_bytes = 0;
};

int device_count();  ///< 0 when there is no usable device (never throws)
DeviceInfo device_info(int device = 0);
/// cudaDeviceSynchronize; throws RuntimeError naming `what` and the CUDA error.
void synchronize(const std::string& what);

/// Times work on a stream (the legacy default stream unless one is given) with CUDA events.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(Stream stream = {});
  /// Records the stop event, waits for it, returns milliseconds since start().
  float stop(Stream stream = {});

 private:
  // The events; a build without CUDA has no code that reads them.
  [[maybe_unused]] void* start_ = nullptr;
  [[maybe_unused]] void* stop_ = nullptr;
};

/// A stream of one's own on a device: non-blocking, so it neither waits for nor holds up
/// work on the legacy default stream.
class OwnedStream {
 public:
  explicit OwnedStream(int device = 0);
  ~OwnedStream();
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  Stream get() const { return Stream{stream_}; }
  /// Waits for the stream's work; throws RuntimeError naming `what` on a CUDA error.
  void synchronize(const std::string& what) const;

 private:
  void* stream_ = nullptr;
};

/// A CUDA graph captured from a stream's work, then replayed on a stream.
class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  /// Starts capturing the work issued to `stream` (which must not be the legacy default stream).
  void begin_capture(Stream stream);
  /// Ends the capture and instantiates the graph (replacing any previous one).
  void end_capture(Stream stream);
  void launch(Stream stream) const;
  bool ready() const { return exec_ != nullptr; }
  int nodes() const { return nodes_; }

 private:
  [[maybe_unused]] void* graph_ = nullptr;  // a build without CUDA has no code that reads it
  void* exec_ = nullptr;
  int nodes_ = 0;
};

/// What the device's memory holds: free and total (cudaMemGetInfo), and what the default
/// stream-ordered memory pool hands out now (cudaMemPoolAttrUsedMemCurrent).
struct DeviceMemoryUse {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  std::size_t pool_used_bytes = 0;
};
DeviceMemoryUse device_memory_use(int device = 0);

/// A device copy of a host tensor view: same dtype, shape and strides.
struct DeviceTensor {
  DeviceBuffer buffer;
  TensorView view;
};
/// Bytes a strided view spans (last element's offset + 1, times the element size).
std::size_t span_bytes(const TensorView& t);
DeviceTensor to_device(const TensorView& host, int device = 0);
/// An uninitialised device tensor shaped like `like` (strides included).
DeviceTensor device_like(const TensorView& like, int device = 0);
void copy_to_host(const DeviceTensor& dev, const TensorView& host);
/// Fills a 16-bit (f16/bf16) device tensor's span with uniform values in [-range, range).
void fill_uniform(const DeviceTensor& t, std::uint64_t seed, float range);

/// Reads a buffer larger than the L2 cache (on the default stream), so the next kernel
/// reads its inputs from memory.
void flush_l2(DeviceBuffer& scratch);
/// Reads `bytes` of a buffer with a simple kernel and returns the achieved GB/s over the
/// median of `reps` runs (the bandwidth ceiling measured in the same run as a benchmark).
double measure_read_bandwidth(const DeviceBuffer& buf, int reps);

}  // namespace attnsel::kernel::cuda
