// Internal: device code shared by the sparse MLA CUDA kernels — the scale rules of
// DeepSeek-V3.2's two caches (kernels/sparse_mla/formats.hpp's, bit for bit), e4m3
// conversions, the top-k's order of a score, warp reductions and the activation types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kernels/device/cuda/device_ops.cuh"
#include "kernels/sparse_mla/cuda/launch.hpp"

namespace attnsel::kernel::cuda::sparse_mla {

inline constexpr float kE4m3Max = 448.0f;
inline constexpr int kDsScaleOffset = kValueDim;              ///< fp8_ds_mla: bytes 512 … 527, four fp32 scales
inline constexpr int kDsRopeOffset = kDsScaleOffset + 4 * 4;  ///< bytes 528 … 655, 64 bf16 rope values
inline constexpr int kDsTile = 128;                           ///< latent values per scale

/// The smallest power of two >= s, for a positive finite s (formats.hpp's pow2_ceil).
__device__ __forceinline__ float pow2_ceil(float s) {
  const std::uint32_t bits = __float_as_uint(s);
  if ((bits & 0x007FFFFFu) == 0 && (bits & 0x7F800000u) != 0) return s;  // a normal power of two
  int e = 0;
  (void)frexpf(s, &e);  // s = f · 2^e, f in [0.5, 1): the next power of two is 2^e
  return ldexpf(1.0f, e);
}

/// e4m3 of x, round to nearest even, saturated to ±448 (kernel::float_to_fp8's rule).
__device__ __forceinline__ std::uint8_t to_e4m3(float x) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}
/// An e4m3 byte's value (exact).
__device__ __forceinline__ float from_e4m3(std::uint8_t b) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), __NV_E4M3);
  return __half2float(__half(h));
}

/// Activation element types: T's value as float, and a float rounded to T.
template <class T>
__device__ __forceinline__ float load_float(const T* p, std::int64_t i);
template <>
__device__ __forceinline__ float load_float<float>(const float* p, std::int64_t i) {
  return p[i];
}
template <>
__device__ __forceinline__ float load_float<__nv_bfloat16>(const __nv_bfloat16* p, std::int64_t i) {
  return __bfloat162float(p[i]);
}
template <>
__device__ __forceinline__ float load_float<__half>(const __half* p, std::int64_t i) {
  return __half2float(p[i]);
}
template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// One lane's share of a warp's 128-value row (`row`, four values a lane): x = values
/// 4·lane … 4·lane + 3 as float. Returns the row's largest magnitude (every lane the same).
template <class T>
__device__ __forceinline__ float load_row_quad(const T* row, int lane, float (&x)[4]) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    x[i] = load_float(row, 4 * lane + i);
    amax = fmaxf(amax, fabsf(x[i]));
  }
  return warp_max(amax);
}

/// e4m3(x[i] / scale) of four values, packed lowest first into one 32-bit word.
__device__ __forceinline__ std::uint32_t pack_e4m3x4(const float (&x)[4], float scale) {
  std::uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) packed |= std::uint32_t(to_e4m3(__fdiv_rn(x[i], scale))) << (8 * i);
  return packed;
}

/// A score's order as an unsigned integer (larger score, larger value): -0 is +0, NaN
/// lowest (the CPU top-k's order_of).
__device__ __forceinline__ std::uint32_t score_order(float score) {
  if (isnan(score)) return 0;
  if (score == 0.0f) score = 0.0f;  // -0 ranks as +0
  const std::uint32_t bits = __float_as_uint(score);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

/// The top-k's key of a position: its score's order above, the position's complement below,
/// so that a larger key is a higher score, then a lower position.
__device__ __forceinline__ unsigned long long rank_key(std::uint32_t order, int position) {
  return (static_cast<unsigned long long>(order) << 32) | (0xFFFFFFFFu - static_cast<std::uint32_t>(position));
}
__device__ __forceinline__ int key_position(unsigned long long key) {
  return static_cast<int>(0xFFFFFFFFu - static_cast<std::uint32_t>(key));
}

}  // namespace attnsel::kernel::cuda::sparse_mla
