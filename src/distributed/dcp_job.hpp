// `attnsel run --dcp R` as a library: one rank of a decode-context-parallel group running
// decode steps of a synthetic batch whose KV cache is sharded across the group.
//
// Every step, for every layer, as vLLM's FlashAttention backend does under DCP
// (vllm/v1/attention/backends/flash_attn.py, _forward_with_dcp; the collectives of
// vllm/v1/attention/ops/common.py, cp_lse_ag_out_rs):
//   1. all-gather the query over the heads (each rank starts with its H / R heads);
//   2. attend every head over the rank's shard with the backend's kernel: partial output +
//      LSE (partial_attention.hpp; the kernel's step plan is built once per step, before
//      the first layer, and every layer executes on it);
//   3. all-gather the LSEs, scale the own partial output by exp(L_r - L);
//   4. reduce-scatter the scaled outputs over the heads: each rank ends with the merged
//      output of its H / R heads.
// The check compares every rank's heads of a sample of tokens with the double-precision
// reference over the whole, unsharded cache (the single-rank result).
// Thread-safety: call on every rank of the communicator, from one thread each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnsel/kernel.hpp"
#include "distributed/communicator.hpp"
#include "runtime/accuracy.hpp"
#include "runtime/paged_workload.hpp"
#include "runtime/run_job.hpp"
#include "runtime/workload_shape.hpp"

namespace attnsel::distributed {

/// The job: every layer's shape, the group and the workload's steps.
struct DcpJobSpec : runtime::WorkloadShape {
  std::string backend;  ///< the backend whose kernel runs the partial attention (for reports)
  int world_size = 2;   ///< --dcp R
  int interleave = 1;   ///< --cp-kv-cache-interleave-size
  int num_layers = 1;   ///< layers per step (they share one sharded cache)
  int batch = 4;
  int context = 1024;   ///< tokens already in each sequence's cache before the step's token
  int decode_steps = 8;
  bool check = true;
  int check_tokens = 8;
  std::uint64_t seed = 1;

  /// One line naming every field, identical on ranks that were given the same job.
  std::string describe() const;
};

/// One rank's view of a phase's time, seconds summed over the timed steps.
struct RankTimes {
  double step = 0.0;          ///< the whole step (plan + query gather + attention + merge), every layer
  double plan = 0.0;          ///< the kernel's step plan of the shard's batch (once per step)
  double query_gather = 0.0;  ///< all-gather of the query heads
  double attention = 0.0;     ///< the partial attention over the shard
  double merge = 0.0;         ///< LSE all-gather + correction + reduce-scatter
};

struct DcpReport {
  DcpJobSpec spec;
  std::string transport;                 ///< "MPI", "NCCL"
  std::string plan;                      ///< rank 0's step plan, as the kernel describes it
  std::vector<std::int64_t> rank_tokens;  ///< cached tokens per rank (all sequences)
  std::vector<std::int64_t> rank_cache_bytes;
  std::vector<RankTimes> rank_times;     ///< per rank
  double tokens = 0.0;                   ///< query tokens decoded (per layer stack)
  double seconds = 0.0;                  ///< the slowest rank's step time
  bool checked = false;
  int check_tokens = 0;
  runtime::Comparison comparison;        ///< every rank's heads, combined
  double tokens_per_s() const { return seconds > 0 ? tokens / seconds : 0.0; }
  /// The merge's share of the step, on the rank where it is largest.
  double merge_share() const;
  bool passed() const { return !checked || comparison.passed(); }
};

/// `make_impl` builds the backend's kernel for the layer; its kernel_info() must pass
/// require_dcp_kernel (NotImplementedError otherwise, on every rank alike, before any
/// collective). Throws ValueError (on every rank alike) for a configuration the group
/// cannot run: a group size other than R, ranks given different jobs, heads that R does
/// not divide as vLLM requires, an interleave size the block size does not allow.
DcpReport run_dcp_job(const DcpJobSpec& spec, const runtime::ImplFactory& make_impl, Communicator& comm);

}  // namespace attnsel::distributed
