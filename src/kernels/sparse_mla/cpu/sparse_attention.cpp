// The sparse latent attention on the CPU (sparse_steps.hpp): FlashMLA's sparse decode
// (flash_mla_with_kvcache with indices) and sparse prefill (flash_mla_sparse_fwd) computed by
// the CPU attention kernel's items (kernels/attention/cpu/work.hpp) over gathered rows.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention/cpu/split_merge.hpp"
#include "kernels/attention/cpu/work.hpp"
#include "kernels/mla/cpu/run_items.hpp"
#include "kernels/sparse_mla/cpu/fp8_rows.hpp"
#include "kernels/sparse_mla/cpu/sparse_steps.hpp"
#include "kernels/sparse_mla/formats.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

namespace {

using kernel::cpu::LayerCtx;
using kernel::cpu::PartialView;
using kernel::cpu::WorkItem;


// Each token's index row compacted to its valid rows (in their order), and their count.
void compact_rows(const SparseStep& s, const std::int32_t* indices, std::int64_t stride) {
  const int topk = s.params.topk, tokens = s.plan.batch.num_actual_tokens;
  std::int32_t* rows = s.plan.rows.as<std::int32_t>();
  std::int32_t* counts = s.plan.row_counts.as<std::int32_t>();
#pragma omp parallel for schedule(static) num_threads(s.team()) if (static_cast<std::int64_t>(tokens) * topk >= 65536)
  for (int t = 0; t < tokens; ++t) {
    const std::int32_t* in = indices + t * stride;
    std::int32_t* out = rows + static_cast<std::int64_t>(t) * topk;
    int n = 0;
    for (int k = 0; k < topk; ++k)
      if (in[k] >= 0) out[n++] = in[k];
    counts[t] = n;
  }
}

// One fp8_ds_mla record as its 576 bf16 values: each tile's e4m3 values times its scale
// (rounded to bf16, FlashMLA's reading), then the rope values as stored.
void dequantise_row(const std::uint8_t* record, std::uint16_t* out) {
  for (int tile = 0; tile < kDsMlaTiles; ++tile) {
    float scale = 0.0f;
    std::memcpy(&scale, record + kDsMlaScaleOffset + 4 * tile, sizeof(float));
    e4m3_to_bf16(record + tile * kDsMlaTile, kDsMlaTile, scale, out + tile * kDsMlaTile);
  }
  std::memcpy(out + kDsMlaLatent, record + kDsMlaRopeOffset, 2 * kDsMlaRope);
}

// Records fetched ahead of the one being dequantised.
constexpr int kPrefetchRows = 8;

void prefetch_record(const std::uint8_t* record) {
  for (int b = 0; b < kDsMlaTokenBytes; b += 64) __builtin_prefetch(record + b, 0, 3);
  __builtin_prefetch(record + kDsMlaTokenBytes - 1, 0, 3);
}

// Rows row_ids[0, n) of an fp8_ds_mla cache, dequantised into out ([n, 576] bf16).
void dequantise_rows(const TensorView& cache, const std::int32_t* row_ids, int n, std::uint16_t* out) {
  const auto* base = static_cast<const std::uint8_t*>(cache.data);
  for (int i = 0; i < n; ++i) {
    // The rows are scattered: fetch a few records ahead, which no hardware prefetcher foresees.
    if (i + kPrefetchRows < n) prefetch_record(base + static_cast<std::int64_t>(row_ids[i + kPrefetchRows]) * cache.stride[1]);
    dequantise_row(base + static_cast<std::int64_t>(row_ids[i]) * cache.stride[1], out + static_cast<std::size_t>(i) * kLatentWidth);
  }
}

PartialView view(float* slot) { return kernel::cpu::partial_for(slot, kLatentRank, 0); }

// running ← running ⊕ chunk, both unnormalised partials of the same rows.
void fold(const PartialView& running, const PartialView& chunk, int rows) {
  for (int r = 0; r < rows; ++r) {
    if (chunk.l[r] <= 0.0f) continue;
    float* o = running.o + static_cast<std::size_t>(r) * kLatentRank;
    const float* oc = chunk.o + static_cast<std::size_t>(r) * kLatentRank;
    if (running.l[r] <= 0.0f) {
      std::memcpy(o, oc, kLatentRank * sizeof(float));
      running.m[r] = chunk.m[r];
      running.l[r] = chunk.l[r];
      continue;
    }
    const float M = std::max(running.m[r], chunk.m[r]);
    const float a = std::exp(running.m[r] - M), b = std::exp(chunk.m[r] - M);
    for (int d = 0; d < kLatentRank; ++d) o[d] = o[d] * a + oc[d] * b;
    running.l[r] = running.l[r] * a + chunk.l[r] * b;
    running.m[r] = M;
  }
}

// An item over more fp8_ds_mla rows than a chunk holds: chunks of kDequantRows rows
// dequantised into the thread's scratch (c reads them through the identity table), each
// attended, folded into `running`; then written as the item's partial, or normalised into
// the output.
void run_ds_mla_item(const LayerCtx& c, const WorkItem& it, const std::int32_t* row_ids,
                     const TensorView& cache, float* slot, const SparseScratch& sc) {
  const int rows = it.num_rows();
  const PartialView running = view(sc.running), chunk = view(sc.chunk);
  for (int r = 0; r < rows; ++r) {
    running.m[r] = -HUGE_VALF;
    running.l[r] = 0.0f;
  }
  for (std::int64_t k0 = it.key_begin; k0 < it.key_end; k0 += kDequantRows) {
    const int n = static_cast<int>(std::min<std::int64_t>(kDequantRows, it.key_end - k0));
    dequantise_rows(cache, row_ids + k0, n, sc.dequant);
    WorkItem part = it;
    part.seq = 0;
    part.key_begin = 0;
    part.key_end = n;
    part.partial = 0;
    kernel::cpu::process_item(c, part, sc.chunk, sc.kernel);
    fold(running, chunk, rows);
  }
  if (slot != nullptr) {
    const PartialView out = view(slot);
    for (int r = 0; r < rows; ++r) {
      std::memcpy(out.o + static_cast<std::size_t>(r) * kLatentRank, running.o + static_cast<std::size_t>(r) * kLatentRank,
                  kLatentRank * sizeof(float));
      out.m[r] = running.m[r];
      out.l[r] = running.l[r];
    }
    return;
  }
  kernel::cpu::merge_partials(c, it, 0, sc.running, 1);
}

}  // namespace

