// The MLA CUDA kernels in the build without CUDA: every entry point says that they were not built.
#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/mla/cuda/decode_cuda.hpp"

namespace attnsel::kernel::cuda::mla {
namespace {
[[noreturn]] void unavailable() { throw NotImplementedError(cuda_kernels_unavailable_reason()); }
}  // namespace

std::unique_ptr<DecodePlan> plan_decode(const DecodeBatch&, const TensorView&, const DecodeOptions&, Stream) {
  unavailable();
}
void update_decode(DecodePlan&, const DecodeBatch&, Stream) { unavailable(); }
void run_decode(const DecodePlan&, const TensorView&, const TensorView&, const TensorView&, float, float, Stream,
                const TensorView*) {
  unavailable();
}
void write_latent_cache(const TensorView&, const TensorView&, std::span<const std::int64_t>, const std::int64_t*,
                        const TensorView&, float, Stream) {
  unavailable();
}

}  // namespace attnsel::kernel::cuda::mla
