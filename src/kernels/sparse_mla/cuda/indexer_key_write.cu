// vLLM's indexer_k_quant_and_cache on the GPU (csrc/cache_kernels.cu): each new token's
// 128-wide indexer key as e4m3(k / scale) with scale = max(amax, 1e-4) / 448 rounded up to a
// power of two (ue8m0), the values into its block's value area and the scale into its scale
// area (a block holds its tokens' values, then their scales). Slot −1 is skipped; the host
// checked every other slot. One warp per token, four values per lane.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/device/cuda/cuda_check.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"
#include "kernels/sparse_mla/cuda/launch.hpp"
#include "kernels/sparse_mla/cuda/sparse_device.cuh"

namespace attnsel::kernel::cuda::sparse_mla {
namespace {

constexpr int kWarpsPerBlock = 8;
static_assert(kIndexerDim == 32 * 4, "a lane writes four values of a key");

template <class T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock) key_write_kernel(const __grid_constant__ KeyWriteParams p) {
  const int token = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (token >= p.tokens) return;
  const std::int64_t slot = p.slots[token];
  if (slot < 0) return;
  const T* k = static_cast<const T*>(p.k) + std::int64_t(token) * p.k_stride;
  float x[4];
  const float amax = load_row_quad(k, lane, x);
  const float scale = pow2_ceil(fmaxf(amax, 1e-4f) / kE4m3Max);
  const std::uint32_t packed = pack_e4m3x4(x, scale);
  std::uint8_t* block = p.cache + (slot / p.block_size) * p.block_stride;
  const std::int64_t offset = slot % p.block_size;
  *reinterpret_cast<std::uint32_t*>(block + offset * kIndexerDim + 4 * lane) = packed;
  if (lane == 0) *reinterpret_cast<float*>(block + std::int64_t(p.block_size) * kIndexerDim + offset * 4) = scale;
}

}  // namespace

void launch_key_write(const KeyWriteParams& p, ScalarType dtype, void* stream) {
  if (p.tokens == 0) return;
  const dim3 grid(static_cast<unsigned>((p.tokens + kWarpsPerBlock - 1) / kWarpsPerBlock)), block(32 * kWarpsPerBlock);
  const auto s = static_cast<cudaStream_t>(stream);
  cudaError_t err;
  if (dtype == ScalarType::bf16)
    err = launch_kernel(key_write_kernel<__nv_bfloat16>, grid, block, 0, s, false, p);
  else if (dtype == ScalarType::f16)
    err = launch_kernel(key_write_kernel<__half>, grid, block, 0, s, false, p);
  else
    err = launch_kernel(key_write_kernel<float>, grid, block, 0, s, false, p);
  check_cuda(err, "indexer key cache write", cfg_string("{} tokens", p.tokens));
}

}  // namespace attnsel::kernel::cuda::sparse_mla
