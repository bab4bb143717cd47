// The DCP merge's per-rank step on the GPU: scale a rank's partial attention output by
// exp(L_rank - L), L the log-sum-exp over every rank's LSE — the same rules as the host
// version (distributed/merge_states.hpp, after vLLM's correct_attn_out in
// vllm/v1/attention/ops/common.py): NaN and +inf LSEs count as empty shards, a token no
// rank saw gets 0 and L = -inf. No CUDA headers here; without CUDA it throws
// NotImplementedError. Thread-safety: launches on the caller's stream.
#pragma once

namespace attnsel::kernel::cuda {

/// Device pointers: lses [world, tokens, heads] fp32; out [tokens, heads, head_size] fp32,
/// scaled in place; merged_lse [tokens, heads] or null. `stream` is a cudaStream_t (null =
/// the default stream). Asynchronous.
void correct_partial_output(const float* lses, int world, int rank, int tokens, int heads, int head_size, float* out,
                            float* merged_lse, void* stream);

}  // namespace attnsel::kernel::cuda
