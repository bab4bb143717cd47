// An MLA step's batch as every device's plan keeps it: host copies of the batch arrays,
// checked against the latent cache's geometry; the split into decode and prefill requests
// (vLLM's split_decodes_and_prefills, vllm/v1/attention/backends/utils.py); and the chunks
// the prefills' cached context is read in (vLLM's MLACommonMetadataBuilder,
// vllm/model_executor/layers/attention/mla_attention.py). Device-neutral host code.
// Thread-safety: plain values; build_batch writes only its argument.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"

namespace attnsel::kernel::mla {

/// Decode requests first, then prefills.
struct BatchSplit {
  int num_decodes = 0;
  int num_decode_tokens = 0;  ///< the first num_decode_tokens query rows
  int num_prefills = 0;
  int num_prefill_tokens = 0;
};

/// vLLM's split_decodes_and_prefills: the requests at the head of the batch with at most
/// `decode_query_len` query tokens are decodes; the first request with more, and every
/// request after it, are prefills. `query_start_loc` has num_seqs + 1 entries.
BatchSplit split_decodes_and_prefills(std::span<const std::int32_t> query_start_loc, int num_seqs,
                                      int decode_query_len);

/// How the prefills' cached context is read: in chunks of `chunk_tokens` positions per
/// request, with the same boundaries for every request (chunk c covers positions
/// [c · chunk_tokens, (c + 1) · chunk_tokens) of each request's context, cut at its end, so a
/// short context has empty later chunks).
struct ContextChunks {
  std::int64_t chunk_tokens = 0;  ///< a multiple of the block size; 0 when no prefill has context
  int num_chunks = 0;
  int prefills_with_context = 0;
  /// Chunk c of a request with `context_len` cached tokens: its positions [first, second).
  std::pair<std::int64_t, std::int64_t> range(int c, std::int64_t context_len) const;
};

/// vLLM's rule: chunk_tokens = workspace_tokens / (prefills with context), rounded down to
/// the block size; num_chunks = ceil(longest context / chunk_tokens). ValueError naming
/// MlaPlanOptions::context_chunk_tokens when the workspace cannot hold one block per
/// prefill with context.
ContextChunks plan_context_chunks(std::span<const std::int64_t> context_lens, int block_size,
                                  std::int64_t workspace_tokens);

/// A step's batch, as a plan keeps it (the arrays are copies: the caller's need not outlive
/// plan()).
struct MlaBatch {
  std::vector<std::int32_t> query_start_loc, seq_lens, block_table;
  std::vector<std::int64_t> slot_mapping;  ///< empty when the batch came without one
  int num_seqs = 0;
  int num_actual_tokens = 0;
  int max_blocks_per_seq = 0;
  int max_query_len = 0;
  int max_seq_len = 0;
  int num_blocks = 0, block_size = 0;
  int decode_query_len = 1;
  BatchSplit split;
  ContextChunks chunks;

  int query_len(int seq) const { return query_start_loc[seq + 1] - query_start_loc[seq]; }
  /// Cached tokens before the request's new ones (0 for decodes: they read everything from the cache).
  std::int64_t context_len(int seq) const { return seq_lens[seq] - query_len(seq); }
  const std::int32_t* table_row(int seq) const {
    return block_table.data() + static_cast<std::size_t>(seq) * static_cast<std::size_t>(max_blocks_per_seq);
  }
  /// Views of the copies.
  AttentionMetadata metadata() const;
  MlaStepSummary summary() const;
};

/// Checks `md` against the cache geometry `cache` ([num_blocks, block_size, latent]) and
/// the options, then fills `b` (ValueError naming the field on the first problem):
/// query_start_loc non-decreasing from 0 to num_actual_tokens; a decode request has 0 cached
/// tokens (a padding request: its rows attend nothing) or at least its query tokens; a
/// prefill request at least its query tokens; every used block id (ceil(L / block_size) per
/// request; the entries after them are never read) in [0, num_blocks); slots -1 or in
/// [0, num_blocks · block_size); max_query_len / max_seq_len at least the batch's.
/// `default_chunk_tokens`: the kernel's workspace when options.context_chunk_tokens is 0.
void build_batch(MlaBatch& b, const AttentionMetadata& md, const TensorView& cache, const MlaPlanOptions& options,
                 const MlaKernelLimits& limits, std::int64_t default_chunk_tokens);

/// build_batch's default_chunk_tokens for kernels that read no context chunks (the sparse
/// attention and the indexer): more tokens than any context holds.
inline constexpr std::int64_t kNoContextChunks = std::int64_t{1} << 40;

}  // namespace attnsel::kernel::mla
