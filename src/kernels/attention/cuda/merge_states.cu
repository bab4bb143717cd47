#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "attnsel/errors.hpp"
#include "kernels/attention/cuda/merge_states.hpp"

namespace attnsel::kernel::cuda {

namespace {

__device__ __forceinline__ float sanitize(float lse) { return (isnan(lse) || lse == INFINITY) ? -INFINITY : lse; }

// One block per (token, head): every thread computes the merged LSE (world is small, the
// LSEs sit in L1), then scales its share of the row.
__global__ void correct_partial_output_kernel(const float* __restrict__ lses, int world, int rank, long long th,
                                              int head_size, float* __restrict__ out, float* __restrict__ merged_lse) {
  const long long i = blockIdx.x;
  float mx = -INFINITY;
  for (int r = 0; r < world; ++r) mx = fmaxf(mx, sanitize(lses[r * th + i]));
  float merged = -INFINITY;
  if (mx != -INFINITY) {
    float sum = 0.0f;
    for (int r = 0; r < world; ++r) sum += expf(sanitize(lses[r * th + i]) - mx);
    merged = logf(sum) + mx;
  }
  const float diff = sanitize(lses[rank * th + i]) - merged;
  const float w = (isnan(diff) || diff == INFINITY) ? 0.0f : expf(diff);
  float* row = out + i * head_size;
  for (int d = threadIdx.x; d < head_size; d += blockDim.x) row[d] = w == 0.0f ? 0.0f : row[d] * w;
  if (merged_lse != nullptr && threadIdx.x == 0) merged_lse[i] = merged;
}

}  // namespace

void correct_partial_output(const float* lses, int world, int rank, int tokens, int heads, int head_size, float* out,
                            float* merged_lse, void* stream) {
  if (world < 1 || rank < 0 || rank >= world || tokens < 0 || heads < 1 || head_size < 1)
    throw ValueError("DCP merge on the GPU: bad shape (world " + std::to_string(world) + ", rank " +
                     std::to_string(rank) + ", tokens " + std::to_string(tokens) + ", heads " + std::to_string(heads) +
                     ", head size " + std::to_string(head_size) + ")");
  const long long th = static_cast<long long>(tokens) * heads;
  if (th == 0) return;
  if (th > 0x7FFFFFFFLL) throw ValueError("DCP merge on the GPU: tokens x heads exceeds the grid limit");
  const int threads = head_size >= 128 ? 128 : 32 * ((head_size + 31) / 32);
  correct_partial_output_kernel<<<static_cast<unsigned>(th), threads, 0, static_cast<cudaStream_t>(stream)>>>(
      lses, world, rank, th, head_size, out, merged_lse);
  const cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess)
    throw RuntimeError(std::string("DCP merge kernel launch failed: ") + cudaGetErrorString(rc));
}

}  // namespace attnsel::kernel::cuda
