// The sparse MLA CUDA kernels in the build without CUDA: the makers say that they were not
// built; the limits and kernel facts are those of the CUDA build (unavailable here).
#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/sparse_mla/cuda/launch.hpp"
#include "kernels/sparse_mla/cuda/sparse_mla_cuda.hpp"

namespace attnsel::kernel::cuda::sparse_mla {

namespace {
KernelInfo unavailable_info() {
  KernelInfo k;
  k.device = DeviceKind::cuda;
  k.available = false;
  return k;
}
}  // namespace

SparseMlaKernelLimits cuda_sparse_mla_limits() { return SparseMlaKernelLimits{}; }

IndexerKernelLimits cuda_indexer_limits() {
  IndexerKernelLimits l;
  l.max_topk = kMaxTopK;
  return l;
}

std::unique_ptr<SparseMlaImpl> make_cuda_sparse_mla_impl(const SparseMlaLayerParams&) {
  throw NotImplementedError(cuda_kernels_unavailable_reason());
}

std::unique_ptr<IndexerImpl> make_cuda_indexer_impl(const IndexerLayerParams&) {
  throw NotImplementedError(cuda_kernels_unavailable_reason());
}

KernelInfo cuda_sparse_mla_info() {
  KernelInfo k = unavailable_info();
  k.lse_output = true;
  return k;
}

KernelInfo cuda_indexer_info() { return unavailable_info(); }

}  // namespace attnsel::kernel::cuda::sparse_mla
