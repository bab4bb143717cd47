// Internal: device helpers shared by the attention kernels — asynchronous copies,
// ldmatrix, mma.sync, element conversions, the score modifiers and the key mask.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace attnsel::kernel::cuda {

inline constexpr float kLog2e = 1.4426950408889634f;

// ---- conversions -------------------------------------------------------------------
template <class T> __device__ __forceinline__ std::uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ std::uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<std::uint32_t*>(&v);
}
template <> __device__ __forceinline__ std::uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<std::uint32_t*>(&v);
}
template <class T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ---- shared memory and asynchronous copies ------------------------------------------
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
/// 16-byte global→shared copy; when !valid the destination is zero-filled and the source
/// is not read (so out-of-range rows never touch memory, and stale cache slots never
/// reach the arithmetic).
__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
/// 8-byte cp.async (through L1: .cg takes 16 bytes only); valid = false zero-fills.
__device__ __forceinline__ void cp_async8(std::uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 8 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// ---- mma.sync m16n8k16, fp32 accumulators --------------------------------------------
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const std::uint32_t (&a)[4],
                                                        std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                                 std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- scores ----------------------------------------------------------------------------
/// One KV head's score scales: the layer's, times the head's fp8 key scale when the cache
/// has per-head scales (a CTA computes this once; all its rows share the KV head).
struct ScoreScale {
  float scale_log2;   ///< AttnParams::scale_log2 × k_scales[kv_head]
  float softcap_inv;  ///< AttnParams::softcap_inv × k_scales[kv_head] (0 = no soft-cap)
};
__device__ __forceinline__ ScoreScale score_scale(const AttnParams& p, int kv_head) {
  const float k = p.k_scales ? p.k_scales[kv_head] : 1.0f;
  return {p.scale_log2 * k, p.softcap_inv * k};
}
/// The multiplier of one KV head's normalised output: v_scale × its per-head value scale.
__device__ __forceinline__ float output_scale(const AttnParams& p, int kv_head) {
  return p.v_scales ? p.v_scale * p.v_scales[kv_head] : p.v_scale;
}

/// Raw q·k to the log2 domain: scale, then the optional soft-cap.
__device__ __forceinline__ float score_to_log2(const AttnParams& p, const ScoreScale& sc, float s) {
  if (sc.softcap_inv != 0.0f) return p.softcap_log2 * fast_tanh(s * sc.softcap_inv);
  return s * sc.scale_log2;
}

/// Which keys a query at absolute position `pos` may see: [lo, hi).
struct KeyRange {
  int lo, hi;
};
__device__ __forceinline__ KeyRange visible_keys(const AttnParams& p, int pos, int seq_len) {
  int lo = 0, hi = seq_len;
  if (p.window_left >= 0) lo = max(lo, pos - p.window_left);
  if (p.window_right >= 0) hi = min(hi, pos + p.window_right + 1);
  return {lo, hi};
}

/// Final normalisation with an optional sink: out = acc / (l + exp(sink - m)), computed
/// against max(m, sink) so neither term overflows. m and the sink are log2-domain here.
__device__ __forceinline__ float finish_scale(float m, float l, float sink_log2, bool has_sink) {
  if (!has_sink) return l > 0.0f ? 1.0f / l : 0.0f;
  const float mm = fmaxf(m, sink_log2);
  const float a = (m == -INFINITY) ? 0.0f : fast_exp2(m - mm);
  const float denom = l * a + fast_exp2(sink_log2 - mm);
  return denom > 0.0f ? a / denom : 0.0f;
}

}  // namespace attnsel::kernel::cuda
