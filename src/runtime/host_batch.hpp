// The arrays of a synthetic batch in host memory (a run's step, an MLA run's latent batch,
// a paged workload, a DCP rank's shard): a shuffled block table, and the kernel
// interface's view of the batch.
// Thread-safety: pure functions; the view points into the caller's arrays.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "attnsel/kernel.hpp"

namespace attnsel::runtime {

/// Block ids 0 .. count - 1 in an order drawn from `seed`: sequences do not own contiguous
/// memory, as in a real engine (a kernel that ignores the block table shows it).
std::vector<std::int32_t> shuffled_block_ids(std::size_t count, std::uint64_t seed);

/// The batch of query_start_loc.size() - 1 sequences (query_start_loc must not be empty);
/// the token count and the longest query and sequence follow from the arrays, which must
/// outlive the view.
kernel::AttentionMetadata batch_metadata(std::span<const std::int32_t> query_start_loc,
                                         std::span<const std::int32_t> seq_lens,
                                         std::span<const std::int32_t> block_table, int max_blocks_per_seq,
                                         std::span<const std::int64_t> slot_mapping);

}  // namespace attnsel::runtime
