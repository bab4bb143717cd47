// The meaning of an attention layer's parameters, written once so the reference, the CPU
// kernels and the CUDA kernels agree (docs/DECISIONS.md, "Kernel semantics").
//
//  * Query i (0-based) of a sequence with seq_len L and q new tokens sits at position
//    L - q + i; keys sit at positions 0 .. L-1.
//  * Logit: s = scale * q.k; then soft-cap (cap * tanh(s / cap)); then ALiBi
//    (+ slope * (key_pos - query_pos)); then the mask. Sinks add exp(sink) to the softmax
//    denominator and nothing to the numerator.
//  * Causality is a property of self-attention decoders only: encoder, encoder_only and
//    encoder_decoder (cross) layers never mask the future.
//  * Sliding window W: a key is visible when query_pos - key_pos <= W - 1, and, for a
//    non-causal layer, also key_pos - query_pos <= W - 1 (vLLM's (W-1, W-1) encoder window).
//  * A query that sees no key writes zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attnsel/kernel.hpp"

namespace attnsel::kernel {

/// Which keys a query may see.
struct MaskRule {
  bool causal = true;
  std::int64_t window = -1;  ///< W - 1, or -1 for no window

  static MaskRule from(const LayerParams& p) {
    MaskRule r;
    r.causal = p.causal && p.attn_type == AttentionType::decoder;
    r.window = p.sliding_window ? static_cast<std::int64_t>(*p.sliding_window) - 1 : -1;
    return r;
  }
  bool visible(std::int64_t query_pos, std::int64_t key_pos) const {
    if (causal && key_pos > query_pos) return false;
    if (window >= 0) {
      if (query_pos - key_pos > window) return false;
      if (!causal && key_pos - query_pos > window) return false;
    }
    return true;
  }
  /// The visible key range [first, last) for a query at `query_pos` among `seq_len` keys.
  void key_range(std::int64_t query_pos, std::int64_t seq_len, std::int64_t& first, std::int64_t& last) const {
    first = 0;
    last = seq_len;
    if (causal && query_pos + 1 < last) last = query_pos + 1;
    if (window >= 0) {
      if (query_pos - window > first) first = query_pos - window;
      if (!causal && query_pos + window + 1 < last) last = query_pos + window + 1;
    }
    if (last < first) last = first;
  }
};

inline std::int64_t query_position(std::int64_t seq_len, std::int64_t query_len, std::int64_t i) {
  return seq_len - query_len + i;
}

/// How the cache stores elements for a kv_cache_dtype (given the model's dtype for auto).
struct CacheEncoding {
  ScalarType stored = ScalarType::f32;  ///< f32, f16, bf16, fp8_e4m3 or fp8_e5m2
  bool quantized = false;               ///< fp8: stored * scale = value
};

/// The fp8 dequantisation scales of KV head `kv_head`: its per-head scale when the layer
/// has them, else the layer's scalar (validate_layer_params checked the lengths).
inline float key_scale(const LayerParams& p, int kv_head) {
  return p.k_scales.empty() ? p.k_scale : p.k_scales[static_cast<std::size_t>(kv_head)];
}
inline float value_scale(const LayerParams& p, int kv_head) {
  return p.v_scales.empty() ? p.v_scale : p.v_scales[static_cast<std::size_t>(kv_head)];
}

/// Throws ValueError for a kv_cache_dtype the kernels do not know.
CacheEncoding cache_encoding(CacheDType kv_cache_dtype, ScalarType model_dtype);

/// True for f32, f16, bf16.
inline bool is_float_activation(ScalarType t) {
  return t == ScalarType::f32 || t == ScalarType::f16 || t == ScalarType::bf16;
}

}  // namespace attnsel::kernel
