// Internal: e4m3 (OCP E4M3FN) <-> 16-bit conversions for the fp8 KV cache (per element pair).
// Widening is exact: every e4m3 value (NaN included) is a half and a bfloat16. Narrowing
// rounds to nearest even and saturates to ±448, as vLLM's cache writer does (SATFINITE).
// On sm_89+ both are single cvt instructions; on sm_80 cuda_fp8.h emulates them.
#pragma once

#include <cuda_fp8.h>

#include "kernels/device/cuda/device_ops.cuh"

namespace attnsel::kernel::cuda {

/// Two e4m3 bytes (low byte first) -> two T packed in 32 bits.
template <class T> __device__ __forceinline__ std::uint32_t e4m3x2_to(std::uint16_t two);
template <> __device__ __forceinline__ std::uint32_t e4m3x2_to<__half>(std::uint16_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(two, __NV_E4M3);
  return std::uint32_t(h.x) | (std::uint32_t(h.y) << 16);
}
template <> __device__ __forceinline__ std::uint32_t e4m3x2_to<__nv_bfloat16>(std::uint16_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(two, __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  return pack2<__nv_bfloat16>(f.x, f.y);  // exact: an e4m3 value has 3 mantissa bits
}

/// Eight e4m3 bytes -> eight T (16 bytes).
template <class T>
__device__ __forceinline__ uint4 e4m3x8_to(uint2 b) {
  return make_uint4(e4m3x2_to<T>(std::uint16_t(b.x)), e4m3x2_to<T>(std::uint16_t(b.x >> 16)),
                    e4m3x2_to<T>(std::uint16_t(b.y)), e4m3x2_to<T>(std::uint16_t(b.y >> 16)));
}

/// Two floats -> two e4m3 bytes (round to nearest even, saturating).
__device__ __forceinline__ std::uint16_t float2_to_e4m3x2(float lo, float hi) {
  return static_cast<std::uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}

/// Eight T (16 bytes) times `inv_scale` -> eight e4m3 bytes: the cache writers' quantisation.
template <class T>
__device__ __forceinline__ uint2 quantize8_e4m3(uint4 x, float inv_scale) {
  const T* e = reinterpret_cast<const T*>(&x);
  std::uint32_t w[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const std::uint32_t lo = float2_to_e4m3x2(to_float(e[4 * i]) * inv_scale, to_float(e[4 * i + 1]) * inv_scale);
    const std::uint32_t hi = float2_to_e4m3x2(to_float(e[4 * i + 2]) * inv_scale, to_float(e[4 * i + 3]) * inv_scale);
    w[i] = lo | (hi << 16);
  }
  return make_uint2(w[0], w[1]);
}

/// Stores eight T (16 bytes) into a cache row at `dst`: as they are, or (FP8) quantised to
/// e4m3 with `inv_scale`. The cache writer and the appending decode kernel share it, so
/// both store the same bytes.
template <class T, bool FP8, class Stored>
__device__ __forceinline__ void store8_to_cache(Stored* dst, uint4 x, float inv_scale) {
  if constexpr (FP8) *reinterpret_cast<uint2*>(dst) = quantize8_e4m3<T>(x, inv_scale);
  else *reinterpret_cast<uint4*>(dst) = x;
}

}  // namespace attnsel::kernel::cuda
