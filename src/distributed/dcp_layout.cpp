#include "distributed/dcp_layout.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "attnsel/errors.hpp"

namespace attnsel::distributed {

std::int64_t DcpLayout::local_seq_len(std::int64_t seq_len, int rank) const {
  // Whole rounds of I * R tokens give every rank I tokens; the rest fills ranks in order,
  // at most I each (vllm/v1/attention/backends/utils.py, get_dcp_local_seq_lens).
  const std::int64_t base = seq_len / interleave / world_size * interleave;
  const std::int64_t remainder = seq_len - base * world_size;
  return base + std::clamp<std::int64_t>(remainder - std::int64_t{rank} * interleave, 0, interleave);
}

int DcpLayout::owner_rank(std::int64_t pos) const { return static_cast<int>(pos / interleave % world_size); }

std::int64_t DcpLayout::global_position(std::int64_t local_index, int rank) const {
  return local_index / interleave * interleave * world_size + std::int64_t{rank} * interleave + local_index % interleave;
}

std::int64_t DcpLayout::local_index(std::int64_t pos) const {
  return pos / (std::int64_t{interleave} * world_size) * interleave + pos % interleave;
}

DcpLayout make_dcp_layout(int world_size, int interleave, int block_size) {
  if (world_size < 1)
    throw ValueError(fmt::format("decode context parallel size must be at least 1, got {}", world_size));
  if (interleave < 1)
    throw ValueError(fmt::format("cp_kv_cache_interleave_size must be at least 1, got {}", interleave));
  if (block_size < 1) throw ValueError(fmt::format("block_size must be at least 1, got {}", block_size));
  if (interleave > block_size || block_size % interleave != 0)
    throw ValueError(fmt::format(
        "block_size ({}) must be greater than or equal to and divisible by cp_kv_cache_interleave_size ({}); "
        "valid interleave sizes for this block size divide it: 1 .. {}",
        block_size, interleave, block_size));
  return {world_size, interleave};
}

void validate_dcp_heads(int num_heads, int num_kv_heads, int world_size) {
  if (num_heads < 1 || num_kv_heads < 1 || num_heads % num_kv_heads != 0)
    throw ValueError(fmt::format("num_heads ({}) must be a positive multiple of num_kv_heads ({})", num_heads,
                                 num_kv_heads));
  const int q_per_kv = num_heads / num_kv_heads;
  if (q_per_kv % world_size != 0) {
    std::vector<int> valid;
    for (int r = 1; r <= q_per_kv; ++r)
      if (q_per_kv % r == 0) valid.push_back(r);
    throw ValueError(fmt::format(
        "Total number of q per kv attn heads ({}) must be divisible by dcp world size when enable decode context "
        "parallel for GQA ({}); valid decode context parallel sizes for {} query / {} KV heads: {}",
        q_per_kv, world_size, num_heads, num_kv_heads, fmt::join(valid, ", ")));
  }
}

std::optional<std::string> model_dcp_violation(int total_num_heads, int total_num_kv_heads, bool use_mla,
                                               int tensor_parallel_size, int dcp_size) {
  if (dcp_size <= 1) return std::nullopt;
  if (tensor_parallel_size % dcp_size != 0)
    return fmt::format("tp_size={} must be divisible by dcp_size={}.", tensor_parallel_size, dcp_size);
  if (use_mla) return std::nullopt;
  if (tensor_parallel_size <= total_num_kv_heads)
    return fmt::format("tensor parallel size {} must be greater than total num kv heads {} when enable decode context "
                       "parallel for GQA/MQA",
                       tensor_parallel_size, total_num_kv_heads);
  const int max_dcp = tensor_parallel_size / total_num_kv_heads;
  if (dcp_size > max_dcp)
    return fmt::format("decode context parallel size must less than or equal to (tensor parallel size {} // total num "
                       "kv heads {}) = {}, but got {}",
                       tensor_parallel_size, total_num_kv_heads, max_dcp, dcp_size);
  const int q_per_kv = total_num_heads / total_num_kv_heads;
  if (q_per_kv % dcp_size != 0)
    return fmt::format("Total number of q per kv attn heads ({}) must be divisible by dcp world size when enable "
                       "decode context parallel for GQA ({})",
                       q_per_kv, dcp_size);
  return std::nullopt;
}

}  // namespace attnsel::distributed
