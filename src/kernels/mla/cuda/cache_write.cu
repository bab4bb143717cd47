// vLLM's concat_and_cache_mla on the GPU (csrc/cache_kernels.cu): each new token's latent
// (kv_c, 512) and rope key (k_pe, 64) into its cache slot, as they are for a 16-bit cache,
// e4m3(x / k_scale) — round to nearest even, saturated to ±448 — for an e4m3 one. Slot −1
// (padding) is skipped; the host checked every other slot against the cache. One warp per
// token, eight values per lane and step.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/device/cuda/cuda_check.cuh"
#include "kernels/device/cuda/fp8_convert.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"
#include "kernels/mla/cuda/launch.hpp"

namespace attnsel::kernel::cuda::mla {
namespace {

constexpr int kTokensPerBlock = 8;
constexpr int kChunks = kLatentDim / 8;  // 72 chunks of 8 values: 64 of the latent, 8 of the rope key

template <class T, bool FP8>
__global__ void __launch_bounds__(32 * kTokensPerBlock) cache_write_kernel(const __grid_constant__ CacheWriteParams p) {
  wait_for_prior_grids();
  const int token = static_cast<int>(blockIdx.x) * kTokensPerBlock + static_cast<int>(threadIdx.x) / 32;
  if (token >= p.num_tokens) return;
  const std::int64_t slot = p.slot_mapping[token];
  if (slot < 0) return;
  using Stored = std::conditional_t<FP8, std::uint8_t, T>;
  Stored* row = static_cast<Stored*>(p.cache) + (slot / p.page_size) * p.cache_block_stride +
                (slot % p.page_size) * p.cache_row_stride;
  const T* kv_c = static_cast<const T*>(p.kv_c) + std::int64_t(token) * p.kv_c_stride;
  const T* k_pe = static_cast<const T*>(p.k_pe) + std::int64_t(token) * p.k_pe_stride;
  for (int c = static_cast<int>(threadIdx.x) % 32; c < kChunks; c += 32) {
    const int col = 8 * c;
    const uint4 x = *reinterpret_cast<const uint4*>(col < kValueDim ? kv_c + col : k_pe + (col - kValueDim));
    if constexpr (FP8) {
      const T* e = reinterpret_cast<const T*>(&x);
      std::uint32_t w[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const std::uint32_t lo = float2_to_e4m3x2(__fdiv_rn(to_float(e[4 * i]), p.k_scale),
                                                  __fdiv_rn(to_float(e[4 * i + 1]), p.k_scale));
        const std::uint32_t hi = float2_to_e4m3x2(__fdiv_rn(to_float(e[4 * i + 2]), p.k_scale),
                                                  __fdiv_rn(to_float(e[4 * i + 3]), p.k_scale));
        w[i] = lo | (hi << 16);
      }
      *reinterpret_cast<uint2*>(row + col) = make_uint2(w[0], w[1]);
    } else {
      *reinterpret_cast<uint4*>(row + col) = x;
    }
  }
}

}  // namespace

void launch_cache_write(const CacheWriteParams& p, ScalarType e, CacheKind cache, bool programmatic, void* stream) {
  if (p.num_tokens == 0) return;
  const dim3 grid((p.num_tokens + kTokensPerBlock - 1) / kTokensPerBlock), block(32 * kTokensPerBlock);
  const auto s = static_cast<cudaStream_t>(stream);
  auto cfg = [&] { return cfg_string("MLA cache write: {} tokens", p.num_tokens); };
  const bool fp8 = cache == CacheKind::e4m3;
  cudaError_t err;
  if (e == ScalarType::bf16)
    err = fp8 ? launch_kernel(cache_write_kernel<__nv_bfloat16, true>, grid, block, 0, s, programmatic, p)
              : launch_kernel(cache_write_kernel<__nv_bfloat16, false>, grid, block, 0, s, programmatic, p);
  else
    err = fp8 ? launch_kernel(cache_write_kernel<__half, true>, grid, block, 0, s, programmatic, p)
              : launch_kernel(cache_write_kernel<__half, false>, grid, block, 0, s, programmatic, p);
  check_cuda(err, "MLA cache write", cfg());
}

}  // namespace attnsel::kernel::cuda::mla
