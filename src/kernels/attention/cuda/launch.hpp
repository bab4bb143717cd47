// Internal: the plain parameter aggregates the CUDA kernels take, and their launchers.
// Shared by the host planner (.cpp, compiled by the C++ compiler) and the kernels (.cu),
// so it holds no CUDA types: streams travel as void*.
#pragma once

#include <cstdint>
#include <numeric>
#include <string>

#include "attnsel/scalar_type.hpp"

namespace attnsel::kernel::cuda {

// The launchers' ScalarType `e` is the element type of queries, outputs and a 16-bit KV
// cache: f16 or bf16.

/// One CTA's work in the split-KV (decode) kernel: rows of packed query heads of one KV
/// head, over one slice of the sequence's keys.
struct DecodeWork {
  std::int32_t seq;
  std::int32_t kv_head;
  std::int32_t row_tile;   ///< 16 packed rows (query token × query head of the group) per tile
  std::int32_t split;      ///< which slice of the keys
  std::int32_t part_base;  ///< row of the sequence's first query token in the partial buffers
  std::int32_t counter;    ///< this row tile's arrival counter (split sequences only)
  // The sequence's facts, so that the block table's page ids are the only other read of the
  // plan before a CTA's first copies (each such read is a dependent memory round trip).
  std::int32_t q_begin;     ///< query_start_loc[seq]
  std::int32_t q_len;
  std::int32_t seq_len;
  std::int32_t num_splits;  ///< slices of this sequence's keys (1 = no split)
  std::int32_t pad[2];
};

/// One CTA's work in a prefill kernel: a tile of query rows of one sequence.
struct PrefillWork {
  std::int32_t seq;
  std::int32_t head;       ///< KV head (packed mma.sync kernel) or query head (Hopper kernel)
  std::int32_t row_tile;
  std::int32_t pad;
};

/// Everything a forward kernel reads. Strides are in elements. Device pointers only.
struct AttnParams {
  const void* q = nullptr;
  void* o = nullptr;
  std::int64_t q_stride_tok = 0, q_stride_head = 0;
  std::int64_t o_stride_tok = 0, o_stride_head = 0;

  const void* k = nullptr;
  const void* v = nullptr;
  std::int64_t k_stride_block = 0, k_stride_tok = 0, k_stride_head = 0;
  std::int64_t v_stride_block = 0, v_stride_tok = 0, v_stride_head = 0;

  const std::int32_t* query_start_loc = nullptr;  ///< [num_seqs + 1]
  const std::int32_t* seq_lens = nullptr;         ///< [num_seqs]
  const std::int32_t* block_table = nullptr;      ///< [num_seqs, block_table_stride]
  std::int32_t block_table_stride = 0;

  std::int32_t num_heads = 0, num_kv_heads = 0, group = 1, head_size = 0, block_size = 16;
  std::int32_t num_tokens = 0;

  // Score modifiers. Scores run in the log2 domain: s2 = log2(e) * score.
  float scale_log2 = 0.0f;     ///< scale * log2(e), used when there is no soft-cap
  float softcap_inv = 0.0f;    ///< scale / cap (0 = no soft-cap)
  float softcap_log2 = 0.0f;   ///< cap * log2(e)
  std::int32_t window_left = -1;   ///< keys with pos - j > window_left are hidden (-1 = none)
  std::int32_t window_right = -1;  ///< keys with j - pos > window_right are hidden (0 = causal)
  float v_scale = 1.0f;        ///< output multiplier: the fp8 cache's v_scale (1 for 16-bit caches)
  // fp8 caches with per-KV-head scales: [num_kv_heads] multipliers of the score scale
  // (k_scales) and of v_scale (v_scales); the layer's scalar is then folded in as 1. Null =
  // one scale per layer. Every CTA works on one KV head, so it reads one entry of each.
  const float* k_scales = nullptr;
  const float* v_scales = nullptr;
  const float* sinks = nullptr;        ///< [num_heads] sink logits, natural log domain
  const float* alibi_slopes = nullptr; ///< [num_heads]

