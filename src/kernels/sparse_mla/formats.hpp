// The byte formats of DeepSeek-V3.2's two caches and their scale rules, shared by every
// device's writers and readers and by the reference:
//   * the indexer key cache (vLLM's indexer_k_quant_and_cache, csrc/cache_kernels.cu): per
//     block, the head_dim e4m3 values of each of its block_size tokens, then one fp32 scale
//     per token — not interleaved; the scale of a key is max(amax, 1e-4) / 448 rounded up to a
//     power of two (ue8m0);
//   * the fp8_ds_mla latent token (vLLM's concat_and_cache_ds_mla; FlashMLA's tests/quant.py,
//     its V32_FP8Sparse layout): 512 e4m3 values, four fp32 scales (one per tile of 128),
//     64 bf16 rope values, 656 bytes; a tile's scale is 2^ceil(log2(max(amax / 448, 1e-4))).
// Plus the e4m3 encoding the kernels use in their loops (bit for bit kernel::float_to_fp8's).
// Thread-safety: constants and pure functions.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace attnsel::kernel::sparse_mla {

/// The largest finite e4m3 value: the divisor of every scale rule.
inline constexpr float kE4m3Max = 448.0f;

// ---- indexer key cache
/// Bytes of a key's scale.
inline constexpr int kIndexerScaleBytes = 4;
/// Bytes per token of the indexer cache: head_dim values and one fp32 scale.
inline constexpr int indexer_token_bytes(int head_dim) { return head_dim + kIndexerScaleBytes; }
/// Byte offset, within its block, of the values of the token at `offset`.
inline constexpr std::int64_t indexer_value_offset(int head_dim, std::int64_t offset) { return offset * head_dim; }
/// Byte offset, within its block, of the scale of the token at `offset` (after every value).
inline constexpr std::int64_t indexer_scale_offset(int head_dim, int block_size, std::int64_t offset) {
  return static_cast<std::int64_t>(block_size) * head_dim + offset * kIndexerScaleBytes;
}

// ---- fp8_ds_mla latent token
/// The latent row the sparse kernels attend over: kv_lora_rank 512 values, then 64 RoPE values.
inline constexpr int kLatentWidth = 576;
inline constexpr int kLatentRank = 512;
inline constexpr int kDsMlaLatent = 512;    ///< e4m3 latent values
inline constexpr int kDsMlaTile = 128;      ///< values per scale
inline constexpr int kDsMlaTiles = kDsMlaLatent / kDsMlaTile;
inline constexpr int kDsMlaRope = 64;       ///< bf16 rope values
inline constexpr int kDsMlaScaleOffset = kDsMlaLatent;                         ///< bytes 512 … 527
inline constexpr int kDsMlaRopeOffset = kDsMlaScaleOffset + 4 * kDsMlaTiles;  ///< bytes 528 … 655
inline constexpr int kDsMlaTokenBytes = kDsMlaRopeOffset + 2 * kDsMlaRope;    ///< 656

/// The smallest power of two >= s, for a positive finite float s (exact, where vLLM's
/// exp2f(ceilf(log2f(s))) may round for an s within an ulp of a power of two).
inline float pow2_ceil(float s) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(s);
  if ((bits & 0x007FFFFFu) == 0 && (bits & 0x7F800000u) != 0) return s;  // a normal power of two
  int e = 0;
  (void)std::frexp(s, &e);  // s = f · 2^e, f in [0.5, 1): the next power of two is 2^e
  return std::ldexp(1.0f, e);
}

/// An indexer key's scale from the largest |value| of its head_dim values (ue8m0).
inline float indexer_key_scale(float amax) { return pow2_ceil(std::fmax(amax, 1e-4f) / kE4m3Max); }

/// An fp8_ds_mla tile's scale from the largest |value| of its 128 values.
inline float ds_mla_tile_scale(float amax) { return pow2_ceil(std::fmax(amax / kE4m3Max, 1e-4f)); }

/// A query head's scale in the indexer (vLLM's fused_indexer_q_rope_quant: max(amax, 1e-10)
/// / 448 rounded up to a power of two).
inline float indexer_query_scale(float amax) { return pow2_ceil(std::fmax(amax, 1e-10f) / kE4m3Max); }

/// e4m3 (OCP E4M3FN) of x, rounded to nearest even and saturated to ±448, NaN to 0x7F with
/// x's sign: kernel::float_to_fp8(x, fp8_e4m3) without its library calls, for the loops.
inline std::uint8_t encode_e4m3(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  const std::uint32_t a = bits & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7Fu;  // NaN
  if (a >= 0x43E00000u) return sign | 0x7Eu;  // >= 448 (and infinity): saturate
  if (a < 0x3C800000u) {                      // below 2^-6: a subnormal, in units of 2^-9
    const float units = std::nearbyint(std::bit_cast<float>(a) * 512.0f);
    return sign | static_cast<std::uint8_t>(units);  // 8 units is the smallest normal: the same bits
  }
  // Round the 23-bit mantissa to 3 bits (nearest even), then rebias the exponent (127 → 7).
  const std::uint32_t rounded = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
  return sign | static_cast<std::uint8_t>(rounded - (120u << 3));
}

}  // namespace attnsel::kernel::sparse_mla
