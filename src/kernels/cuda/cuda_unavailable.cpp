// The build without CUDA: every entry point says that the kernels were not built.
#include "attnsel/errors.hpp"
#include "kernels/cuda/device_memory.hpp"
#include "kernels/cuda/flash_attn_cuda.hpp"

namespace attnsel::kernel::cuda {
namespace {
constexpr const char* kReason = "attnsel was built without CUDA (nvcc not found, or ATTNSEL_CUDA=OFF)";
[[noreturn]] void unavailable() { throw NotImplementedError(kReason); }
}  // namespace

bool cuda_kernels_built() { return false; }
std::string cuda_kernels_unavailable_reason() { return kReason; }
std::unique_ptr<AttentionImpl> make_flash_attn_cuda_impl(const LayerParams&) { unavailable(); }

std::string PlanSummary::describe() const { return "nothing to do"; }
struct FlashAttnCuda::DeviceConstants {};
struct FlashAttnCuda::Plan {};
FlashAttnCuda::FlashAttnCuda(const LayerParams& params, CudaTuning tuning) : AttentionImpl(params), tuning_(tuning) {
  unavailable();
}
FlashAttnCuda::~FlashAttnCuda() = default;
void FlashAttnCuda::write_kv_cache(const TensorView&, const TensorView&, const KVCacheView&,
                                   const AttentionMetadata&) const {
  unavailable();
}
void FlashAttnCuda::forward(const TensorView&, const KVCacheView&, const AttentionMetadata&, const TensorView&) const {
  unavailable();
}
std::shared_ptr<const FlashAttnCuda::Plan> FlashAttnCuda::plan(const TensorView&, const KVCacheView&,
                                                               const AttentionMetadata&, const TensorView&) const {
  unavailable();
}
void FlashAttnCuda::run(const Plan&) const { unavailable(); }
PlanSummary FlashAttnCuda::summary(const Plan&) { unavailable(); }

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
void EventTimer::start() { unavailable(); }
float EventTimer::stop() { unavailable(); }
DeviceTensor to_device(const TensorView&, int) { unavailable(); }
DeviceTensor device_like(const TensorView&, int) { unavailable(); }
void copy_to_host(const DeviceTensor&, const TensorView&) { unavailable(); }
void fill_uniform(const DeviceTensor&, std::uint64_t, float) { unavailable(); }
void flush_l2(DeviceBuffer&) { unavailable(); }
double measure_read_bandwidth(const DeviceBuffer&, int) { unavailable(); }

}  // namespace attnsel::kernel::cuda