  // Split-KV: partial outputs (normalised) and log2-sum-exp per split, merged afterwards.
  float* part_o = nullptr;     ///< [max_splits, num_part_tokens, num_heads, head_size]
  float* part_lse = nullptr;   ///< [max_splits, num_part_tokens, num_heads]
  std::int32_t num_part_tokens = 0;  ///< query tokens of the sequences that are split
  std::int32_t* split_counters = nullptr;  ///< per split row tile; zero between runs
  std::int32_t split_align = 16;  ///< decode slices start on multiples of this many keys (a power of 2)

  // Log-sum-exp of each row (decode kernel only; null = not wanted): natural log of the
  // softmax denominator, sinks included, -inf where a row sees no key.
  float* lse = nullptr;        ///< [num_tokens, num_heads] f32, heads contiguous
  std::int64_t lse_stride_tok = 0;

  const void* work = nullptr;  ///< DecodeWork[] or PrefillWork[]
  std::int32_t num_work = 0;

  // Decode only: the step's new keys and values, appended by the kernel itself (null = the
  // cache already holds them). Every slot is -1 or the token's own block-table position
  // (the planner checked), so each CTA writes the new tokens inside its key slice for its
  // KV head before it loads them; CTAs of other row tiles write the same bytes.
  const void* new_k = nullptr;
  const void* new_v = nullptr;
  std::int64_t new_k_stride_tok = 0, new_k_stride_head = 0;
  std::int64_t new_v_stride_tok = 0, new_v_stride_head = 0;
  const std::int64_t* slot_mapping = nullptr;  ///< [num_tokens]; -1 = not written
  /// The caller promised (PlanOptions::early_cache_reads) that nothing still running writes
  /// the positions before the new tokens: CTAs issue the tiles wholly before them before
  /// waiting for the kernels ahead (bulk and TMA copies only).
  std::int32_t early_kv_reads = 0;
  // fp8 caches: stored = saturate_e4m3(value * inv_scale), as the cache writer stores it.
  float k_inv_scale = 1.0f, v_inv_scale = 1.0f;
  const float* k_inv_scales = nullptr;  ///< per KV head, or null
  const float* v_inv_scales = nullptr;
};

// Launchers. Each validates nothing (the host planner has) and checks the launch.
/// How the decode kernel copies keys and values into shared memory.
enum DecodeLoads : int {
  kLoadsCpAsync = 0,  ///< 16-byte cp.async per thread (sm_80+)
  kLoadsBulk = 1,     ///< one bulk copy per key row (sm_90; 16-bit caches whose strides a
                      ///< tensor map cannot express)
  kLoadsTma = 2,      ///< one TMA box per page slice and 128 bytes of columns, 128-byte
                      ///< swizzled (sm_90; p.split_align a multiple of the box's keys)
  kLoadsTmaPages = 3,  ///< one TMA box per 16-key page slice holding every 64-column chunk of
                       ///< its keys, 128-byte swizzled (sm_90; 16-bit cache, head size 128 or
                       ///< 256 unpadded, 16-key boxes: decode_page_boxes_apply)
};
/// Where a 16-bit row fits page boxes (one TMA box per 16-key page slice holding all of its
/// 64-column chunks: the prefill's V, the decode's K and V): the box reads every chunk's 64
/// columns whole, so the head size must be whole chunks (a padded one would read the next
/// head's columns; 128 and 256 are the sizes the kernels compute that way), and the boxes
/// 16 keys (the P·V step, a decode warp's share of a tile).
constexpr bool page_boxes_fit(int head_size, int box_rows) {
  return (head_size == 128 || head_size == 256) && box_rows == 16;
}
/// Where kLoadsTmaPages applies: a 16-bit cache whose rows fit page boxes.
constexpr bool decode_page_boxes_apply(int head_size, bool kv_fp8, int box_rows) {
  return !kv_fp8 && page_boxes_fit(head_size, box_rows);
}
/// Split sequences are merged by the last slice's CTA. kv_fp8: the cache holds e4m3 bytes
/// (copied raw by TMA boxes or cp.async, converted to f16 in registers as the mma fragments
/// are built; k_scale is folded into the score scale by the planner, v_scale is p.v_scale;
/// per-head scales multiply both per CTA, see score_scale and output_scale). kv_maps:
/// the two encoded tensor maps (K, V) for kLoadsTma, else unused (may be null).
/// programmatic: launch with programmatic stream serialization (sm_90+; see
/// programmatic_launch.cuh), so the launch overlaps the tail of the kernel before it.
void launch_decode(const AttnParams& p, ScalarType e, int head_dim_pad, DecodeLoads loads, bool kv_fp8,
                   const void* kv_maps, int box_rows, bool programmatic, void* stream);
void launch_prefill_sm80(const AttnParams& p, ScalarType e, int head_dim_pad, bool kv_fp8, void* stream);
/// The Hopper prefill's cache and products: a 16-bit cache; an e4m3 cache widened to f16
/// by the producer warpgroup (f16 products, exact K and V); or an e4m3 cache used as fp8
/// wgmma operands (queries and probabilities quantised to e4m3, V transposed by the producer).
enum class KvPath { b16, f16_widened, e4m3 };

/// The forms of the Hopper prefill a launch takes (bit flags), each where it applies: the
/// planner chooses them from the layer's shape and the page size (hopper_variant).
struct HopperVariant {
  enum : int {
    wide_keys = 1,  ///< 176-key tiles at d ≤ 128 on a 16-bit cache without a causal mask or window
    /// Page-boxed V: one TMA box per 16-key page slice holding all of its 64-column
    /// chunks (a 5-D box), read by P·V one box per 16-key step; half of a d=128 tile's V
    /// boxes (a quarter of d=256's). 16-bit caches, head sizes 128 and 256, 16-key boxes.
    v_page_boxes = 2,
  };
};

/// Hopper prefill, one CTA per work item; `tma` points to the encoded tensor maps (Q, K, V
/// and O: TensorMaps) built by the host; box_rows = keys per TMA box (divides both the page
/// size and the key tile). kv: KvPath::b16 for a 16-bit cache; an e4m3 cache either way
/// (e4m3 products: head sizes up to 128). k_scale is in the score scale, v_scale in
/// p.v_scale (per-head scales as for decode). variant: HopperVariant flags, each where it
/// applies (hopper_variant). output_map: O's map was encoded, so full 64-row blocks of the
/// output are written by TMA stores.
void launch_prefill_sm90(const AttnParams& p, ScalarType e, int head_size, KvPath kv, const void* tma,
                         bool output_map, int box_rows, int variant, void* stream);

struct CacheWriteParams {
  const void* key = nullptr;
  const void* value = nullptr;
  std::int64_t key_stride_tok = 0, key_stride_head = 0;
  std::int64_t value_stride_tok = 0, value_stride_head = 0;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  std::int64_t k_stride_block = 0, k_stride_tok = 0, k_stride_head = 0;
  std::int64_t v_stride_block = 0, v_stride_tok = 0, v_stride_head = 0;
  const std::int64_t* slot_mapping = nullptr;
  std::int32_t num_tokens = 0, num_kv_heads = 0, head_size = 0, block_size = 16;
  // fp8 caches: stored = saturate_e4m3(value * inv_scale), rounded to nearest even.
  float k_inv_scale = 1.0f, v_inv_scale = 1.0f;
  // Per-KV-head inverse scales ([num_kv_heads], computed on the host as 1 / scale in
  // float); null = the scalars above.
  const float* k_inv_scales = nullptr;
  const float* v_inv_scales = nullptr;
};
/// to_fp8 = false copies 16-bit elements; true quantises `e` elements to e4m3.
/// programmatic: as for launch_decode.
void launch_cache_write(const CacheWriteParams& p, ScalarType e, bool to_fp8, bool programmatic, void* stream);

/// Decode kernel geometry, shared with the planner.
inline constexpr int kDecodeRows = 16;      ///< packed query rows per CTA
inline constexpr int kDecodeKeyTile = 64;   ///< keys per pipeline stage
/// The head dimension each kernel computes with: in decode the head size padded up to whole
/// TMA boxes (64 columns of a 16-bit cache, 128 of an fp8 one), so every sm_90 decode copies
/// by TMA (docs/DECISIONS.md has the measured cost and gain), in the mma.sync prefill to 32
/// columns. The padding columns are zero-filled, never read from memory or written back.
constexpr int decode_head_dim_pad(int head_size, bool kv_fp8) {
  const int box = kv_fp8 ? 128 : 64;
  return (head_size + box - 1) / box * box;
}
constexpr int prefill_sm80_head_dim_pad(int head_size) { return (head_size + 31) / 32 * 32; }
inline constexpr int kPrefillRows = 64;     ///< rows per CTA in the mma.sync prefill kernel
inline constexpr int kHopperRows = 128;     ///< query rows per CTA in the Hopper kernel
/// Keys per tile in the Hopper kernel: 128 up to d=128; 80 at d=256 (O alone is 128
/// registers per consumer thread there, and 2 stages of 80-key K and V tiles fill shared memory).
constexpr int hopper_key_tile(int head_dim) { return head_dim <= 128 ? 128 : 80; }
/// Where wide_keys can apply: d ≤ 128 on a 16-bit cache (the planner takes it only on layers
/// without a causal mask or window, and where it keeps the page's TMA boxes).
constexpr bool hopper_wide_keys_apply(int head_dim, KvPath kv) { return head_dim <= 128 && kv == KvPath::b16; }
/// Where v_page_boxes applies: a 16-bit cache whose rows fit page boxes (page_boxes_fit).
constexpr bool hopper_v_page_boxes_apply(int head_size, KvPath kv, int box_rows) {
  return kv == KvPath::b16 && page_boxes_fit(head_size, box_rows);
}
/// The key tile of a variant: wide_keys takes 176 keys up to d=128.
constexpr int hopper_key_tile(int head_dim, int variant) {
  return head_dim <= 128 && (variant & HopperVariant::wide_keys) ? 176 : hopper_key_tile(head_dim);
}
/// The head size the Hopper kernel computes with: 64, 96 (16-bit caches), 128 or 256, the
/// next one up from the layer's (0 above 256). The TMA boxes read the columns past the real
/// head size as zeros, so padded columns add nothing to Q·Kᵀ and produce output columns
/// that are not stored. At 96 the tiles keep two 64-column chunks (the upper half of the
/// second all zeros) and the products stop at column 96: Q·Kᵀ takes 6 steps of 16 instead
/// of 8 and P·V 96 output columns, a quarter less tensor work than computing 128. The fp8
/// paths widen and transpose whole 64- and 128-column units and compute 96 as 128.
constexpr int hopper_head_dim(int head_size, KvPath kv) {
  if (head_size <= 64) return 64;
  if (head_size <= 96 && kv == KvPath::b16) return 96;
  return head_size <= 128 ? 128 : head_size <= 256 ? 256 : 0;
}

/// The Hopper prefill's forms for a layer of `head_size` on pages of `block_size` keys.
/// Wide key tiles pay off without a mask, so a causal or windowed layer (`masked`) keeps 128
/// keys; and 176-key tiles take 16-key boxes from any page, so pages whose boxes they would
/// shrink keep 128-key tiles (page 128: 128-key tiles in 128-key boxes ran 4-6 % faster than
/// 176 in 16-key page boxes on the H200). V is page-boxed where its rows fit page boxes.
constexpr int hopper_variant(int head_size, KvPath kv, bool masked, int block_size) {
  const int d = hopper_head_dim(head_size, kv);
  int variant = 0;
  if (!masked && hopper_wide_keys_apply(d, kv) &&
      std::gcd(block_size, hopper_key_tile(d, HopperVariant::wide_keys)) >= std::gcd(block_size, hopper_key_tile(d)))
    variant |= HopperVariant::wide_keys;
  if (hopper_v_page_boxes_apply(head_size, kv, std::gcd(block_size, hopper_key_tile(d, variant))))
    variant |= HopperVariant::v_page_boxes;
  return variant;
}

}  // namespace attnsel::kernel::cuda
