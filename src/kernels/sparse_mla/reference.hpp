// The plain sparse MLA reference, in double precision: the two cache writers, the indexer's
// scores (DeepGEMM's fp8_mqa_logits reference as vLLM's tests run it: fp32-exact products of
// the quantised query and key, here in double), its top-k, the conversion of request
// positions into cache rows, and the attention over index rows — un-absorbed (the judge of
// execute) and latent (the judge of attend_latent). Obviously correct rather than fast; the
// scale rules are written out here as vLLM writes them (exp2(ceil(log2(·)))), not taken from
// the kernels' formats.hpp.
//
// fp8 values enter dequantised exactly as the kernels read them: an indexer key as e4m3 ·
// scale, an fp8_ds_mla latent value as bf16(e4m3 · tile scale) (FlashMLA's reading), its rope
// value as the stored bf16. A query token whose index row holds no valid entry has output 0
// and LSE -inf.
// Thread-safety: reentrant (the loops run on the caller's OpenMP team).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "attnsel/kernel.hpp"
#include "attnsel/sparse_mla.hpp"
#include "kernels/mla/reference.hpp"

namespace attnsel::kernel::sparse_mla::reference {

using Result = mla::reference::Result;

// ---- the indexer

/// indexer_k_quant_and_cache: token t < num_tokens with slots[t] >= 0 writes its key k[t]
/// (head_dim values) as e4m3(k / scale) with scale = 2^ceil(log2(max(amax, 1e-4) / 448)),
/// and the scale, into its block's value and scale areas.
void write_keys(const IndexerLayerParams& p, const TensorView& k, const TensorView& key_cache,
                std::span<const std::int64_t> slots, int num_tokens);

/// The positions each query token sees: L - s_q + j + 1 for query j of a request (0 for a
/// request with seq_len 0).
std::vector<std::int64_t> row_lengths(const AttentionMetadata& md);

/// Every query token's scores, row-major [tokens][width]: I[t, s] for s < row_lengths[t],
/// -inf after. Queries quantised per (token, head) as vLLM does: σ = 2^ceil(log2(max(amax,
/// 1e-10) / 448)), q8 = e4m3(q / σ), w' = w · σ · head_dim^-0.5 · num_heads^-0.5.
std::vector<double> logits(const IndexerLayerParams& p, const AttentionMetadata& md, const TensorView& q,
                           const TensorView& weights, const TensorView& key_cache, std::int64_t width);

/// The top-k of score rows [rows][width] over each row's first lengths[r] entries: highest
/// first, equal scores by lower position, -1 after the last; [rows][topk].
std::vector<std::int32_t> top_k(const std::vector<double>& scores, std::int64_t width,
                                const std::vector<std::int64_t>& lengths, int topk);

/// Request positions [tokens][topk] → cache rows: block_table[seq][p / block_size] ·
/// block_size + p % block_size for 0 <= p < seq_len, else -1.
std::vector<std::int32_t> physical_indices(const AttentionMetadata& md, int block_size,
                                           const std::vector<std::int32_t>& local, int topk);

// ---- the latent cache and the attention

/// concat_and_cache_mla: token t < num_tokens with slots[t] >= 0 writes kv_c[t] then k_pe[t]
/// (the activation dtype; fp8_ds_mla: e4m3(x / s) per tile with s = 2^ceil(log2(max(amax /
/// 448, 1e-4))), the four scales, the rope values as bf16).
void write_latent(const SparseMlaLayerParams& p, const TensorView& kv_c, const TensorView& k_pe,
                  const TensorView& cache, std::span<const std::int64_t> slots, int num_tokens);

/// Entry e (< 576) of the cache's physical row `row`, as the kernels read it.
double latent_entry(const SparseMlaLayerParams& p, const TensorView& cache, std::int64_t row, int e);

/// The sparse latent MQA: q_latent [tokens, heads, 576] over the rows of each token's index
/// row (`indices`, physical, [tokens][topk]; -1 skipped), values their first 512 entries:
/// out [tokens, heads, 512] and LSE.
Result attend_latent(const SparseMlaLayerParams& p, const TensorView& q_latent, const std::vector<std::int32_t>& indices,
                     const TensorView& cache, int tokens);

/// The un-absorbed sparse MLA: q [tokens, heads, 192] over the rows of each token's index
/// row (physical), per head key [W_UK[n]ᵀ c | k_pe] and value W_UV[n]ᵀ c of each latent c:
/// out [tokens, heads, 128] and LSE.
Result attend(const SparseMlaLayerParams& p, const TensorView& q, const std::vector<std::int32_t>& indices,
              const TensorView& cache, int tokens);

}  // namespace attnsel::kernel::sparse_mla::reference
