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
KernelInfo flash_attn_cuda_kernel_info() {
  KernelInfo k;
  k.device = DeviceKind::cuda;
  k.graph_support = GraphSupport::uniform_batch;
  k.preferred_layout = KVCacheLayout::LBNHC;
  k.lse_output = true;  // decode batches (as the built kernels declare)
  k.available = false;
  return k;
}
struct FlashAttnCuda::DeviceConstants {};
struct FlashAttnCuda::ForwardCache {};
FlashAttnCuda::FlashAttnCuda(const LayerParams& params, CudaTuning tuning) : AttentionImpl(params), tuning_(tuning) {
  unavailable();
}
FlashAttnCuda::~FlashAttnCuda() = default;
KernelInfo FlashAttnCuda::kernel_info() const { return flash_attn_cuda_kernel_info(); }
void FlashAttnCuda::write_kv_cache(const TensorView&, const TensorView&, const KVCacheView&,
                                   const AttentionMetadata&) const {
  unavailable();
}
void FlashAttnCuda::forward(const TensorView&, const KVCacheView&, const AttentionMetadata&, const TensorView&) const {
  unavailable();
}
PlanSummary FlashAttnCuda::summary(const StepPlan&) { unavailable(); }
std::unique_ptr<StepPlan> FlashAttnCuda::make_plan(const AttentionMetadata&, const StepShape&, Stream,
                                                   const PlanOptions&) const {
  unavailable();
}
void FlashAttnCuda::update_plan(StepPlan&, const AttentionMetadata&, Stream) const { unavailable(); }
void FlashAttnCuda::execute_plan(const StepPlan&, const TensorView&, const KVCacheView&, const TensorView&, Stream,
                                 const TensorView*) const {
  unavailable();
}
void FlashAttnCuda::write_kv_cache_plan(const StepPlan&, const TensorView&, const TensorView&, const KVCacheView&,
                                        Stream) const {
  unavailable();
}
void FlashAttnCuda::execute_append_plan(const StepPlan&, const TensorView&, const NewKeysValues&, const KVCacheView&,
                                        const TensorView&, Stream, const TensorView*) const {
  unavailable();
}
const void* FlashAttnCuda::plan_maker() const { return this; }

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
