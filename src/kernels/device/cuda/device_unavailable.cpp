// The device helpers in the build without CUDA: every entry point says that CUDA was not built.
#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"

namespace attnsel::kernel::cuda {
namespace {
constexpr const char* kReason = "attnsel was built without CUDA (nvcc not found, or ATTNSEL_CUDA=OFF)";
[[noreturn]] void unavailable() { throw NotImplementedError(kReason); }
}  // namespace

bool cuda_kernels_built() { return false; }
std::string cuda_kernels_unavailable_reason() { return kReason; }

DeviceBuffer::DeviceBuffer(std::size_t) { unavailable(); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept { return *this; }
void DeviceBuffer::upload(const void*, std::size_t, std::size_t) { unavailable(); }
void DeviceBuffer::download(void*, std::size_t, std::size_t) const { unavailable(); }
void DeviceBuffer::fill_bytes(std::uint8_t) { unavailable(); }
int device_count() { return 0; }
DeviceInfo device_info(int) { unavailable(); }
void synchronize(const std::string&) { unavailable(); }
EventTimer::EventTimer() { unavailable(); }
EventTimer::~EventTimer() = default;
void EventTimer::start(Stream) { unavailable(); }
float EventTimer::stop(Stream) { unavailable(); }
OwnedStream::OwnedStream(int) { unavailable(); }
OwnedStream::~OwnedStream() = default;
void OwnedStream::synchronize(const std::string&) const { unavailable(); }
CudaGraph::~CudaGraph() = default;
void CudaGraph::begin_capture(Stream) { unavailable(); }
void CudaGraph::end_capture(Stream) { unavailable(); }
void CudaGraph::launch(Stream) const { unavailable(); }
DeviceMemoryUse device_memory_use(int) { unavailable(); }
DeviceTensor to_device(const TensorView&, int) { unavailable(); }
DeviceTensor device_like(const TensorView&, int) { unavailable(); }
void copy_to_host(const DeviceTensor&, const TensorView&) { unavailable(); }
void fill_uniform(const DeviceTensor&, std::uint64_t, float) { unavailable(); }
void flush_l2(DeviceBuffer&) { unavailable(); }
double measure_read_bandwidth(const DeviceBuffer&, int) { unavailable(); }

}  // namespace attnsel::kernel::cuda
