#include "kernels/mla/batch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "attnsel/errors.hpp"
#include "kernels/batch_layout.hpp"
#include "kernels/tensor_checks.hpp"

namespace attnsel::kernel::mla {

namespace {


void check_sequences(const AttentionMetadata& md, const BatchSplit& split, std::int64_t num_blocks,
                     std::int64_t block_size) {
  check_request_arrays(md);
  const auto n = static_cast<std::size_t>(md.num_seqs);
  int max_q = 0, max_s = 0;
  for (std::size_t s = 0; s < n; ++s) {
    const std::int64_t seq_len = md.seq_lens[s];
    const std::int64_t q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
    const bool decode = static_cast<int>(s) < split.num_decodes;
    if (seq_len < 0) fail(fmt::format("seq_lens[{}] = {} is negative", s, seq_len));
    if (seq_len < q_len && !(decode && seq_len == 0))
      fail(fmt::format("request {} has {} query tokens but seq_lens[{}] = {}: the cache holds a request's new tokens "
                       "before attention runs, so seq_len >= query_len (a decode request may have seq_len 0: a "
                       "padding request that attends nothing)",
                       s, q_len, s, seq_len));
    check_request_blocks(md, s, num_blocks, block_size, "cache");
    max_q = std::max<int>(max_q, static_cast<int>(q_len));
    max_s = std::max<int>(max_s, static_cast<int>(seq_len));
  }
  check_max_lengths(md, max_q, max_s);
}

void check_slots(const AttentionMetadata& md, std::int64_t num_blocks, std::int64_t block_size) {
  const std::int64_t num_slots = num_blocks * block_size;
  for (std::size_t i = 0; i < static_cast<std::size_t>(md.num_actual_tokens); ++i) {
    const std::int64_t slot = md.slot_mapping[i];
    if (slot != -1 && (slot < 0 || slot >= num_slots))
      fail(fmt::format("slot_mapping[{}] = {} is outside the cache: valid slots are [0, {}) (num_blocks x block_size "
                       "= {} x {}), or -1 to skip",
                       i, slot, num_slots, num_blocks, block_size));
  }
}

}  // namespace

BatchSplit split_decodes_and_prefills(std::span<const std::int32_t> query_start_loc, int num_seqs,
                                      int decode_query_len) {
  BatchSplit s;
  while (s.num_decodes < num_seqs &&
         query_start_loc[s.num_decodes + 1] - query_start_loc[s.num_decodes] <= decode_query_len)
    ++s.num_decodes;
  s.num_decode_tokens = query_start_loc[s.num_decodes];
  s.num_prefills = num_seqs - s.num_decodes;
  s.num_prefill_tokens = query_start_loc[num_seqs] - s.num_decode_tokens;
  return s;
}

std::pair<std::int64_t, std::int64_t> ContextChunks::range(int c, std::int64_t context_len) const {
  const std::int64_t begin = std::min(context_len, static_cast<std::int64_t>(c) * chunk_tokens);
  return {begin, std::min(context_len, begin + chunk_tokens)};
}

ContextChunks plan_context_chunks(std::span<const std::int64_t> context_lens, int block_size,
                                  std::int64_t workspace_tokens) {
  ContextChunks c;
  std::int64_t longest = 0;
  for (std::int64_t len : context_lens) {
    if (len > 0) ++c.prefills_with_context;
    longest = std::max(longest, len);
  }
  if (c.prefills_with_context == 0) return c;
  c.chunk_tokens = workspace_tokens / c.prefills_with_context / block_size * block_size;
  if (c.chunk_tokens <= 0)
    fail(fmt::format("MlaPlanOptions::context_chunk_tokens = {} cannot hold one block (block_size {}) of cached "
                     "context for each of the {} prefill requests with context; it must be at least {}",
                     workspace_tokens, block_size, c.prefills_with_context,
                     static_cast<std::int64_t>(block_size) * c.prefills_with_context));
  c.num_chunks = static_cast<int>((longest + c.chunk_tokens - 1) / c.chunk_tokens);
  return c;
}

AttentionMetadata MlaBatch::metadata() const {
  AttentionMetadata md;
  md.num_seqs = num_seqs;
  md.num_actual_tokens = num_actual_tokens;
  md.query_start_loc = query_start_loc;
  md.seq_lens = seq_lens;
  md.block_table = block_table;
  md.max_blocks_per_seq = max_blocks_per_seq;
  md.slot_mapping = slot_mapping;
  md.max_query_len = max_query_len;
  md.max_seq_len = max_seq_len;
  return md;
}

MlaStepSummary MlaBatch::summary() const {
  MlaStepSummary s;
  s.num_decodes = split.num_decodes;
  s.num_decode_tokens = split.num_decode_tokens;
  s.num_prefills = split.num_prefills;
  s.num_prefill_tokens = split.num_prefill_tokens;
  s.context_chunks = chunks.num_chunks;
  return s;
}

void build_batch(MlaBatch& b, const AttentionMetadata& md, const TensorView& cache, const MlaPlanOptions& options,
                 const MlaKernelLimits& limits, std::int64_t default_chunk_tokens) {
  if (options.decode_query_len < 1 || options.decode_query_len > limits.max_decode_query_len)
    fail(fmt::format("MlaPlanOptions::decode_query_len = {}; this kernel's decode takes 1 to {} query tokens per "
                     "request",
                     options.decode_query_len, limits.max_decode_query_len));
  if (options.context_chunk_tokens < 0)
    fail(fmt::format("MlaPlanOptions::context_chunk_tokens = {} is negative (0 = the kernel's default)",
                     options.context_chunk_tokens));
  if (options.max_blocks_per_seq < 0)
    fail(fmt::format("MlaPlanOptions::max_blocks_per_seq = {} is negative", options.max_blocks_per_seq));
  check_query_layout(md);
  const BatchSplit split = split_decodes_and_prefills(md.query_start_loc, md.num_seqs, options.decode_query_len);
  const std::int64_t num_blocks = cache.shape[0], block_size = cache.shape[1];
  check_sequences(md, split, num_blocks, block_size);
  const auto tokens = static_cast<std::size_t>(md.num_actual_tokens);
  const bool has_slots = !md.slot_mapping.empty() || tokens == 0;
  if (!md.slot_mapping.empty()) {
    if (md.slot_mapping.size() < tokens)
      fail(fmt::format("slot_mapping has {} entries but num_actual_tokens = {}", md.slot_mapping.size(), tokens));
    check_slots(md, num_blocks, block_size);
  }

  const auto n = static_cast<std::size_t>(md.num_seqs);
  b.query_start_loc.assign(md.query_start_loc.begin(), md.query_start_loc.begin() + static_cast<std::ptrdiff_t>(n + 1));
  b.seq_lens.assign(md.seq_lens.begin(), md.seq_lens.begin() + static_cast<std::ptrdiff_t>(n));
  b.block_table.assign(md.block_table.begin(),
                       md.block_table.begin() +
                           static_cast<std::ptrdiff_t>(n * static_cast<std::size_t>(md.max_blocks_per_seq)));
  if (has_slots)
    b.slot_mapping.assign(md.slot_mapping.begin(), md.slot_mapping.begin() + static_cast<std::ptrdiff_t>(tokens));
  else
    b.slot_mapping.clear();
  b.num_seqs = md.num_seqs;
  b.num_actual_tokens = md.num_actual_tokens;
  b.max_blocks_per_seq = md.max_blocks_per_seq;
  b.max_query_len = md.max_query_len;
  b.max_seq_len = md.max_seq_len;
  b.num_blocks = static_cast<int>(num_blocks);
  b.block_size = static_cast<int>(block_size);
  b.decode_query_len = options.decode_query_len;
  b.split = split;

  std::vector<std::int64_t> context(static_cast<std::size_t>(split.num_prefills));
  for (int i = 0; i < split.num_prefills; ++i) context[static_cast<std::size_t>(i)] = b.context_len(split.num_decodes + i);
  std::int64_t workspace = options.context_chunk_tokens;
  if (workspace == 0) {  // the kernel's default, at least one block per request with context (as vLLM sizes it)
    const auto with_context = std::count_if(context.begin(), context.end(), [](std::int64_t c) { return c > 0; });
    workspace = std::max<std::int64_t>(default_chunk_tokens, with_context * block_size);
  }
  b.chunks = plan_context_chunks(context, b.block_size, workspace);
}

}  // namespace attnsel::kernel::mla
