// The CPU MLA decode: absorption, latent attention, de-absorption (steps.hpp).
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/attention/cpu/work.hpp"
#include "kernels/mla/cpu/gemm.hpp"
#include "kernels/mla/cpu/latent_decode.hpp"
#include "kernels/mla/cpu/run_items.hpp"
#include "kernels/mla/cpu/steps.hpp"

namespace attnsel::kernel::mla::cpu {

namespace {

std::uint8_t* at(const TensorView& t, std::int64_t i, std::int64_t j, std::int64_t k = 0) {
  return static_cast<std::uint8_t*>(t.data) +
         (i * t.stride[0] + j * t.stride[1] + (t.ndim > 2 ? k * t.stride[2] : k)) *
             static_cast<std::int64_t>(element_size(t.dtype));
}

}  // namespace

int LayerStep::team() const { return std::max(1, std::min(plan.threads, omp_get_max_threads())); }

void latent_attention(const LayerStep& s, const TensorView& q_latent, const TensorView& cache, const TensorView& out,
                      float* lse, std::int64_t lse_stride) {
  const MlaLayerParams& p = s.params;
  const MlaBatch& b = s.plan.batch;
  kernel::cpu::LayerCtx c;
  c.head_size = p.dims.latent_size();
  c.value_head_size = p.dims.kv_lora_rank;  // the values: each latent's first kv_lora_rank entries
  c.group = p.dims.num_heads;               // every head shares the one latent "KV head"
  // The kernels read an e4m3 byte as value / 256 (kernels/attention/cpu/attention_body-inl.h).
  const float dequant = s.format.fp8 ? p.k_scale * 256.0f : 1.0f;
  c.qk_scale = p.scale * dequant;
  c.v_scale = dequant;
  c.causal = true;
  c.q_type = p.dtype;
  c.out_type = out.dtype;
  c.kv = s.format.stored;
  c.bf16_dot = s.bf16_dot;
  c.query = static_cast<const std::uint8_t*>(q_latent.data);
  c.q_stride[0] = q_latent.stride[0];
  c.q_stride[1] = q_latent.stride[1];
  c.out = static_cast<std::uint8_t*>(out.data);
  c.o_stride[0] = out.stride[0];
  c.o_stride[1] = out.stride[1];
  c.lse = lse;
  c.lse_stride = lse_stride;
  c.key_cache = c.value_cache = static_cast<const std::uint8_t*>(cache.data);
  c.k_stride[0] = c.v_stride[0] = cache.stride[0];
  c.k_stride[1] = c.v_stride[1] = cache.stride[1];
  c.block_table = b.block_table.data();
  c.max_blocks_per_seq = b.max_blocks_per_seq;
  c.block_size = b.block_size;
  c.num_kv_heads = 1;
  ItemMemory memory;
  memory.scratch = s.plan.scratch.as<std::byte>();
  memory.scratch_stride = s.plan.scratch_stride;
  memory.threads = s.team();
  memory.partials = s.plan.partials.as<float>();
  memory.parts_left = s.plan.split_parts_left.get();
  run_items(c, s.plan.decode, memory, latent_kernel_runs(c) ? run_latent_item : kernel::cpu::process_item);
}

void execute_decode(const LayerStep& s, const TensorView& q, const TensorView& cache, const TensorView& output) {
  const MlaDims& d = s.params.dims;
  const ScalarType act = s.params.dtype;
  const std::int64_t T = s.plan.batch.split.num_decode_tokens;
  if (T == 0) return;
  const int N = d.num_heads, latent = d.latent_size(), rank = d.kv_lora_rank;
  const std::size_t elem = element_size(act);
  const TensorView q_latent = TensorView::contiguous(s.plan.decode_query.as<void>(), act, {T, N, latent});
  const TensorView latent_out = TensorView::contiguous(s.plan.decode_latent_out.as<void>(), act, {T, N, rank});
  const std::int64_t blocks = (T + kGemmRowBlock - 1) / kGemmRowBlock;
  const std::int64_t tasks = N * blocks;

  // q̃ = [q_nope · W_UK_T | q_pe], per head and block of rows.
#pragma omp parallel for schedule(dynamic, 1) num_threads(s.team()) if (tasks > 1)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const int n = static_cast<int>(task / blocks);
    const std::int64_t r0 = task % blocks * kGemmRowBlock, rows = std::min<std::int64_t>(kGemmRowBlock, T - r0);
    GemmArgs g;
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
    gemm(g);
    for (std::int64_t t = r0; t < r0 + rows; ++t)
      std::memcpy(at(q_latent, t, n, rank), at(q, t, n, d.qk_nope_head_dim),
                  static_cast<std::size_t>(d.qk_rope_head_dim) * elem);
  }

  latent_attention(s, q_latent, cache, latent_out, nullptr, 0);

  // output = latent output · W_UV (the up-projection's value columns).
#pragma omp parallel for schedule(dynamic, 1) num_threads(s.team()) if (tasks > 1)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const int n = static_cast<int>(task / blocks);
    const std::int64_t r0 = task % blocks * kGemmRowBlock, rows = std::min<std::int64_t>(kGemmRowBlock, T - r0);
    GemmArgs g;
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
    gemm(g);
  }
}

}  // namespace attnsel::kernel::mla::cpu