void sparse_latent_attention(const SparseStep& s, const TensorView& q_latent, const std::int32_t* indices,
                             std::int64_t indices_stride, const TensorView& cache, const TensorView& out, float* lse,
                             std::int64_t lse_stride) {
  const CpuSparseMlaPlan& plan = s.plan;
  const bool ds_mla = s.format.ds_mla;
  const int topk = s.params.topk;
  compact_rows(s, indices, indices_stride);
  const std::int32_t* rows = plan.rows.as<std::int32_t>();
  const std::int32_t* counts = plan.row_counts.as<std::int32_t>();

  LayerCtx base;
  base.head_size = kLatentWidth;
  base.value_head_size = kLatentRank;  // the values: each latent's first 512 entries
  base.group = s.params.dims.num_heads;
  base.qk_scale = s.params.scale;
  base.causal = false;  // causality came from the indexer
  base.bf16_dot = s.bf16_dot;
  mla::cpu::bind_rows(base, q_latent, out, lse, lse_stride);
  base.num_kv_heads = 1;
  base.block_size = 1;  // a "block" is one gathered row
  if (ds_mla) {
    base.kv = ScalarType::bf16;
    base.k_stride[0] = base.v_stride[0] = kLatentWidth;
    base.block_table = plan.identity.as<std::int32_t>();
    base.max_blocks_per_seq = 0;  // every item reads its chunk through the same table
  } else {
    base.kv = s.format.stored;
    base.key_cache = base.value_cache = static_cast<const std::uint8_t*>(cache.data);
    base.k_stride[0] = base.v_stride[0] = cache.stride[1];
    base.block_table = rows;
    base.max_blocks_per_seq = topk;
  }

  const std::size_t slot_floats = kernel::cpu::partial_slot_floats(kLatentRank);
  const auto n_units = static_cast<std::int64_t>(plan.unit_starts.size()) - 1;
  const int team = s.team();
#pragma omp parallel num_threads(team) if (team > 1 && n_units > 1)
  {
    const SparseScratch sc = carve_sparse_scratch(plan, omp_get_thread_num(), ds_mla);
    LayerCtx c = base;
    if (ds_mla) c.key_cache = c.value_cache = reinterpret_cast<const std::uint8_t*>(sc.dequant);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t u = 0; u < n_units; ++u) {
      const int first = plan.unit_starts[static_cast<std::size_t>(u)];
      const int last = plan.unit_starts[static_cast<std::size_t>(u) + 1];
      // The unit's keys (its items share them), clamped to the row's valid entries.
      const WorkItem& head = plan.work.items[static_cast<std::size_t>(first)];
      const std::int64_t valid = counts[head.seq];
      const std::int64_t kb = std::min(head.key_begin, valid), ke = std::min(head.key_end, valid);
      const std::int32_t* row_ids = rows + static_cast<std::int64_t>(head.seq) * topk;
      const bool one_chunk = ds_mla && ke - kb <= kDequantRows;
      if (one_chunk) dequantise_rows(cache, row_ids + kb, static_cast<int>(ke - kb), sc.dequant);
      for (int i = first; i < last; ++i) {
        WorkItem it = plan.work.items[static_cast<std::size_t>(i)];
        it.key_begin = kb;
        it.key_end = ke;
        float* slot = it.partial >= 0 ? plan.partials.as<float>() + static_cast<std::size_t>(it.partial) * slot_floats : nullptr;
        if (!ds_mla) {
          kernel::cpu::process_item(c, it, slot, sc.kernel);
        } else if (one_chunk) {  // the unit's rows, dequantised once for all its heads
          it.seq = 0;
          it.key_begin = 0;
          it.key_end = ke - kb;
          kernel::cpu::process_item(c, it, slot, sc.kernel);
        } else {
          run_ds_mla_item(c, it, row_ids, cache, slot, sc);
        }
      }
    }
  }
  const auto n_groups = static_cast<std::int64_t>(plan.work.splits.size());
#pragma omp parallel for num_threads(team) schedule(dynamic, 1) if (team > 1 && n_groups > 1)
  for (std::int64_t g = 0; g < n_groups; ++g) {
    const kernel::cpu::SplitGroup& group = plan.work.splits[static_cast<std::size_t>(g)];
    kernel::cpu::merge_partials(base, group.rows, 0,
                                plan.partials.as<float>() + static_cast<std::size_t>(group.first_slot) * slot_floats,
                                group.count);
  }
}

}  // namespace attnsel::kernel::sparse_mla::cpu
