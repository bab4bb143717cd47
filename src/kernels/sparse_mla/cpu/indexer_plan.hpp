// The CPU indexer's step plan: the batch (kernels/mla/batch.hpp's checks and copies), each
// query token's request and the positions it sees, the work items of its scores in waves
// (the tokens whose scores top_k holds at once), and every buffer the step's layers use —
// made in plan()/update(), so that the calls allocate nothing.
// Thread-safety: as StepPlan (calls only read it, apart from the scratch they own while they
// run: the calls on one plan run one after another, StepPlan's rule).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnsel/sparse_mla.hpp"
#include "kernels/mla/batch.hpp"
#include "kernels/mla/cpu/gemm.hpp"
#include "kernels/mla/cpu/plan.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

/// Positions one step of a score item converts and scores at once.
inline constexpr int kKeyRun = 64;
/// Query tokens of one request that share each converted run of keys.
inline constexpr int kGroupTokens = 8;
/// Positions per score item (items of one group split along the positions, for the cores).
inline constexpr std::int64_t kItemPositions = 2048;

/// Query tokens [token_begin, token_end) of one request over its positions [key_begin, key_end).
struct ScoreItem {
  int seq = 0;
  int token_begin = 0, token_end = 0;
  std::int64_t key_begin = 0, key_end = 0;
};

/// Tokens [token_begin, token_end) scored together.
struct ScoreWave {
  int token_begin = 0, token_end = 0;
  std::vector<ScoreItem> items;
};

class CpuIndexerPlan final : public StepPlan {
 public:
  mla::MlaBatch batch;
  IndexerPlanOptions options;
  int threads = 1;
  int padded_heads = 16;                    ///< heads rounded up to the products' 16 columns
  std::vector<std::int32_t> token_seq;      ///< each query token's request
  std::vector<std::int64_t> row_length;     ///< the positions each query token sees
  std::vector<ScoreWave> waves;
  int max_wave_tokens = 0;
  std::int64_t logits_stride = 0;           ///< floats per row of `logits` (>= max_seq_len)

  mla::cpu::HostBuffer logits;              ///< a wave's scores, [max_wave_tokens, logits_stride] f32
  mla::cpu::HostBuffer head_weights;        ///< a wave's w', [max_wave_tokens, padded_heads] f32
  /// A wave's quantised queries, one [head_dim × padded_heads] matrix per token (written by
  /// each call).
  mutable std::vector<mla::cpu::PackedMatrix> queries;
  std::size_t scratch_stride = 0;           ///< bytes of each thread's scratch
  mla::cpu::HostBuffer scratch;             ///< per thread: a run of keys, its products, top-k keys

  std::size_t workspace_bytes() const override;
  std::string describe() const override;
};

/// Per-thread scratch layout (offsets in bytes within a thread's area).
struct IndexerScratch {
  std::uint16_t* keys;    ///< [kKeyRun, head_dim] bf16
  float* products;        ///< [kKeyRun, padded_heads] f32
  std::uint64_t* ranks;   ///< [max_seq_len] top-k keys
};
IndexerScratch carve_indexer_scratch(const CpuIndexerPlan& plan, int thread, int head_dim);

/// Fills `plan` for the checked batch in plan.batch: lengths, waves and items, buffers.
void build_indexer_work(CpuIndexerPlan& plan, const IndexerLayerParams& p, bool bf16_pairs);

}  // namespace attnsel::kernel::sparse_mla::cpu
