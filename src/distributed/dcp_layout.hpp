// Decode context parallelism (DCP): how a sequence's KV cache is split across the ranks of
// a DCP group, by token, with vLLM's interleave rule, and the configurations vLLM refuses.
//
// Global token i lives on rank (i / I) % R, where R is the group size and I the interleave
// size (vLLM's cp_kv_cache_interleave_size; 1 = token by token). Ranks keep their tokens in
// order, so local token j of rank r is global token
//   (j / I) * I * R + r * I + j % I.
// With a block size divisible by I, one block of every rank's cache covers the same
// block_size * R global tokens (vLLM's "virtual block"), so every rank can use the same
// block table and only the local sequence lengths differ.
//
// Sources: vllm/v1/attention/backends/utils.py (get_dcp_local_seq_lens),
// vllm/config/parallel.py (cp_kv_cache_interleave_size: "The block_size must be both >= and
// divisible by interleave_size"; tensor_parallel_size divisible by the DCP size),
// vllm/config/model.py (ModelConfig.verify_with_parallel_config: the GQA/MQA head rules).
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnsel::distributed {

/// A DCP group's shape. Construct with make_dcp_layout (it validates).
struct DcpLayout {
  int world_size = 1;  ///< R: ranks sharing each sequence's KV cache
  int interleave = 1;  ///< I: consecutive tokens kept together on one rank

  /// Tokens of a `seq_len`-token sequence stored on `rank` (vLLM's get_dcp_local_seq_lens).
  std::int64_t local_seq_len(std::int64_t seq_len, int rank) const;
  /// The rank that stores global token `pos`.
  int owner_rank(std::int64_t pos) const;
  /// The global position of local token `local_index` of `rank`.
  std::int64_t global_position(std::int64_t local_index, int rank) const;
  /// The local index of global token `pos` on its owner rank.
  std::int64_t local_index(std::int64_t pos) const;
};

/// Validates the group against the cache's block size (ValueError naming the rule):
/// R >= 1, I >= 1, I <= block_size and block_size % I == 0.
DcpLayout make_dcp_layout(int world_size, int interleave, int block_size);

/// The heads a DCP group can split: after the merge each rank keeps num_heads / R query
/// heads (the reduce-scatter over heads), and vLLM requires the query heads of one KV head
/// (num_heads / num_kv_heads) to be divisible by R for GQA. ValueError otherwise.
void validate_dcp_heads(int num_heads, int num_kv_heads, int world_size);

/// vLLM's model-level DCP rules for a non-MLA model (ModelConfig.verify_with_parallel_config
/// and ParallelConfig): tensor_parallel_size divisible by the DCP size; for GQA/MQA the TP
/// size must exceed the KV heads, the DCP size must not exceed TP // KV heads, and the
/// query heads per KV head must be divisible by the DCP size. Returns the first broken
/// rule's message, or nullopt when the configuration is valid (MLA skips the head rules).
std::optional<std::string> model_dcp_violation(int total_num_heads, int total_num_kv_heads, bool use_mla,
                                               int tensor_parallel_size, int dcp_size);

}  // namespace attnsel::distributed
