// FLASH_ATTN's CUDA kernels in the build without CUDA: every entry point says that they were not built.
#include "attnsel/errors.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"

namespace attnsel::kernel::cuda {
namespace {
[[noreturn]] void unavailable() { throw NotImplementedError(cuda_kernels_unavailable_reason()); }
}  // namespace

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

}  // namespace attnsel::kernel::cuda
