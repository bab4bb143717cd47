// The sparse MLA layer on the CPU (sparse_steps.hpp): vLLM's FlashMLASparseImpl.forward for
// every token — q_nope · W_UK (rounded to the activation dtype, as vLLM's bmm), the sparse
// latent attention over the token's index row turned into cache rows, the latent output
// (in the activation dtype, as FlashMLA returns it) · W_UV.
#include "kernels/mla/cpu/absorption.hpp"
#include "kernels/sparse_mla/cpu/sparse_steps.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

void execute_sparse(const SparseStep& s, const TensorView& q, const std::int32_t* indices, std::int64_t indices_stride,
                    const TensorView& cache, const TensorView& output) {
  const MlaDims& d = s.params.dims;
  const ScalarType act = s.params.dtype;
  const std::int64_t T = s.plan.batch.num_actual_tokens;
  if (T == 0) return;
  const int N = d.num_heads, latent = d.latent_size(), rank = d.kv_lora_rank, topk = s.params.topk;
  const TensorView q_latent = TensorView::contiguous(s.plan.query_latent.as<void>(), act, {T, N, latent});
  const TensorView latent_out = TensorView::contiguous(s.plan.latent_out.as<void>(), act, {T, N, rank});
  std::int32_t* physical = s.plan.physical.as<std::int32_t>();
  to_physical(s, indices, indices_stride, physical, topk);
  mla::cpu::absorb_queries(s.weights, d, q, q_latent, T, s.team());
  sparse_latent_attention(s, q_latent, physical, topk, cache, latent_out, nullptr, 0);
  mla::cpu::unabsorb_outputs(s.weights, d, latent_out, output, T, s.team());
}

}  // namespace attnsel::kernel::sparse_mla::cpu
