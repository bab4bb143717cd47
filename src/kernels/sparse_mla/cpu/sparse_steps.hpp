// The steps of the CPU sparse MLA kernel, called by its SparseMlaImpl (cpu_sparse_mla.cpp)
// once the arguments are checked against the plan:
//   write     — vLLM's concat_and_cache_mla, bf16 or fp8_ds_mla (latent_cache_write.cpp);
//   indices   — request positions to cache rows (sparse_indices.cpp);
//   attention — the latent attention of each token over its index row: the row compacted to
//               its valid entries, then the CPU attention kernel's items over the gathered
//               rows (a block table of single rows), fp8_ds_mla rows dequantised a chunk at a
//               time into the thread's scratch, split-KV partials merged (sparse_attention.cpp);
//   execute   — q_nope · W_UK, the latent attention, · W_UV (sparse_execute.cpp).
// Every step runs on the caller's OpenMP team, at most plan.threads threads, and gives the
// same bits on any team.
#pragma once

#include <cstdint>

#include "attnsel/sparse_mla.hpp"
#include "kernels/mla/cpu/weights.hpp"
#include "kernels/sparse_mla/cpu/sparse_plan.hpp"
#include "kernels/sparse_mla/validation.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

/// One layer's view of a step.
struct SparseStep {
  const SparseMlaLayerParams& params;
  const mla::cpu::LayerWeights& weights;
  const CpuSparseMlaPlan& plan;
  LatentFormat format;
  bool bf16_dot = false;  ///< the attention and the products use AVX-512-BF16
  int team() const;
};

/// concat_and_cache_mla for the plan's slots (checked in plan()).
void write_latent_rows(const SparseStep& s, const TensorView& kv_c, const TensorView& k_pe, const TensorView& cache);

/// Each token's local positions (row t at local + t · local_stride) as cache rows into
/// physical (likewise): block_table[request][p / block_size] · block_size + p % block_size
/// for 0 <= p < seq_len, else -1.
void to_physical(const SparseStep& s, const std::int32_t* local, std::int64_t local_stride, std::int32_t* physical,
                 std::int64_t physical_stride);

/// The latent attention of every token of the plan: q_latent [tokens, heads, 576] over the
/// cache rows of its index row (row t at indices + t · indices_stride, -1 or a valid row)
/// into out (rows of 512 with out's strides, the activation dtype), and the LSE at
/// lse[token · lse_stride + head] when lse is not null.
void sparse_latent_attention(const SparseStep& s, const TensorView& q_latent, const std::int32_t* indices,
                             std::int64_t indices_stride, const TensorView& cache, const TensorView& out, float* lse,
                             std::int64_t lse_stride);

/// execute(): local index rows as in to_physical.
void execute_sparse(const SparseStep& s, const TensorView& q, const std::int32_t* indices, std::int64_t indices_stride,
                    const TensorView& cache, const TensorView& output);

}  // namespace attnsel::kernel::sparse_mla::cpu
