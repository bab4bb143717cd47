// Internal: the plain parameter aggregates of the MLA CUDA kernels and their launchers,
// shared by the host planner (compiled by the C++ compiler) and the kernels (.cu): no CUDA
// types here, streams travel as void*.
#pragma once

#include <cstdint>

#include "attnsel/scalar_type.hpp"
#include "kernels/mla/cuda/decode_schedule.hpp"

namespace attnsel::kernel::cuda::mla {

inline constexpr int kLatentDim = 576;  ///< a cached entry: kv_lora_rank 512 + qk_rope_head_dim 64
inline constexpr int kValueDim = 512;   ///< the absorbed decode's value: the entry's first 512

/// The decode kernels, by how they lay out the products.
enum class DecodeForm : int {
  /// wgmma (sm_90a), 64 query rows per CTA, FlashMLA's "seesaw" of two warpgroups: S = Q·Kᵀ
  /// by one warpgroup per key tile, O's two 256-column halves one per warpgroup. The
  /// compute-bound form (many heads, several query tokens). 16-bit caches.
  rows64,
};

/// Query rows per CTA of a form.
constexpr int decode_row_tile(DecodeForm) { return 64; }

/// What the cache holds: the activations' 16-bit type, or e4m3 bytes (written by the cache
/// writer; the decode reads 16-bit caches).
enum class CacheKind : int { b16, e4m3 };

/// Everything a decode kernel reads. Strides are in elements. Device pointers only.
struct DecodeParams {
  const void* q = nullptr;  ///< [tokens · num_heads, 576] rows (16-bit)
  std::int64_t q_row_stride = 0;
  void* out = nullptr;      ///< [tokens · num_heads, 512] rows, the queries' dtype
  std::int64_t out_row_stride = 0;
  float* lse = nullptr;     ///< [tokens · num_heads] natural log, -inf for a row that sees no key; null = none

  const void* cache = nullptr;  ///< [num_blocks, page_size, 576] (16-bit or e4m3 bytes)
  std::int64_t cache_block_stride = 0, cache_row_stride = 0;
  const std::int32_t* block_table = nullptr;  ///< [num_requests, block_table_stride]
  std::int32_t block_table_stride = 0;
  std::int32_t page_size = 64;
  std::int32_t box_rows = 64;  ///< keys per TMA box: gcd(page_size, 64)

  std::int32_t num_heads = 0;
  std::int32_t max_rows = 0;  ///< query rows of the longest request: the partial slots' row count
  const DecodeRequest* requests = nullptr;
  std::int32_t num_requests = 0;
  const DecodePart* parts = nullptr;
  std::int32_t num_parts = 0;

  float* part_o = nullptr;    ///< [slots, max_rows, 512]: split pieces' normalised outputs
  float* part_lse = nullptr;  ///< [slots, max_rows]: their log2-sum-exp (log2 domain)

  float scale_log2 = 0.0f;  ///< softmax scale · log2(e), times k_scale for an e4m3 cache
  float out_scale = 1.0f;   ///< k_scale for an e4m3 cache (the values' dequantisation), else 1
};


/// The decode kernel: grid (row tiles, 1, num_parts); `maps` the encoded TMA maps
/// (DecodeMaps: the cache's and the queries'); `e` the queries' and outputs'
/// dtype (bf16 or f16). programmatic: launch with programmatic stream serialization, so the
/// launch overlaps the tail of the kernel before it (programmatic_launch.cuh).
void launch_decode_rows64(const DecodeParams& p, ScalarType e, int row_tiles, const void* maps, bool programmatic,
                          void* stream);

/// The combine kernel: merges the split requests' pieces (grid: requests × groups of 8 rows).
void launch_combine(const DecodeParams& p, ScalarType e, bool programmatic, void* stream);

/// vLLM's concat_and_cache_mla: token t < num_tokens with slot_mapping[t] ≥ 0 writes its
/// latent kv_c[t] (512) and rope key k_pe[t] (64) into that slot, e4m3(x / k_scale) for an
/// e4m3 cache.
struct CacheWriteParams {
  const void* kv_c = nullptr;
  std::int64_t kv_c_stride = 0;
  const void* k_pe = nullptr;
  std::int64_t k_pe_stride = 0;
  void* cache = nullptr;
  std::int64_t cache_block_stride = 0, cache_row_stride = 0;
  std::int32_t page_size = 0;
  const std::int64_t* slot_mapping = nullptr;
  std::int32_t num_tokens = 0;
  float k_scale = 1.0f;
};
void launch_cache_write(const CacheWriteParams& p, ScalarType e, CacheKind cache, bool programmatic, void* stream);

}  // namespace attnsel::kernel::cuda::mla
