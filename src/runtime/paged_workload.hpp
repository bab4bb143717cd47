// A synthetic paged-attention batch: random queries, a paged KV cache filled with random
// keys and values through a shuffled block table, and the metadata that describes it.
// Shared by the kernel tests, the benchmarks and `attnsel run`.
// Thread-safety: a PagedWorkload is not synchronised; share it read-only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attnsel/kernel.hpp"
#include "runtime/huge_buffer.hpp"
#include "runtime/workload_shape.hpp"

namespace attnsel::runtime {

struct SequenceShape {
  int seq_len = 0;    ///< context including the new tokens
  int query_len = 0;  ///< new tokens (queries) of this step
};

/// One batch: its layers' shape, the sequences and how the cache is filled.
struct WorkloadSpec : WorkloadShape {
  std::vector<SequenceShape> sequences;
  int spare_blocks = 3;            ///< unused blocks in the cache, so block ids are not dense
  std::uint64_t seed = 1;
  float value_range = 1.0f;        ///< keys and values are uniform in [-value_range, value_range]
  float query_range = 1.0f;
  bool fill_cache = true;          ///< false: leave the cache unwritten (callers write it)
};

class PagedWorkload {
 public:
  explicit PagedWorkload(WorkloadSpec spec);
  PagedWorkload(const PagedWorkload&) = delete;
  PagedWorkload& operator=(const PagedWorkload&) = delete;

  const WorkloadSpec& spec() const { return spec_; }
  int num_tokens() const { return num_tokens_; }
  int num_blocks() const { return num_blocks_; }

  kernel::TensorView query() { return view3(query_, spec_.num_heads); }
  kernel::TensorView output() { return view3(output_, spec_.num_heads); }
  /// The new tokens' keys and values, [num_tokens, num_kv_heads, head_size].
  kernel::TensorView new_keys() { return view3(new_keys_, spec_.num_kv_heads); }
  kernel::TensorView new_values() { return view3(new_values_, spec_.num_kv_heads); }
  kernel::KVCacheView cache();
  kernel::AttentionMetadata metadata() const;

  /// Bytes of K and V that a forward pass over every sequence reads once.
  std::int64_t kv_bytes_read() const;
  /// 4 * q_len * visible keys * head_size * num_heads, summed (the useful FLOPs).
  double attention_flops(bool causal) const;

  /// Fills the output with NaN (to prove a kernel writes every element).
  void poison_output();
  std::vector<std::uint8_t>& output_bytes() { return output_; }

 private:
  kernel::TensorView view3(std::vector<std::uint8_t>& buf, int heads);

  WorkloadSpec spec_;
  kernel::ScalarType cache_type_;
  int num_tokens_ = 0;
  int num_blocks_ = 0;
  int max_blocks_per_seq_ = 0;
  std::vector<std::uint8_t> query_, output_, new_keys_, new_values_;
  HugeBuffer key_cache_, value_cache_;
  std::vector<std::int32_t> query_start_loc_, seq_lens_, block_table_;
  std::vector<std::int64_t> slot_mapping_;
};

/// Fills `bytes` with values uniform in [-range, range) encoded as `type` (deterministic in `seed`).
void fill_uniform(std::span<std::uint8_t> bytes, kernel::ScalarType type, float range, std::uint64_t seed);

/// A layer of the shape (a batch's, a run's, a DCP job's): its heads and head size, scale
/// 1/sqrt(head size), its cache dtype and k/v scales, per layer and per KV head (everything
/// else at LayerParams' defaults: a causal decoder).
kernel::LayerParams layer_params_for(const WorkloadShape& shape);

/// Strides (elements) of a [num_blocks, block_size, num_kv_heads, head_size] cache view.
std::vector<std::int64_t> cache_strides(CacheLayout layout, int block_size, int num_kv_heads, int head_size);

}  // namespace attnsel::runtime
