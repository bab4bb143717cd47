#include "runtime/host_batch.hpp"

#include <algorithm>
#include <numeric>

namespace attnsel::runtime {

std::vector<std::int32_t> shuffled_block_ids(std::size_t count, std::uint64_t seed) {
  std::vector<std::int32_t> ids(count);
  std::iota(ids.begin(), ids.end(), 0);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;  // xorshift64
  for (std::size_t i = ids.size(); i > 1; --i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::swap(ids[i - 1], ids[x % i]);
  }
  return ids;
}

kernel::AttentionMetadata batch_metadata(std::span<const std::int32_t> query_start_loc,
                                         std::span<const std::int32_t> seq_lens,
                                         std::span<const std::int32_t> block_table, int max_blocks_per_seq,
                                         std::span<const std::int64_t> slot_mapping) {
  kernel::AttentionMetadata md;
  md.num_seqs = static_cast<int>(query_start_loc.size()) - 1;
  md.num_actual_tokens = query_start_loc.back();
  md.query_start_loc = query_start_loc;
  md.seq_lens = seq_lens;
  md.block_table = block_table;
  md.max_blocks_per_seq = max_blocks_per_seq;
  md.slot_mapping = slot_mapping;
  for (std::size_t i = 0; i + 1 < query_start_loc.size(); ++i)
    md.max_query_len = std::max(md.max_query_len, query_start_loc[i + 1] - query_start_loc[i]);
  for (const std::int32_t len : seq_lens) md.max_seq_len = std::max(md.max_seq_len, len);
  return md;
}

}  // namespace attnsel::runtime
