// One DCP rank's attention over its shard: each query token's output over the keys the rank
// holds, with the log-sum-exp (natural log) of its logits — what the merge needs. This file
// is the single point where DCP meets a kernel: it is meant to call the backend kernel's
// execution with an LSE output once the kernel interface returns one; until then it runs
// the decode computation itself (fp32 arithmetic, every cache dtype the kernels read).
//
// Decode only (one query token per sequence): the query then sees every key of the
// sequence, so a shard needs no causal mask (vLLM's FlashAttention DCP path likewise
// attends the gathered queries over the local context without one:
// vllm/v1/attention/backends/flash_attn.py, _forward_with_dcp).
// Thread-safety: reentrant; parallel inside with OpenMP.
#pragma once

#include <span>

#include "attnsel/kernel.hpp"

namespace attnsel::distributed {

/// Checks that a layer can run under DCP here (ValueError naming the feature otherwise):
/// position-dependent terms (sliding window, ALiBi) and sinks are refused.
void validate_dcp_layer(const kernel::LayerParams& p);

/// query: [num_tokens, num_heads, head_size] (host, any float type); `cache`/`md` a rank's
/// shard (KVShard). Writes out [num_tokens, num_heads, head_size] and lse
/// [num_tokens, num_heads], both fp32; a sequence with no local keys gets out = 0 and
/// lse = -inf. ValueError for bad shapes or a query length other than 1.
void attend_shard(const kernel::LayerParams& p, const kernel::TensorView& query, const kernel::KVCacheView& cache,
                  const kernel::AttentionMetadata& md, std::span<float> out, std::span<float> lse);

}  // namespace attnsel::distributed
