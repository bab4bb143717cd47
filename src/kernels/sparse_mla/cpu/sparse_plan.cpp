#include "kernels/sparse_mla/cpu/sparse_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kernels/attention/cpu/work.hpp"
#include "kernels/sparse_mla/cpu/sparse_work.hpp"
#include "kernels/sparse_mla/formats.hpp"
#include "kernels/cache_lines.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

namespace {


std::size_t slot_bytes() { return kernel::cpu::partial_slot_floats(kLatentRank) * sizeof(float); }

}  // namespace

std::size_t CpuSparseMlaPlan::workspace_bytes() const {
  std::size_t b = 0;
  for (const mla::cpu::HostBuffer* h : {&rows, &row_counts, &physical, &identity, &query_latent, &latent_out, &scratch,
                                        &partials})
    b += h->size();
  b += (batch.query_start_loc.capacity() + batch.seq_lens.capacity() + batch.block_table.capacity() +
        token_seq.capacity()) * sizeof(std::int32_t) +
       batch.slot_mapping.capacity() * sizeof(std::int64_t) + work.items.capacity() * sizeof(kernel::cpu::WorkItem);
  return b;
}

std::string CpuSparseMlaPlan::describe() const {
  return fmt::format("cpu sparse MLA: {} query tokens of {} requests, {} items, {} split groups, {} threads",
                     batch.num_actual_tokens, batch.num_seqs, work.items.size(), work.splits.size(), threads);
}

SparseScratch carve_sparse_scratch(const CpuSparseMlaPlan& plan, int thread, bool ds_mla) {
  auto* base = plan.scratch.as<std::uint8_t>() + static_cast<std::size_t>(thread) * plan.scratch_stride;
  SparseScratch s;
  s.kernel = base;
  if (!ds_mla) return s;
  base += round_to_cache_line(kernel::cpu::scratch_bytes(kLatentWidth));
  s.dequant = reinterpret_cast<std::uint16_t*>(base);
  base += round_to_cache_line(static_cast<std::size_t>(kDequantRows) * kLatentWidth * 2);
  s.chunk = reinterpret_cast<float*>(base);
  base += round_to_cache_line(slot_bytes());
  s.running = reinterpret_cast<float*>(base);
  return s;
}

void build_sparse_work(CpuSparseMlaPlan& plan, const SparseMlaLayerParams& p, bool ds_mla) {
  const mla::MlaBatch& b = plan.batch;
  const int T = b.num_actual_tokens, N = p.dims.num_heads;
  plan.token_seq.assign(static_cast<std::size_t>(T), 0);
  std::vector<std::int64_t> keys(static_cast<std::size_t>(T), 0);
  for (int s = 0; s < b.num_seqs; ++s)
    for (int t = b.query_start_loc[static_cast<std::size_t>(s)]; t < b.query_start_loc[static_cast<std::size_t>(s) + 1];
         ++t) {
      plan.token_seq[static_cast<std::size_t>(t)] = s;
      keys[static_cast<std::size_t>(t)] = std::min<std::int64_t>(p.topk, b.seq_lens[static_cast<std::size_t>(s)]);
    }
  SparseSplitOptions split;
  split.cores = plan.threads;
  split.batch_invariant = p.batch_invariant;
  SparseWork work = plan_sparse_work(keys, p.topk, N, split);
  plan.work = std::move(work.plan);
  plan.unit_starts = std::move(work.unit_starts);

  const auto tokens = static_cast<std::size_t>(std::max(T, 1));
  const auto topk = static_cast<std::size_t>(p.topk);
  const std::size_t act = element_size(p.dtype);
  plan.rows.reserve(tokens * topk * sizeof(std::int32_t));
  plan.row_counts.reserve(tokens * sizeof(std::int32_t));
  plan.physical.reserve(tokens * topk * sizeof(std::int32_t));
  if (plan.identity.size() == 0) {
    plan.identity.reserve(kDequantRows * sizeof(std::int32_t));
    std::iota(plan.identity.as<std::int32_t>(), plan.identity.as<std::int32_t>() + kDequantRows, 0);
  }
  plan.query_latent.reserve(tokens * static_cast<std::size_t>(N) * kLatentWidth * act);
  plan.latent_out.reserve(tokens * static_cast<std::size_t>(N) * kLatentRank * act);
  plan.scratch_stride = round_to_cache_line(kernel::cpu::scratch_bytes(kLatentWidth));
  if (ds_mla)
    plan.scratch_stride += round_to_cache_line(static_cast<std::size_t>(kDequantRows) * kLatentWidth * 2) + 2 * round_to_cache_line(slot_bytes());
  plan.scratch.reserve(plan.scratch_stride * static_cast<std::size_t>(plan.threads));
  plan.partials.reserve(std::max<std::size_t>(1, static_cast<std::size_t>(plan.work.num_partial_slots)) * slot_bytes());
}

}  // namespace attnsel::kernel::sparse_mla::cpu
