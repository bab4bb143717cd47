// vLLM's concat_and_cache_mla on the GPU for the sparse layers' caches: each new token's
// latent (kv_c, 512) and rope key (k_pe, 64) into its slot — copied for a 16-bit cache, or
// as DeepSeek's 656-byte fp8_ds_mla record (vLLM's concat_and_cache_ds_mla): per tile of 128
// latent values e4m3(x / s) with s = 2^ceil(log2(max(amax / 448, 1e-4))), the four scales,
// then the rope values as bf16. Slot −1 (padding) is skipped; the host checked every other
// slot against the cache. One CTA of four warps per token (a warp per tile).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/device/cuda/cuda_check.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"
#include "kernels/sparse_mla/cuda/launch.hpp"
#include "kernels/sparse_mla/cuda/sparse_device.cuh"

namespace attnsel::kernel::cuda::sparse_mla {
namespace {

constexpr int kWriteThreads = 128;

template <class T>
__global__ void __launch_bounds__(kWriteThreads) copy_write_kernel(const __grid_constant__ LatentWriteParams p) {
  const int token = static_cast<int>(blockIdx.x);
  const std::int64_t slot = p.slots[token];
  if (slot < 0) return;
  T* row = static_cast<T*>(p.cache) + slot * p.cache_row_stride;
  const T* kv_c = static_cast<const T*>(p.kv_c) + std::int64_t(token) * p.kv_c_stride;
  const T* k_pe = static_cast<const T*>(p.k_pe) + std::int64_t(token) * p.k_pe_stride;
  for (int col = static_cast<int>(threadIdx.x); col < kLatentDim; col += kWriteThreads)
    row[col] = col < kValueDim ? kv_c[col] : k_pe[col - kValueDim];
}

__global__ void __launch_bounds__(kWriteThreads) ds_mla_write_kernel(const __grid_constant__ LatentWriteParams p) {
  const int token = static_cast<int>(blockIdx.x);
  const std::int64_t slot = p.slots[token];
  if (slot < 0) return;
  std::uint8_t* rec = static_cast<std::uint8_t*>(p.cache) + slot * p.cache_row_stride;
  const auto* kv_c = static_cast<const __nv_bfloat16*>(p.kv_c) + std::int64_t(token) * p.kv_c_stride;
  const int tile = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  float x[4];
  const float amax = load_row_quad(kv_c + tile * kDsTile, lane, x);
  const float scale = pow2_ceil(fmaxf(amax / kE4m3Max, 1e-4f));
  *reinterpret_cast<std::uint32_t*>(rec + tile * kDsTile + 4 * lane) = pack_e4m3x4(x, scale);
  if (lane == 0) *reinterpret_cast<float*>(rec + kDsScaleOffset + 4 * tile) = scale;
  // The rope key, verbatim: 64 bf16 values, two per thread of the first warp.
  if (tile == 0) {
    const auto* src = reinterpret_cast<const std::uint32_t*>(static_cast<const __nv_bfloat16*>(p.k_pe) +
                                                             std::int64_t(token) * p.k_pe_stride);
    reinterpret_cast<std::uint32_t*>(rec + kDsRopeOffset)[lane] = src[lane];
  }
}

}  // namespace

void launch_latent_write(const LatentWriteParams& p, ScalarType dtype, LatentCache cache, void* stream) {
  if (p.tokens == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(p.tokens)), block(kWriteThreads);
  cudaError_t err;
  if (cache == LatentCache::ds_mla)
    err = launch_kernel(ds_mla_write_kernel, grid, block, 0, s, false, p);
  else if (dtype == ScalarType::bf16)
    err = launch_kernel(copy_write_kernel<__nv_bfloat16>, grid, block, 0, s, false, p);
  else
    err = launch_kernel(copy_write_kernel<__half>, grid, block, 0, s, false, p);
  check_cuda(err, "sparse MLA cache write", cfg_string("{} tokens", p.tokens));
}

}  // namespace attnsel::kernel::cuda::sparse_mla
