// What the CPU_ATTN driver hands its SIMD kernels: one layer's context (pointers, strides,
// the variant) and work items. A work item is a group of query rows — tokens × query heads
// that share one KV head — attending to one range of keys; every item streams its KV range
// once for all its rows (GQA packing). Plain data, no SIMD types.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attnsel/kernel.hpp"

namespace attnsel::kernel::cpu {

inline constexpr int kMaxRows = 64;      ///< query rows (token × head) per work item
inline constexpr int kTileKeys = 32;     ///< keys per online-softmax step
inline constexpr int kMaxHeadSize = 512;
inline constexpr int kFewRows = 8;         ///< rows per KV head up to which an item is "decode-like"
inline constexpr int kMaxItemKvHeads = 8;  ///< KV heads one decode-like item may cover

struct LayerCtx {
  int head_size = 0;        ///< the queries' and keys' width
  /// The values' width when it differs from the keys' (MLA: 512 over the latent, 128 after
  /// the up-projection), else 0.
  int value_head_size = 0;
  int value_size() const { return value_head_size > 0 ? value_head_size : head_size; }
  int group = 1;            ///< query heads per KV head
  float qk_scale = 1.0f;    ///< softmax scale × key dequantisation scale
  float v_scale = 1.0f;     ///< value dequantisation scale
  /// fp8 caches with per-head scales: [num_kv_heads] multipliers of qk_scale / v_scale
  /// (the layer's scalar is then 1), else null.
  const float* k_head_scales = nullptr;
  const float* v_head_scales = nullptr;
  float soft_cap = 0.0f;    ///< 0 = off
  bool causal = true;
  std::int64_t window = -1; ///< W - 1, or -1 for no sliding window
  const float* alibi = nullptr;  ///< [num_heads] or null
  const float* sinks = nullptr;  ///< [num_heads] or null

  ScalarType q_type = ScalarType::f32;    ///< query element type
  ScalarType out_type = ScalarType::f32;  ///< output element type
  ScalarType kv = ScalarType::f32;  ///< how the cache stores an element: f32, f16, bf16 or fp8
  bool bf16_dot = false;    ///< use the AVX-512-BF16 path (bf16 queries, bf16-exact KV)

  const std::uint8_t* query = nullptr;
  std::int64_t q_stride[2] = {};  ///< token, head (elements)
  std::uint8_t* out = nullptr;
  std::int64_t o_stride[2] = {};
  /// Null, or where items that write the output also write each row's log-sum-exp
  /// (natural log of the softmax denominator, -inf for a row that saw no key): f32 at
  /// token * lse_stride + head.
  float* lse = nullptr;
  std::int64_t lse_stride = 0;
  const std::uint8_t* key_cache = nullptr;
  const std::uint8_t* value_cache = nullptr;
  std::int64_t k_stride[3] = {};  ///< block, token-in-block, head (elements)
  std::int64_t v_stride[3] = {};
  const std::int32_t* block_table = nullptr;
  int max_blocks_per_seq = 0;
  int block_size = 0;
  int num_kv_heads = 0;
  /// Bytes of one block (all KV heads) when each cache stores its blocks as contiguous
  /// regions (NHD, HND), else 0: an item covering every KV head then prefetches whole
  /// blocks in address order.
  std::int64_t block_bytes = 0;
};

struct WorkItem {
  int seq = 0;
  int kv_head = 0;                     ///< the first KV head
  int kv_heads = 1;                    ///< consecutive KV heads (several only for decode-like items)
  int head_begin = 0, head_end = 0;    ///< query heads (global ids) of the first KV head's group
  int token_begin = 0, token_end = 0;  ///< query tokens (global ids) of this item
  std::int64_t pos_begin = 0;          ///< position of token_begin in its sequence
  std::int64_t key_begin = 0, key_end = 0;  ///< the keys this item reads
  int partial = -1;  ///< -1: write the output; else the partial slot for a split-KV merge
  double cost = 0.0;

  /// Query rows per KV head (tokens × heads).
  int num_rows() const { return (token_end - token_begin) * (head_end - head_begin); }
  /// The same rows for the item's j-th KV head (query heads shift by j groups).
  WorkItem head(int j, int group) const {
    WorkItem w = *this;
    w.kv_head += j;
    w.kv_heads = 1;
    w.head_begin += j * group;
    w.head_end += j * group;
    return w;
  }
};

/// Unnormalised results of one split: o[rows][value_size] (already × the head's v_scale), running max
/// m[rows] and sum l[rows] of the exponentials relative to m. Rows of KV head j of an item
/// start at row j × kMaxRows.
struct PartialView {
  float* o = nullptr;
  float* m = nullptr;
  float* l = nullptr;
};

/// Floats of one split-KV partial slot: kMaxItemKvHeads × kMaxRows rows of o, m and l
/// (`value_size`: LayerCtx::value_size()).
inline std::size_t partial_slot_floats(int value_size) {
  return static_cast<std::size_t>(kMaxItemKvHeads) * kMaxRows * (static_cast<std::size_t>(value_size) + 2);
}
/// The partial of KV head j within a slot.
inline PartialView partial_for(float* slot, int value_size, int j) {
  const std::size_t rows = static_cast<std::size_t>(kMaxItemKvHeads) * kMaxRows;
  PartialView v;
  v.o = slot + static_cast<std::size_t>(j) * kMaxRows * static_cast<std::size_t>(value_size);
  v.m = slot + rows * static_cast<std::size_t>(value_size) + static_cast<std::size_t>(j) * kMaxRows;
  v.l = slot + rows * (static_cast<std::size_t>(value_size) + 1) + static_cast<std::size_t>(j) * kMaxRows;
  return v;
}

/// Bytes of per-thread scratch the kernels need for a head size.
std::size_t scratch_bytes(int head_size);

/// True when this machine runs the AVX-512-BF16 dot-product path.
bool cpu_has_bf16_dot();

/// The best kernel this machine runs (Highway dynamic dispatch): processes one item.
/// `scratch` is 64-byte aligned and scratch_bytes(head_size) long; `partial_slot` is the
/// item's split-KV slot (partial_slot_floats) or null when it writes the output.
void process_item(const LayerCtx& ctx, const WorkItem& item, float* partial_slot, void* scratch);

/// The Highway target process_item dispatches to, e.g. "AVX3" (+ "BF16" when used).
const char* kernel_target_name(const LayerCtx& ctx);

}  // namespace attnsel::kernel::cpu
