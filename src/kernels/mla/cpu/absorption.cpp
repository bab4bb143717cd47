#include "kernels/mla/cpu/absorption.hpp"

#include <cstring>

#include "kernels/element_access.hpp"
#include "kernels/mla/cpu/gemm.hpp"

namespace attnsel::kernel::mla::cpu {

namespace {

// Rows [r0, r0 + m) of head n: c = a · b's columns [n_begin, n_end), a and c [rows, heads, ...].
void head_rows_gemm(const TensorView& a, const PackedMatrix& b, int n_begin, int n_end, const TensorView& c, int n,
                    std::int64_t r0, int m) {
  GemmArgs g;
  g.a = element_at(a, r0, n);
  g.a_type = a.dtype;
  g.a_stride = a.stride[0];
  g.m = m;
  g.b = &b;
  g.n_begin = n_begin;
  g.n_end = n_end;
  g.c = element_at(c, r0, n);
  g.c_type = c.dtype;
  g.c_stride = c.stride[0];
  gemm(g);
}

}  // namespace

void absorb_queries(const LayerWeights& w, const MlaDims& d, const TensorView& q, const TensorView& q_latent,
                    std::int64_t rows, int team) {
  const int rank = d.kv_lora_rank;
  const std::size_t rope_bytes = static_cast<std::size_t>(d.qk_rope_head_dim) * element_size(q.dtype);
  for_head_row_blocks(d.num_heads, rows, team, [&](int n, std::int64_t r0, int m) {
    head_rows_gemm(q, w.absorb[static_cast<std::size_t>(n)], 0, rank, q_latent, n, r0, m);
    for (std::int64_t t = r0; t < r0 + m; ++t)
      std::memcpy(element_at(q_latent, t, n, rank), element_at(q, t, n, d.qk_nope_head_dim), rope_bytes);
  });
}

void unabsorb_outputs(const LayerWeights& w, const MlaDims& d, const TensorView& latent_out, const TensorView& output,
                      std::int64_t rows, int team) {
  const int nope = d.qk_nope_head_dim;
  for_head_row_blocks(d.num_heads, rows, team, [&](int n, std::int64_t r0, int m) {
    head_rows_gemm(latent_out, w.up[static_cast<std::size_t>(n)], nope, nope + d.v_head_dim, output, n, r0, m);
  });
}

}  // namespace attnsel::kernel::mla::cpu
