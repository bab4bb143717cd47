#include "kernels/batch_layout.hpp"

#include <fmt/format.h>

#include <string>

#include "attnsel/errors.hpp"
#include "kernels/tensor_checks.hpp"

namespace attnsel::kernel {

void check_query_layout(const AttentionMetadata& md) {
  if (md.num_seqs < 0) fail(fmt::format("num_seqs = {} is negative", md.num_seqs));
  if (md.num_actual_tokens < 0) fail(fmt::format("num_actual_tokens = {} is negative", md.num_actual_tokens));
  const auto n = static_cast<std::size_t>(md.num_seqs);
  if (md.query_start_loc.size() < n + 1)
    fail(fmt::format("query_start_loc has {} entries; num_seqs = {} needs {}", md.query_start_loc.size(), md.num_seqs,
                     n + 1));
  if (md.query_start_loc[0] != 0) fail(fmt::format("query_start_loc[0] = {}; it must be 0", md.query_start_loc[0]));
  for (std::size_t i = 0; i < n; ++i)
    if (md.query_start_loc[i + 1] < md.query_start_loc[i])
      fail(fmt::format("query_start_loc must be non-decreasing: query_start_loc[{}] = {} < query_start_loc[{}] = {}",
                       i + 1, md.query_start_loc[i + 1], i, md.query_start_loc[i]));
  if (md.query_start_loc[n] != md.num_actual_tokens)
    fail(fmt::format("query_start_loc[num_seqs] = {} but num_actual_tokens = {}; they must be equal",
                     md.query_start_loc[n], md.num_actual_tokens));
}

void check_request_arrays(const AttentionMetadata& md) {
  const auto n = static_cast<std::size_t>(md.num_seqs);
  if (md.seq_lens.size() < n)
    fail(fmt::format("seq_lens has {} entries; num_seqs = {} needs {}", md.seq_lens.size(), md.num_seqs, n));
  if (md.max_blocks_per_seq < 0) fail(fmt::format("max_blocks_per_seq = {} is negative", md.max_blocks_per_seq));
  const std::size_t table_needed = n * static_cast<std::size_t>(md.max_blocks_per_seq);
  if (md.block_table.size() < table_needed)
    fail(fmt::format("block_table has {} entries; num_seqs x max_blocks_per_seq = {} x {} needs {}",
                     md.block_table.size(), md.num_seqs, md.max_blocks_per_seq, table_needed));
}

void check_request_blocks(const AttentionMetadata& md, std::size_t s, std::int64_t num_blocks,
                          std::int64_t block_size, std::string_view cache_name) {
  const std::int64_t seq_len = md.seq_lens[s];
  const std::int64_t capacity = static_cast<std::int64_t>(md.max_blocks_per_seq) * block_size;
  if (seq_len > capacity)
    fail(fmt::format("seq_lens[{}] = {} is longer than its blocks hold: max_blocks_per_seq x block_size = {} x {} "
                     "= {} tokens",
                     s, seq_len, md.max_blocks_per_seq, block_size, capacity));
  const std::int64_t used = (seq_len + block_size - 1) / block_size;
  for (std::int64_t b = 0; b < used; ++b) {
    const std::int32_t id =
        md.block_table[s * static_cast<std::size_t>(md.max_blocks_per_seq) + static_cast<std::size_t>(b)];
    if (id < 0 || id >= num_blocks)
      fail(fmt::format("block_table[{}][{}] = {} is outside the {}: valid block ids are [0, {})", s, b, id, cache_name,
                       num_blocks));
  }
}

void check_max_lengths(const AttentionMetadata& md, int longest_query, int longest_seq) {
  if (md.max_query_len < longest_query)
    fail(fmt::format("max_query_len = {} is smaller than the longest query ({} tokens)", md.max_query_len,
                     longest_query));
  if (md.max_seq_len < longest_seq)
    fail(fmt::format("max_seq_len = {} is smaller than the longest sequence ({} tokens)", md.max_seq_len,
                     longest_seq));
}

}  // namespace attnsel::kernel
