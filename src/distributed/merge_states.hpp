// Merging DCP ranks' partial attention outputs with their log-sum-exps (natural log).
//
// Rank r attended over its shard: output O_r and LSE L_r per (token, head). The full
// attention is sum_r exp(L_r - L) * O_r with L = log(sum_r exp(L_r)). vLLM does it in two
// collectives (vllm/v1/attention/ops/common.py, cp_lse_ag_out_rs): all-gather the LSEs,
// let every rank scale its own output by exp(L_r - L) (correct_attn_out), then
// reduce-scatter the scaled outputs over the heads, so each rank ends with the sum for its
// slice of heads. An empty shard has L_r = -inf and contributes nothing; NaN and +inf LSEs
// count as -inf, and a token no rank saw gets output 0 and L = -inf — vLLM's rules.
// The CUDA version of correct_partial_output is kernels/attention/cuda/merge_states.hpp.
// Thread-safety: pure functions over caller-owned buffers.
#pragma once

#include <span>

namespace attnsel::distributed {

/// lses: [world, tokens, heads], every rank's LSEs; out: [tokens, heads, head_size], rank
/// `rank`'s partial output, scaled in place by exp(L_rank - L); merged_lse (optional, may
/// be empty): [tokens, heads] receives L.
void correct_partial_output(std::span<const float> lses, int world, int rank, int tokens, int heads, int head_size,
                            std::span<float> out, std::span<float> merged_lse);

/// The whole merge in one place (for tests and single-process use): outs
/// [world, tokens, heads, head_size] and lses [world, tokens, heads] → out
/// [tokens, heads, head_size] and lse [tokens, heads] (lse may be empty).
void merge_partials(std::span<const float> outs, std::span<const float> lses, int world, int tokens, int heads,
                    int head_size, std::span<float> out, std::span<float> lse);

/// [tokens, heads, head_size] → [world, tokens, heads / world, head_size]: block r holds
/// the heads that rank r keeps after the reduce-scatter (heads % world == 0).
void pack_heads_by_rank(std::span<const float> in, int world, int tokens, int heads, int head_size,
                        std::span<float> packed);

}  // namespace attnsel::distributed
