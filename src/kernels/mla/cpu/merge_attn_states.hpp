// vLLM's merge_attn_states on the CPU (vllm/v1/attention/ops/merge_attn_states.py,
// csrc/attention/merge_attn_states.cu): two attention results over disjoint key sets of the
// same queries, each normalised with its log-sum-exp, merged into the result over the union.
// The MLA prefill folds its context chunks and the new tokens' result with it.
// Thread-safety: reentrant; runs on the caller's OpenMP team.
#pragma once

#include <cstdint>
#include <optional>

#include "attnsel/kernel.hpp"

namespace attnsel::kernel::mla::cpu {

/// Per token t and head h, with p = prefix_lse[h][t] and s = suffix_lse[h][t]:
///   +inf is read as -inf (FlashAttention-2 reports +inf for an empty key set);
///   M = max(p, s); when M = -inf (neither side saw a key): output 0, LSE -inf (vLLM leaves
///   this case undefined);
///   else a = exp(p - M), c = exp(s - M), output = prefix · a/(a + c) + suffix · c/(a + c)
///   (the weights first, then the products, as vLLM; a side of weight 0 is not read, so a
///   NaN there cannot leak), LSE = ln(a + c) + M; sums in fp32. A NaN LSE gives a NaN row.
/// Tokens from prefill_tokens_with_context on copy the suffix (output and LSE).
/// Outputs [T, H, D] (f32, f16 or bf16, each its own), LSEs [H, T] f32, any strides (a
/// token-major [T, H] buffer is the view with strides [1, H]); output_lse may be null.
/// `output` may be the prefix or the suffix view itself (each element is read before it is
/// written); any other overlap of an output with an input is refused (ValueError, like
/// every shape, dtype or device problem).
void merge_attn_states(const TensorView& output, const TensorView* output_lse, const TensorView& prefix_output,
                       const TensorView& prefix_lse, const TensorView& suffix_output, const TensorView& suffix_lse,
                       std::optional<std::int64_t> prefill_tokens_with_context = std::nullopt);

}  // namespace attnsel::kernel::mla::cpu
