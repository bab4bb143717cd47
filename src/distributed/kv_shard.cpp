#include "distributed/kv_shard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "attnsel/errors.hpp"
#include "runtime/host_batch.hpp"

namespace attnsel::distributed {

namespace {

// Fills `bytes` with NaN of `t` (poison for slots no sequence owns).
void fill_nan(std::uint8_t* bytes, std::size_t size, kernel::ScalarType t) {
  using kernel::ScalarType;
  switch (t) {
    case ScalarType::f32: {
      const std::uint32_t nan = 0x7FC00000u;
      for (std::size_t i = 0; i + 4 <= size; i += 4) std::memcpy(bytes + i, &nan, 4);
      return;
    }
    case ScalarType::bf16:
    case ScalarType::f16: {
      const std::uint16_t nan = t == ScalarType::bf16 ? 0x7FC0 : 0x7E00;
      for (std::size_t i = 0; i + 2 <= size; i += 2) std::memcpy(bytes + i, &nan, 2);
      return;
    }
    case ScalarType::fp8_e4m3:
    case ScalarType::fp8_e5m2: std::memset(bytes, 0x7F, size); return;
    default:
      throw ValueError(fmt::format("a DCP shard cannot hold {} elements (f32, f16, bf16, fp8_e4m3, fp8_e5m2)",
                                   kernel::to_string(t)));
  }
}

// One id per (sequence, virtual block), the same on every rank: a fixed shuffle, so that a
// sequence's blocks are not contiguous (a kernel that ignores the block table shows it).
std::vector<std::int32_t> shuffled_ids(int n) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  std::uint64_t state = 0x5DEECE66Dull;
  for (std::size_t i = ids.size(); i > 1; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(ids[i - 1], ids[(state >> 33) % i]);
  }
  return ids;
}

}  // namespace

KVShard::KVShard(const kernel::KVCacheView& source, const kernel::AttentionMetadata& md, const DcpLayout& layout,
                 int rank)
    : rank_(rank), layout_(layout), dtype_(source.key.dtype) {
  if (rank < 0 || rank >= layout.world_size)
    throw ValueError(fmt::format("DCP rank {} is outside the group of {} ranks", rank, layout.world_size));
  if (source.key.device != kernel::DeviceKind::cpu)
    throw ValueError("a DCP shard is copied from a cache in host memory");
  if (source.key.stride[3] != 1 || source.value.stride[3] != 1)
    throw ValueError("a DCP shard needs caches whose head dimension is contiguous (stride 1)");
  const int block_size = source.block_size(), kv_heads = source.num_kv_heads(), head_size = source.head_size();
  num_seqs_ = md.num_seqs;
  query_start_loc_.assign(md.query_start_loc.begin(), md.query_start_loc.end());

  // Rank 0 holds the most tokens of every sequence: its block count sizes the table.
  for (int s = 0; s < num_seqs_; ++s) {
    const std::int64_t local = layout.local_seq_len(md.seq_lens[static_cast<std::size_t>(s)], rank);
    seq_lens_.push_back(static_cast<std::int32_t>(local));
    const std::int64_t most = layout.local_seq_len(md.seq_lens[static_cast<std::size_t>(s)], 0);
    max_blocks_per_seq_ = std::max(max_blocks_per_seq_, static_cast<int>((most + block_size - 1) / block_size));
  }
  max_blocks_per_seq_ = std::max(max_blocks_per_seq_, 1);
  const int num_blocks = num_seqs_ * max_blocks_per_seq_;
  const std::vector<std::int32_t> ids = shuffled_ids(std::max(num_blocks, 1));
  block_table_.assign(ids.begin(), ids.begin() + num_blocks);

  for (int d = 0; d < 4; ++d) strides_.push_back(source.key.stride[d]);
  if (source.value.stride[0] != strides_[0] || source.value.stride[1] != strides_[1] ||
      source.value.stride[2] != strides_[2])
    throw ValueError("a DCP shard needs key and value caches of the same layout");
  shape_ = {std::max(num_blocks, 1), block_size, kv_heads, head_size};
  const std::size_t elem = kernel::element_size(dtype_);
  const std::size_t bytes = static_cast<std::size_t>(shape_[0] * strides_[0]) * elem;
  key_ = runtime::HugeBuffer(bytes);
  value_ = runtime::HugeBuffer(bytes);
  fill_nan(key_.data(), bytes, dtype_);
  fill_nan(value_.data(), bytes, dtype_);

  const std::size_t row = static_cast<std::size_t>(head_size) * elem;
  const auto* src_k = static_cast<const std::uint8_t*>(source.key.data);
  const auto* src_v = static_cast<const std::uint8_t*>(source.value.data);
  for (int s = 0; s < num_seqs_; ++s) {
    const auto src_row = md.block_table.subspan(static_cast<std::size_t>(s) * md.max_blocks_per_seq,
                                                static_cast<std::size_t>(md.max_blocks_per_seq));
    const auto dst_row = std::span(block_table_).subspan(static_cast<std::size_t>(s) * max_blocks_per_seq_,
                                                         static_cast<std::size_t>(max_blocks_per_seq_));
    for (std::int64_t j = 0; j < seq_lens_[static_cast<std::size_t>(s)]; ++j) {
      const std::int64_t pos = layout.global_position(j, rank);
      const std::int64_t src_block = src_row[static_cast<std::size_t>(pos / block_size)];
      const std::int64_t dst_block = dst_row[static_cast<std::size_t>(j / block_size)];
      for (int h = 0; h < kv_heads; ++h) {
        const std::int64_t from_k = src_block * source.key.stride[0] + pos % block_size * source.key.stride[1] +
                                    h * source.key.stride[2];
        const std::int64_t from_v = src_block * source.value.stride[0] +
                                    pos % block_size * source.value.stride[1] + h * source.value.stride[2];
        const std::int64_t to = dst_block * strides_[0] + j % block_size * strides_[1] + h * strides_[2];
        std::memcpy(key_.data() + static_cast<std::size_t>(to) * elem, src_k + static_cast<std::size_t>(from_k) * elem,
                    row);
        std::memcpy(value_.data() + static_cast<std::size_t>(to) * elem,
                    src_v + static_cast<std::size_t>(from_v) * elem, row);
      }
    }
    // The new tokens: written by the rank that owns their position only.
    const std::int32_t q0 = md.query_start_loc[static_cast<std::size_t>(s)];
    const std::int32_t q1 = md.query_start_loc[static_cast<std::size_t>(s) + 1];
    const std::int64_t seq_len = md.seq_lens[static_cast<std::size_t>(s)];
    for (std::int32_t t = q0; t < q1; ++t) {
      const std::int64_t pos = seq_len - (q1 - q0) + (t - q0);
      if (pos < 0 || layout.owner_rank(pos) != rank) {
        slot_mapping_.push_back(-1);
        continue;
      }
      const std::int64_t j = layout.local_index(pos);
      slot_mapping_.push_back(std::int64_t{dst_row[static_cast<std::size_t>(j / block_size)]} * block_size +
                              j % block_size);
    }
  }
}

kernel::KVCacheView KVShard::cache() {
  return {kernel::TensorView::strided(key_.data(), dtype_, shape_, strides_),
          kernel::TensorView::strided(value_.data(), dtype_, shape_, strides_)};
}

kernel::AttentionMetadata KVShard::metadata() const {
  return runtime::batch_metadata(query_start_loc_, seq_lens_, block_table_, max_blocks_per_seq_, slot_mapping_);
}

}  // namespace attnsel::distributed
