// The steps of the CPU indexer, called by its IndexerImpl (cpu_indexer.cpp) once the
// arguments are checked against the plan:
//   write  — vLLM's indexer_k_quant_and_cache (indexer_cache_write.cpp);
//   score  — a wave's query heads quantised (e4m3 with a power-of-two scale σ folded into
//            the head weights, as vLLM's fused_indexer_q_rope_quant), then per item each run
//            of cached keys widened to bf16 (exact), multiplied with the token's heads
//            (gemm.hpp), ReLU'd, weighted and summed over the heads, times the key's scale
//            (indexer_scores.cpp);
//   select — each row's top-k (indexer_select.cpp).
// Every step runs on the caller's OpenMP team, at most plan.threads threads; the results do
// not depend on the team (each score is one sum in a fixed order).
#pragma once

#include <cstdint>

#include "attnsel/sparse_mla.hpp"
#include "kernels/sparse_mla/cpu/indexer_plan.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

/// One layer's view of a step.
struct IndexerStep {
  const IndexerLayerParams& params;
  const CpuIndexerPlan& plan;
  bool bf16_dot = false;  ///< the products use AVX-512-BF16
  int team() const;       ///< the threads a step runs on: the caller's team, at most plan.threads
};

/// indexer_k_quant_and_cache for the plan's slots (checked in plan()).
void write_keys(const IndexerStep& s, const TensorView& k, const TensorView& key_cache);

/// The scores of wave `wave`'s tokens: the row of token t at out + (t - first_row) · out_stride,
/// its first row_length[t] entries the scores, -inf from there to `width` (if further).
void score_wave(const IndexerStep& s, int wave, const TensorView& q, const TensorView& weights,
                const TensorView& key_cache, float* out, std::int64_t out_stride, int first_row, std::int64_t width);

/// The top-k of wave `wave`'s rows (scored into plan.logits from the wave's first token):
/// indices row t at indices + t · indices_stride.
void select_wave(const IndexerStep& s, int wave, std::int32_t* indices, std::int64_t indices_stride);

}  // namespace attnsel::kernel::sparse_mla::cpu
