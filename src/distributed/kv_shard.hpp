// One rank's share of a paged KV cache under decode context parallelism: the tokens the
// rank owns (dcp_layout.hpp), copied into a cache of its own, with the metadata a kernel
// needs to attend over them — local sequence lengths, a block table that is the same on
// every rank (vLLM's virtual blocks), and a slot mapping that writes only the new tokens
// this rank owns (-1 elsewhere, as vLLM pads them).
// Thread-safety: a KVShard is not synchronised; share it read-only.
#pragma once

#include <cstdint>
#include <vector>

#include "attnsel/kernel.hpp"
#include "distributed/dcp_layout.hpp"
#include "runtime/huge_buffer.hpp"

namespace attnsel::distributed {

class KVShard {
 public:
  /// Copies `rank`'s tokens of every sequence of `md` out of `source` (a host cache whose
  /// head dimension is contiguous). The shard keeps the source's per-block layout; unused
  /// slots hold NaN, so a kernel that reads past a local sequence shows it.
  KVShard(const kernel::KVCacheView& source, const kernel::AttentionMetadata& md, const DcpLayout& layout, int rank);
  KVShard(const KVShard&) = delete;
  KVShard& operator=(const KVShard&) = delete;

  int rank() const { return rank_; }
  const DcpLayout& layout() const { return layout_; }
  kernel::KVCacheView cache();
  kernel::AttentionMetadata metadata() const;
  std::span<const std::int32_t> local_seq_lens() const { return seq_lens_; }
  std::span<const std::int32_t> block_table() const { return block_table_; }
  std::size_t cache_bytes() const { return key_.size() + value_.size(); }

 private:
  int rank_;
  DcpLayout layout_;
  kernel::ScalarType dtype_;
  std::vector<std::int64_t> shape_, strides_;
  runtime::HugeBuffer key_, value_;
  int num_seqs_ = 0, max_blocks_per_seq_ = 0;
  std::vector<std::int32_t> query_start_loc_, seq_lens_, block_table_;
  std::vector<std::int64_t> slot_mapping_;
};

}  // namespace attnsel::distributed
