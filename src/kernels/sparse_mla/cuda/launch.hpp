// Internal: the plain parameter aggregates of the sparse MLA CUDA kernels and their
// launchers, shared by the host code (compiled by the C++ compiler) and the kernels (.cu):
// no CUDA types here, streams travel as void*. Strides are in elements of the tensor's
// type (bytes for the u8 caches). Device pointers only.
#pragma once

#include <cstdint>

#include "attnsel/scalar_type.hpp"

namespace attnsel::kernel::cuda::sparse_mla {

inline constexpr int kLatentDim = 576;  ///< a cached latent entry: kv_lora_rank 512 + qk_rope_head_dim 64
inline constexpr int kValueDim = 512;   ///< the latent attention's value: the entry's first 512
inline constexpr int kRopeDim = 64;
inline constexpr int kHeadGroup = 16;    ///< query heads per CTA of the latent attention (one mma row tile)
inline constexpr int kKeyChunk = 64;     ///< index-row entries a CTA gathers at once
inline constexpr int kIndexerDim = 128;  ///< the indexer's head_dim (one fp8 block)
inline constexpr int kTopKThreads = 512;
inline constexpr int kTopKItems = 8;
/// The widest index row the GPU top-k sorts (its CTA holds the k selected keys at once).
inline constexpr int kMaxTopK = kTopKThreads * kTopKItems;

// ---- the sparse latent attention ------------------------------------------------------

/// FlashMLA's sparse decode for every query token: q_latent rows over the cache rows of the
/// token's index row. An index outside [0, cache_rows) (−1 in particular) contributes
/// nothing and its row is never read.
struct LatentAttendParams {
  const void* q = nullptr;  ///< [tokens, heads, 576] activation dtype
  std::int64_t q_token_stride = 0, q_head_stride = 0;
  const std::int32_t* indices = nullptr;  ///< [tokens, topk] physical cache rows
  std::int64_t indices_stride = 0;
  int topk = 0;
  const void* cache = nullptr;  ///< row r at r × cache_row_stride (16-bit: elements; fp8_ds_mla: bytes)
  std::int64_t cache_row_stride = 0;
  std::int64_t cache_rows = 0;  ///< num_blocks × block_size
  void* out = nullptr;          ///< [tokens, heads, 512] activation dtype
  std::int64_t out_token_stride = 0, out_head_stride = 0;
  float* lse = nullptr;  ///< [tokens, heads] natural log (−inf for a row with no entry); null = none
  std::int64_t lse_token_stride = 0;
  int tokens = 0, heads = 0;
  float scale_log2 = 0.0f;  ///< softmax scale · log2(e)
  /// Pieces each index row is split into (1: the kernel writes out and lse itself), each of
  /// keys_per_split entries (a multiple of kKeyChunk).
  int splits = 1;
  int keys_per_split = 0;
  float* part_o = nullptr;    ///< [splits, tokens, heads, 512] normalised partial outputs
  float* part_lse = nullptr;  ///< [splits, tokens, heads] their natural-log LSE
};

/// Latent cache formats the attention reads.
enum class LatentCache : int { b16, ds_mla };

void launch_latent_attend(const LatentAttendParams& p, ScalarType dtype, LatentCache cache, void* stream);
/// Merges the split pieces into out and lse (p.splits > 1).
void launch_latent_combine(const LatentAttendParams& p, ScalarType dtype, void* stream);

// ---- the latent cache write -----------------------------------------------------------

/// vLLM's concat_and_cache_mla: token t with slot >= 0 writes kv_c[t] and k_pe[t].
struct LatentWriteParams {
  const void* kv_c = nullptr;  ///< [tokens, 512]
  std::int64_t kv_c_stride = 0;
  const void* k_pe = nullptr;  ///< [tokens, 64]
  std::int64_t k_pe_stride = 0;
  void* cache = nullptr;
  std::int64_t cache_row_stride = 0;  ///< as LatentAttendParams
  const std::int64_t* slots = nullptr;
  int tokens = 0;
};
void launch_latent_write(const LatentWriteParams& p, ScalarType dtype, LatentCache cache, void* stream);

// ---- request positions to cache rows ---------------------------------------------------

struct PhysicalParams {
  const std::int32_t* local = nullptr;  ///< [tokens, topk] request positions
  std::int64_t local_stride = 0;
  std::int32_t* physical = nullptr;  ///< [tokens, topk] cache rows
  std::int64_t physical_stride = 0;
  const std::int32_t* token_seq = nullptr;    ///< [tokens] each token's request
  const std::int32_t* seq_lens = nullptr;     ///< [requests]
  const std::int32_t* block_table = nullptr;  ///< [requests, table_stride]
  int table_stride = 0;
  int block_size = 0;
  int tokens = 0, topk = 0;
};
void launch_physical_indices(const PhysicalParams& p, void* stream);

// ---- the absorption's per-head products --------------------------------------------------

/// c[t, h, :n] = a[t, h, :k] · b[h] for every token and head; b[h] is [k, n] row-major.
/// fp32 sums, one rounding to the activation dtype.
struct HeadGemmParams {
  const void* a = nullptr;
  std::int64_t a_token_stride = 0, a_head_stride = 0;
  const void* b = nullptr;  ///< [heads, k, n] contiguous
  void* c = nullptr;
  std::int64_t c_token_stride = 0, c_head_stride = 0;
  int tokens = 0, heads = 0, k = 0, n = 0;
};
void launch_head_gemm(const HeadGemmParams& p, ScalarType dtype, void* stream);

/// dst[t, h, :cols] = src[t, h, :cols] (the rope part of the absorbed query).
struct RowCopyParams {
  const void* src = nullptr;
  std::int64_t src_token_stride = 0, src_head_stride = 0;
  void* dst = nullptr;
  std::int64_t dst_token_stride = 0, dst_head_stride = 0;
  int tokens = 0, heads = 0, cols = 0;
};
void launch_row_copy(const RowCopyParams& p, ScalarType dtype, void* stream);

/// kv_b_proj [heads · (nope + v), latent] (rows of unit stride, row_stride apart) into
/// W_UK [heads, nope, latent] and W_UVᵀ [heads, latent, v], the layouts launch_head_gemm
/// multiplies by.
struct SplitWeightsParams {
  const void* kv_b_proj = nullptr;
  std::int64_t row_stride = 0;
  void* w_uk = nullptr;
  void* w_uv_t = nullptr;
  int heads = 0, nope = 0, v = 0, latent = 0;
};
void launch_split_weights(const SplitWeightsParams& p, ScalarType dtype, void* stream);

// ---- the indexer ----------------------------------------------------------------------

/// vLLM's indexer_k_quant_and_cache: token t with slot >= 0 writes e4m3(k / scale) and the
/// power-of-two scale of max(amax, 1e-4) / 448 into its block's value and scale areas.
struct KeyWriteParams {
  const void* k = nullptr;  ///< [tokens, 128] activation dtype
  std::int64_t k_stride = 0;
  std::uint8_t* cache = nullptr;
  std::int64_t block_stride = 0;  ///< bytes
  int block_size = 0;
  const std::int64_t* slots = nullptr;
  int tokens = 0;
};
void launch_key_write(const KeyWriteParams& p, ScalarType dtype, void* stream);

/// Each query head quantised to e4m3 with the power-of-two scale σ of max(amax, 1e-10) /
/// 448 (stored as bf16, exact), and its weight w' = w · σ · weight_scale.
struct QueryQuantParams {
  const void* q = nullptr;  ///< [tokens, heads, 128]
  std::int64_t q_token_stride = 0, q_head_stride = 0;
  const void* weights = nullptr;  ///< [tokens, heads] f32 or the activation dtype
  std::int64_t weights_stride = 0;
  bool weights_f32 = true;
  std::uint16_t* q8 = nullptr;  ///< [tokens, heads, 128] bf16
  float* w_eff = nullptr;       ///< [tokens, heads]
  int tokens = 0, heads = 0;
  float weight_scale = 0.0f;  ///< head_dim^-0.5 · num_heads^-0.5
};
void launch_query_quant(const QueryQuantParams& p, ScalarType dtype, void* stream);

/// Row t of logits: I[t, s] = κ_s · Σ_h w'[t, h] · ReLU(q8[t, h] · k8[s]) for s < row_len[t],
/// −inf for row_len[t] <= s < width.
struct ScoreParams {
  const std::uint16_t* q8 = nullptr;  ///< [tokens, heads, 128] bf16 (this wave's)
  const float* w_eff = nullptr;       ///< [tokens, heads]
  const std::uint8_t* cache = nullptr;
  std::int64_t block_stride = 0;  ///< bytes
  int block_size = 0;
  const std::int32_t* token_seq = nullptr;  ///< [all tokens]
  const std::int32_t* row_len = nullptr;    ///< [all tokens]
  const std::int32_t* block_table = nullptr;
  int table_stride = 0;
  float* logits = nullptr;
  std::int64_t logits_stride = 0;
  std::int64_t width = 0;
  int token_begin = 0;  ///< the wave's first token (row 0 of q8, w_eff and logits)
  int tokens = 0, heads = 0;
};
void launch_scores(const ScoreParams& p, void* stream);

/// Row t of indices: the top `topk` of logits row t over its first row_len positions,
/// highest first, equal scores by the lower position (NaN lowest), −1 after the last.
struct TopKParams {
  const float* logits = nullptr;
  std::int64_t logits_stride = 0;
  const std::int32_t* row_len = nullptr;  ///< [all tokens]
  int token_begin = 0;                    ///< row 0 of logits and indices is this token
  std::int32_t* indices = nullptr;
  std::int64_t indices_stride = 0;
  int tokens = 0, topk = 0;
};
void launch_top_k(const TopKParams& p, void* stream);

}  // namespace attnsel::kernel::cuda::sparse_mla
