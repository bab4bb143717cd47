// Host checks of a batch's layout that every kernel family makes before it reads the batch
// (AttentionMetadata, attnsel/kernel.hpp): the query tokens' offsets and the sizes of the
// per-request arrays. ValueError naming the field, its value and what it must be.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attnsel/kernel.hpp"

namespace attnsel::kernel {

/// num_seqs and num_actual_tokens not negative; query_start_loc: num_seqs + 1 entries at
/// least, starting at 0, non-decreasing, query_start_loc[num_seqs] = num_actual_tokens.
void check_query_layout(const AttentionMetadata& md);

/// seq_lens: num_seqs entries at least; max_blocks_per_seq not negative; block_table:
/// num_seqs × max_blocks_per_seq entries at least.
void check_request_arrays(const AttentionMetadata& md);

/// Request s's blocks: its seq_lens[s] tokens fit its max_blocks_per_seq blocks of
/// `block_size`, and the block ids its tokens use are in [0, num_blocks) (the cache named
/// `cache_name`; the table's entries past them are never read).
void check_request_blocks(const AttentionMetadata& md, std::size_t s, std::int64_t num_blocks,
                          std::int64_t block_size, std::string_view cache_name);

/// max_query_len and max_seq_len at least the longest query and sequence of the batch.
void check_max_lengths(const AttentionMetadata& md, int longest_query, int longest_seq);

}  // namespace attnsel::kernel
