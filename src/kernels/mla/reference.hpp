// The plain MLA reference, in double precision: the cache writer, the un-absorbed MLA of a
// step (the judge of every kernel's execute), and the latent MQA of the absorbed decode (the
// judge of decode_latent's own output and log-sum-exp). Obviously correct rather than fast.
//
// Un-absorbed: per head n, key j is [W_UK[n]ᵀ c_j (qk_nope) | k_pe_j (qk_rope)] and value j is
// W_UV[n]ᵀ c_j, with W_UK / W_UV the head's rows of kv_b_proj and c_j the latent: read from the
// cache (fp8 dequantised, x̂ = stored · k_scale) for decode requests and for the cached
// context of prefills, taken unquantised from the step's kv_c / k_pe for a prefill's new
// tokens. Query j of a request with L cached tokens and s_q query tokens sees keys
// [0, L - s_q + j]; the softmax scale is the layer's. A row that sees no key (a decode
// request with L = 0) has output 0 and LSE -inf.
// Thread-safety: reentrant (the loops run on the caller's OpenMP team).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"

namespace attnsel::kernel::mla::reference {

/// Outputs [tokens, num_heads, width] and natural-log LSEs [tokens, num_heads].
struct Result {
  std::vector<double> out;
  std::vector<double> lse;
  int width = 0;
  /// Rows that see no key yet: outputs 0, LSEs -inf.
  static Result empty(std::int64_t tokens, int num_heads, int width);
};

/// vLLM's concat_and_cache_mla: token t < num_tokens with slot_mapping[t] >= 0 writes kv_c[t]
/// (kv_lora_rank entries) then k_pe[t] (qk_rope_head_dim) to that slot, converted to the
/// cache's type (fp8: e4m3(x / k_scale), saturating, round to nearest even).
void write_cache(const MlaLayerParams& p, const TensorView& kv_c, const TensorView& k_pe, const TensorView& cache,
                 std::span<const std::int64_t> slot_mapping, int num_tokens);

/// Entry e of cached position `pos` of request `seq` as the kernels read it (fp8 dequantised).
double cache_entry(const MlaLayerParams& p, const TensorView& cache, const AttentionMetadata& md, int seq,
                   std::int64_t pos, int e);

/// The un-absorbed MLA of every query token of the step: out [num_actual_tokens, num_heads,
/// v_head_dim] and LSE. `decode_query_len` splits the batch as the kernels do (decode
/// requests read their new tokens from the cache; prefills take them from kv_c / k_pe).
Result attend(const MlaLayerParams& p, const AttentionMetadata& md, int decode_query_len, const TensorView& q,
              const TensorView& kv_c, const TensorView& k_pe, const TensorView& cache);

/// The latent MQA of the decode requests (the first num_decodes): q_latent [decode tokens,
/// num_heads, latent_size], keys the cached latents, values their first kv_lora_rank
/// entries; out [decode tokens, num_heads, kv_lora_rank] and LSE.
Result attend_latent(const MlaLayerParams& p, const AttentionMetadata& md, int decode_query_len,
                     const TensorView& q_latent, const TensorView& cache);

}  // namespace attnsel::kernel::mla::reference
