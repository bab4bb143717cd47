// The steps of the CPU MLA kernel, called by its MlaImpl (cpu_mla.cpp) once the arguments
// are checked against the plan:
//   decode  — q_nope · W_UK (rounded to the activation dtype, as vLLM's bmm), the latent
//             attention over the cache, the latent output (in the activation dtype, as
//             FlashMLA returns it) · W_UV;
//   prefill — the new tokens' latents up-projected to per-head keys [k_nope | k_pe] and
//             values, causal attention among them; the cached context gathered chunk by
//             chunk (fp8 dequantised), up-projected, attended without a mask and folded by
//             merge_attn_states; the folded context merged with the new tokens' result;
//   write   — vLLM's concat_and_cache_mla.
// Every step runs on the caller's OpenMP team, at most plan.threads threads, and gives the
// same bits on any team.
#pragma once

#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"
#include "kernels/mla/cpu/plan.hpp"
#include "kernels/mla/cpu/run_items.hpp"
#include "kernels/mla/cpu/weights.hpp"
#include "kernels/mla/validation.hpp"

namespace attnsel::kernel::mla::cpu {

/// One layer's view of a step.
struct LayerStep {
  const MlaLayerParams& params;
  const LayerWeights& weights;
  const CpuMlaPlan& plan;
  CacheFormat format;
  bool bf16_dot = false;  ///< the attention passes use AVX-512-BF16 dot products
  int team() const;       ///< the threads a step runs on: the caller's team, at most plan.threads
  ItemMemory item_memory() const;  ///< the plan's scratch and partial slots, for run_items on team()
};

/// The latent attention of the plan's decode requests: q_latent [decode tokens, heads,
/// latent_size] → out (rows of kv_lora_rank at out.data with out's strides, the activation
/// dtype), and the LSE at lse[token · lse_stride + head] when lse is not null.
void latent_attention(const LayerStep& s, const TensorView& q_latent, const TensorView& cache,
                      const TensorView& out, float* lse, std::int64_t lse_stride);

/// execute()'s decode requests: output rows [0, decode tokens).
void execute_decode(const LayerStep& s, const TensorView& q, const TensorView& cache, const TensorView& output);

/// execute()'s prefill requests: output rows [decode tokens, num_actual_tokens).
void execute_prefill(const LayerStep& s, const TensorView& q, const TensorView& kv_c, const TensorView& k_pe,
                     const TensorView& cache, const TensorView& output);

/// concat_and_cache_mla for the plan's slots (checked in plan()).
void write_cache_rows(const LayerStep& s, const TensorView& kv_c, const TensorView& k_pe, const TensorView& cache);

}  // namespace attnsel::kernel::mla::cpu
