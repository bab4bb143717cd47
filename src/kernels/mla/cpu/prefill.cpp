// The CPU MLA prefill: the new tokens as 192/128 multi-head attention, the cached context
// in up-projected chunks, merged by log-sum-exp (steps.hpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/attention/cpu/work.hpp"
#include "kernels/element_access.hpp"
#include "kernels/fp8.hpp"
#include "kernels/mla/cpu/gemm.hpp"
#include "kernels/mla/cpu/merge_attn_states.hpp"
#include "kernels/mla/cpu/prefill_attention.hpp"
#include "kernels/mla/cpu/run_items.hpp"
#include "kernels/mla/cpu/steps.hpp"

namespace attnsel::kernel::mla::cpu {

namespace {

// A workspace of per-head rows seen as [rows, heads, width], each head's rows contiguous: an
// attention item then reads rows `width` elements apart, not heads · width (a power-of-two
// stride of 4 KiB at 16 heads put every value row of a tile in the same L1 sets).
TensorView head_major(const HostBuffer& h, ScalarType t, std::int64_t rows, int heads, int width) {
  const std::int64_t shape[3] = {rows, heads, width}, strides[3] = {width, rows * width, 1};
  return TensorView::strided(h.as<void>(), t, shape, strides);
}

// Keys [k_nope | k_pe] [rows, heads, 192] and values [rows, heads, 128] of `rows` latents
// (rows of kv_lora_rank entries of `latents`, their rope keys in `rope`, both activations).
void up_project(const LayerStep& s, const TensorView& latents, const TensorView& rope, std::int64_t rows,
                const TensorView& keys, const TensorView& values) {
  const MlaDims& d = s.params.dims;
  const int N = d.num_heads, nope = d.qk_nope_head_dim;
  const std::size_t rope_bytes = static_cast<std::size_t>(d.qk_rope_head_dim) * element_size(rope.dtype);
  for_head_row_blocks(N, rows, s.team(), [&](int n, std::int64_t r0, int m) {
    GemmArgs g;
    g.a = element_at(latents, r0);
    g.a_type = latents.dtype;
    g.a_stride = latents.stride[0];
    g.m = m;
    g.b = &s.weights.up[static_cast<std::size_t>(n)];
    g.n_begin = 0;
    g.n_end = nope;
    g.c = element_at(keys, r0, n);
    g.c_type = keys.dtype;
    g.c_stride = keys.stride[0];
    gemm(g);
    g.n_begin = nope;
    g.n_end = nope + d.v_head_dim;
    g.c = element_at(values, r0, n);
    g.c_type = values.dtype;
    g.c_stride = values.stride[0];
    gemm(g);
    for (std::int64_t r = r0; r < r0 + m; ++r)
      std::memcpy(element_at(keys, r, n, nope), element_at(rope, r), rope_bytes);
  });
}

// The CPU attention kernel's view of one prefill pass: queries `q` (prefill rows), keys and
// values in the workspace through the pass's table (one row per "block"), output `out`
// (rows of v_head_dim with out's strides) and the LSE at lse[token · heads + head].
kernel::cpu::LayerCtx pass_ctx(const LayerStep& s, const PrefillPass& pass, const TensorView& q,
                               const TensorView& keys, const TensorView& values, const TensorView& out, float* lse,
                               bool causal) {
  const MlaDims& d = s.params.dims;
  kernel::cpu::LayerCtx c;
  c.head_size = d.qk_head_size();
  c.value_head_size = d.v_head_dim;
  c.group = 1;
  c.qk_scale = s.params.scale;
  c.causal = causal;
  c.kv = keys.dtype;
  c.bf16_dot = s.bf16_dot;
  bind_rows(c, q, out, lse, d.num_heads);
  c.key_cache = static_cast<const std::uint8_t*>(keys.data);
  c.value_cache = static_cast<const std::uint8_t*>(values.data);
  c.k_stride[0] = keys.stride[0];
  c.k_stride[2] = keys.stride[1];
  c.v_stride[0] = values.stride[0];
  c.v_stride[2] = values.stride[1];
  c.block_table = pass.table.data();
  c.max_blocks_per_seq = pass.max_keys;
  c.block_size = 1;
  c.num_kv_heads = d.num_heads;
  return c;
}

void run_pass(const LayerStep& s, const PrefillPass& pass, const kernel::cpu::LayerCtx& c) {
  run_items(c, pass.work, s.item_memory(), prefill_kernel_runs(c) ? run_prefill_item : kernel::cpu::process_item);
}

// A chunk's cached rows into `gathered` (activation dtype), fp8 dequantised.
void gather(const LayerStep& s, const ContextChunkPass& chunk, const TensorView& cache, const TensorView& gathered) {
  const MlaBatch& b = s.plan.batch;
  const int latent = s.params.dims.latent_size();
  const ScalarType act = gathered.dtype;
  static const std::array<float, 256> kE4m3 = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[static_cast<std::size_t>(i)] = fp8_to_float(static_cast<std::uint8_t>(i), ScalarType::fp8_e4m3);
    return t;
  }();
  const std::int64_t n = static_cast<std::int64_t>(chunk.gathers.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(s.team()) if (chunk.rows >= 256)
  for (std::int64_t g = 0; g < n; ++g) {
    const ContextGather& gt = chunk.gathers[static_cast<std::size_t>(g)];
    const std::int32_t* table = b.table_row(gt.seq);
    for (std::int64_t pos = gt.begin; pos < gt.end; ++pos) {
      const std::int64_t block = table[pos / b.block_size];
      const auto* src = static_cast<const std::uint8_t*>(cache.data) +
                        (block * cache.stride[0] + (pos % b.block_size) * cache.stride[1]) *
                            static_cast<std::int64_t>(element_size(cache.dtype));
      std::uint8_t* dst = element_at(gathered, gt.row + pos - gt.begin);
      if (!s.format.fp8) {
        std::memcpy(dst, src, static_cast<std::size_t>(latent) * element_size(act));
        continue;
      }
      for (int e = 0; e < latent; ++e) store_activation(act, dst, e, kE4m3[src[e]] * s.params.k_scale);
    }
  }
}

}  // namespace

void execute_prefill(const LayerStep& s, const TensorView& q, const TensorView& kv_c, const TensorView& k_pe,
                     const TensorView& cache, const TensorView& output) {
  const CpuMlaPlan& plan = s.plan;
  const MlaDims& d = s.params.dims;
  const ScalarType act = s.params.dtype;
  const std::int64_t t0 = plan.batch.split.num_decode_tokens, T = plan.batch.split.num_prefill_tokens;
  if (T == 0) return;
  const int N = d.num_heads, dqk = d.qk_head_size(), dv = d.v_head_dim;
  auto rows_from = [&](const TensorView& t) {  // the view of the prefill rows of a [tokens, ...] tensor
    TensorView v = t;
    v.data = element_at(t, t0);
    v.shape[0] = T;
    return v;
  };
  const TensorView q_p = rows_from(q), out_p = rows_from(output), kv_c_p = rows_from(kv_c), k_pe_p = rows_from(k_pe);
  const TensorView keys = head_major(plan.new_keys, act, T, N, dqk);
  const TensorView values = head_major(plan.new_values, act, T, N, dv);
  up_project(s, kv_c_p, k_pe_p, T, keys, values);

  if (plan.chunks.empty()) {  // no cached context: the new tokens' result is the output
    run_pass(s, plan.prefill, pass_ctx(s, plan.prefill, q_p, keys, values, out_p, nullptr, true));
    return;
  }
  auto f32_rows = [&](const HostBuffer& h) { return TensorView::contiguous(h.as<void>(), ScalarType::f32, {T, N, dv}); };
  // LSEs are token-major [T, N] buffers, seen as merge_attn_states' [heads, tokens].
  auto lse_view = [&](const HostBuffer& h) {
    const std::int64_t shape[2] = {N, T}, strides[2] = {1, N};
    return TensorView::strided(h.as<void>(), ScalarType::f32, shape, strides);
  };
  const TensorView suffix = f32_rows(plan.suffix), prefix = f32_rows(plan.prefix), chunk_out = f32_rows(plan.chunk_out);
  const TensorView suffix_lse = lse_view(plan.suffix_lse), prefix_lse = lse_view(plan.prefix_lse),
                   chunk_lse = lse_view(plan.chunk_lse);
  run_pass(s, plan.prefill, pass_ctx(s, plan.prefill, q_p, keys, values, suffix, plan.suffix_lse.as<float>(), true));

  const std::int64_t max_rows = std::max<std::int64_t>(plan.max_chunk_rows, 1);
  const TensorView gathered = TensorView::contiguous(plan.gathered.as<void>(), act, {max_rows, d.latent_size()});
  const TensorView chunk_keys = head_major(plan.chunk_keys, act, max_rows, N, dqk);
  const TensorView chunk_values = head_major(plan.chunk_values, act, max_rows, N, dv);
  TensorView rope = gathered;  // the gathered latents' rope keys
  rope.data = element_at(gathered, 0, d.kv_lora_rank);
  rope.shape[1] = d.qk_rope_head_dim;
  for (std::size_t c = 0; c < plan.chunks.size(); ++c) {
    const ContextChunkPass& chunk = plan.chunks[c];
    gather(s, chunk, cache, gathered);
    up_project(s, gathered, rope, chunk.rows, chunk_keys, chunk_values);
    // The first chunk starts the prefix; later ones are folded into it (requests whose chunk
    // is empty get output 0 and LSE -inf, which the fold leaves untouched).
    const bool first = c == 0;
    run_pass(s, chunk.pass,
             pass_ctx(s, chunk.pass, q_p, chunk_keys, chunk_values, first ? prefix : chunk_out,
                      (first ? plan.prefix_lse : plan.chunk_lse).as<float>(), false));
    if (!first) merge_attn_states(prefix, &prefix_lse, prefix, prefix_lse, chunk_out, chunk_lse);
  }
  merge_attn_states(out_p, nullptr, prefix, prefix_lse, suffix, suffix_lse);
}

}  // namespace attnsel::kernel::mla::cpu
