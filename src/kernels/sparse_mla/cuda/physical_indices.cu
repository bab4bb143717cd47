// Request positions to latent cache rows on the GPU (vLLM's
// triton_convert_req_index_to_global_index, vllm/v1/attention/backends/mla/sparse_utils.py):
// block_table[request][p / block_size] · block_size + p % block_size for a position the
// request holds (0 <= p < seq_len; the host checked those block-table entries), −1 for any
// other entry. One thread per entry.
#include "kernels/device/cuda/cuda_check.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"
#include "kernels/sparse_mla/cuda/launch.hpp"

namespace attnsel::kernel::cuda::sparse_mla {
namespace {

constexpr int kIndexThreads = 256;

__global__ void __launch_bounds__(kIndexThreads) physical_indices_kernel(const __grid_constant__ PhysicalParams p) {
  const int token = static_cast<int>(blockIdx.x);
  const int k = static_cast<int>(blockIdx.y) * kIndexThreads + static_cast<int>(threadIdx.x);
  if (k >= p.topk) return;
  const int seq = p.token_seq[token];
  const std::int32_t pos = p.local[std::int64_t(token) * p.local_stride + k];
  std::int32_t row = -1;
  if (pos >= 0 && pos < p.seq_lens[seq])
    row = p.block_table[std::int64_t(seq) * p.table_stride + pos / p.block_size] * p.block_size + pos % p.block_size;
  p.physical[std::int64_t(token) * p.physical_stride + k] = row;
}

}  // namespace

void launch_physical_indices(const PhysicalParams& p, void* stream) {
  if (p.tokens == 0) return;
  const dim3 grid(static_cast<unsigned>(p.tokens), static_cast<unsigned>((p.topk + kIndexThreads - 1) / kIndexThreads));
  check_cuda(
      launch_kernel(physical_indices_kernel, grid, dim3(kIndexThreads), 0, static_cast<cudaStream_t>(stream), false, p),
      "sparse MLA physical indices", cfg_string("{} tokens, topk {}", p.tokens, p.topk));
}

}  // namespace attnsel::kernel::cuda::sparse_mla
