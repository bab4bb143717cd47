// Internal: device helpers shared by the attention kernels — the score modifiers and the
// key mask (the generic device operations are in kernels/device/cuda/device_ops.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/cuda/launch.hpp"
#include "kernels/device/cuda/device_ops.cuh"

namespace attnsel::kernel::cuda {

/// Whether this compilation's device code is for sm_90 or newer (the host pass counts as
/// such). Below sm_90 the kernels' instances that cannot run there are left empty: sm_90's
/// bulk and TMA copies, and fp8 caches, which FLASH_ATTN takes only on Hopper (vLLM's
/// FlashAttention 3 rule; the planner rejects them on older devices).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
inline constexpr bool kHopperDeviceCode = false;
#else
inline constexpr bool kHopperDeviceCode = true;
#endif

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
