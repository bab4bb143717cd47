// The sparse MLA layer on the CPU (sparse_steps.hpp): vLLM's FlashMLASparseImpl.forward for
// every token — q_nope · W_UK (rounded to the activation dtype, as vLLM's bmm), the sparse
// latent attention over the token's index row turned into cache rows, the latent output
// (in the activation dtype, as FlashMLA returns it) · W_UV.
#include <algorithm>
#include <cstring>

#include "kernels/mla/cpu/gemm.hpp"
#include "kernels/sparse_mla/cpu/sparse_steps.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

namespace {

std::uint8_t* at(const TensorView& t, std::int64_t i, std::int64_t j, std::int64_t k = 0) {
  return static_cast<std::uint8_t*>(t.data) +
         (i * t.stride[0] + j * t.stride[1] + (t.ndim > 2 ? k * t.stride[2] : k)) *
             static_cast<std::int64_t>(element_size(t.dtype));
}

}  // namespace

void execute_sparse(const SparseStep& s, const TensorView& q, const std::int32_t* indices, std::int64_t indices_stride,
                    const TensorView& cache, const TensorView& output) {
  const MlaDims& d = s.params.dims;
  const ScalarType act = s.params.dtype;
  const std::int64_t T = s.plan.batch.num_actual_tokens;
  if (T == 0) return;
  const int N = d.num_heads, latent = d.latent_size(), rank = d.kv_lora_rank, topk = s.params.topk;
  const std::size_t elem = element_size(act);
  const TensorView q_latent = TensorView::contiguous(s.plan.query_latent.as<void>(), act, {T, N, latent});
  const TensorView latent_out = TensorView::contiguous(s.plan.latent_out.as<void>(), act, {T, N, rank});
  std::int32_t* physical = s.plan.physical.as<std::int32_t>();
  to_physical(s, indices, indices_stride, physical, topk);

  const std::int64_t blocks = (T + mla::cpu::kGemmRowBlock - 1) / mla::cpu::kGemmRowBlock;
  const std::int64_t tasks = N * blocks;
  // q̃ = [q_nope · W_UK_T | q_pe], per head and block of rows.
#pragma omp parallel for schedule(dynamic, 1) num_threads(s.team()) if (tasks > 1)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const int n = static_cast<int>(task / blocks);
    const std::int64_t r0 = task % blocks * mla::cpu::kGemmRowBlock;
    const std::int64_t rows = std::min<std::int64_t>(mla::cpu::kGemmRowBlock, T - r0);
    mla::cpu::GemmArgs g;
    g.a = at(q, r0, n);
    g.a_type = act;
    g.a_stride = q.stride[0];
    g.m = static_cast<int>(rows);
    g.b = &s.weights.absorb[static_cast<std::size_t>(n)];
    g.n_begin = 0;
    g.n_end = rank;
    g.c = at(q_latent, r0, n);
    g.c_type = act;
    g.c_stride = q_latent.stride[0];
    mla::cpu::gemm(g);
    for (std::int64_t t = r0; t < r0 + rows; ++t)
      std::memcpy(at(q_latent, t, n, rank), at(q, t, n, d.qk_nope_head_dim),
                  static_cast<std::size_t>(d.qk_rope_head_dim) * elem);
  }

  sparse_latent_attention(s, q_latent, physical, topk, cache, latent_out, nullptr, 0);

  // output = latent output · W_UV (the up-projection's value columns).
#pragma omp parallel for schedule(dynamic, 1) num_threads(s.team()) if (tasks > 1)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const int n = static_cast<int>(task / blocks);
    const std::int64_t r0 = task % blocks * mla::cpu::kGemmRowBlock;
    const std::int64_t rows = std::min<std::int64_t>(mla::cpu::kGemmRowBlock, T - r0);
    mla::cpu::GemmArgs g;
    g.a = at(latent_out, r0, n);
    g.a_type = act;
    g.a_stride = latent_out.stride[0];
    g.m = static_cast<int>(rows);
    g.b = &s.weights.up[static_cast<std::size_t>(n)];
    g.n_begin = d.qk_nope_head_dim;
    g.n_end = d.qk_nope_head_dim + d.v_head_dim;
    g.c = at(output, r0, n);
    g.c_type = output.dtype;
    g.c_stride = output.stride[0];
    mla::cpu::gemm(g);
  }
}

}  // namespace attnsel::kernel::sparse_mla::cpu
