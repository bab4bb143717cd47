// The CPU sparse MLA kernel's step plan: the batch (kernels/mla/batch.hpp's checks and
// copies), each query token's request, the work items of the latent attention (one per
// token and group of heads, split along the index row when there are too few for the
// cores), and every buffer the step's layers use — made in plan()/update(), so that the
// calls allocate nothing.
// Thread-safety: as StepPlan (calls only read it, apart from the buffers they fill while
// they run: the calls on one plan run one after another, StepPlan's rule).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnsel/sparse_mla.hpp"
#include "kernels/attention/cpu/work_plan.hpp"
#include "kernels/mla/batch.hpp"
#include "kernels/mla/cpu/plan.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

/// fp8_ds_mla rows a thread dequantises at once: DeepSeek-V3.2's whole index row (index_topk
/// 2048, a 2.3 MiB bf16 copy that stays in L3), so that a unit's heads attend in one pass
/// each (256-row chunks, in L2, cost 1.6-2.2x the bf16 cache's time in the chunks' fixed
/// costs; whole rows 1.3-1.5x).
inline constexpr int kDequantRows = 2048;

class CpuSparseMlaPlan final : public StepPlan {
 public:
  mla::MlaBatch batch;
  SparseMlaPlanOptions options;
  int threads = 1;  ///< the cores the work is split for, and the most threads that run it
  std::vector<std::int32_t> token_seq;  ///< each query token's request

  /// The latent attention's items: WorkItem::seq is the query token (its row of `rows`), the
  /// keys [key_begin, key_end) positions in its compacted index row (the last part of a token
  /// runs to topk; a call clamps every range to the row's valid entries).
  kernel::cpu::WorkPlan work;
  /// Items [unit_starts[u], unit_starts[u + 1]) are unit u: one token's groups of heads over
  /// one key range, run by one thread (which reads or dequantises the rows once).
  std::vector<int> unit_starts;

  mla::cpu::HostBuffer rows;            ///< [tokens, topk] i32: each token's valid cache rows, compacted
  mla::cpu::HostBuffer row_counts;      ///< [tokens] i32
  mla::cpu::HostBuffer physical;        ///< [tokens, topk] i32: execute's index rows as cache rows
  mla::cpu::HostBuffer identity;        ///< [kDequantRows] i32: 0, 1, … (a dequantised chunk's table)
  mla::cpu::HostBuffer query_latent;    ///< [tokens, heads, 576] activation dtype: execute's absorbed queries
  mla::cpu::HostBuffer latent_out;      ///< [tokens, heads, 512] activation dtype
  std::size_t scratch_stride = 0;       ///< bytes of each thread's scratch
  mla::cpu::HostBuffer scratch;         ///< per thread: the attention kernel's scratch, and for
                                        ///< fp8_ds_mla a dequantised chunk and two partial slots
  mla::cpu::HostBuffer partials;        ///< work.num_partial_slots split-KV slots

  std::size_t workspace_bytes() const override;
  std::string describe() const override;
};

/// A thread's scratch.
struct SparseScratch {
  void* kernel = nullptr;             ///< kernel::cpu::scratch_bytes(576) bytes
  std::uint16_t* dequant = nullptr;   ///< [kDequantRows, 576] bf16 (fp8_ds_mla)
  float* chunk = nullptr;             ///< a partial slot: one dequantised chunk's result
  float* running = nullptr;           ///< a partial slot: the chunks folded so far
};
SparseScratch carve_sparse_scratch(const CpuSparseMlaPlan& plan, int thread, bool ds_mla);

/// Fills `plan` for the checked batch in plan.batch: token requests, items, buffers.
void build_sparse_work(CpuSparseMlaPlan& plan, const SparseMlaLayerParams& p, bool ds_mla);

}  // namespace attnsel::kernel::sparse_mla::cpu
