// The CPU MLA decode: absorption, latent attention, de-absorption (steps.hpp).
#include <omp.h>

#include <algorithm>

#include "kernels/attention/cpu/work.hpp"
#include "kernels/mla/cpu/absorption.hpp"
#include "kernels/mla/cpu/latent_decode.hpp"
#include "kernels/mla/cpu/run_items.hpp"
#include "kernels/mla/cpu/steps.hpp"

namespace attnsel::kernel::mla::cpu {

int LayerStep::team() const { return std::max(1, std::min(plan.threads, omp_get_max_threads())); }

ItemMemory LayerStep::item_memory() const {
  ItemMemory memory;
  memory.scratch = plan.scratch.as<std::byte>();
  memory.scratch_stride = plan.scratch_stride;
  memory.threads = team();
  memory.partials = plan.partials.as<float>();
  memory.parts_left = plan.split_parts_left.get();
  return memory;
}

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
  c.kv = s.format.stored;
  c.bf16_dot = s.bf16_dot;
  bind_rows(c, q_latent, out, lse, lse_stride);
  c.key_cache = c.value_cache = static_cast<const std::uint8_t*>(cache.data);
  c.k_stride[0] = c.v_stride[0] = cache.stride[0];
  c.k_stride[1] = c.v_stride[1] = cache.stride[1];
  c.block_table = b.block_table.data();
  c.max_blocks_per_seq = b.max_blocks_per_seq;
  c.block_size = b.block_size;
  c.num_kv_heads = 1;
  run_items(c, s.plan.decode, s.item_memory(), latent_kernel_runs(c) ? run_latent_item : kernel::cpu::process_item);
}

void execute_decode(const LayerStep& s, const TensorView& q, const TensorView& cache, const TensorView& output) {
  const MlaDims& d = s.params.dims;
  const ScalarType act = s.params.dtype;
  const std::int64_t T = s.plan.batch.split.num_decode_tokens;
  if (T == 0) return;
  const int N = d.num_heads, latent = d.latent_size(), rank = d.kv_lora_rank;
  const TensorView q_latent = TensorView::contiguous(s.plan.decode_query.as<void>(), act, {T, N, latent});
  const TensorView latent_out = TensorView::contiguous(s.plan.decode_latent_out.as<void>(), act, {T, N, rank});
  absorb_queries(s.weights, d, q, q_latent, T, s.team());
  latent_attention(s, q_latent, cache, latent_out, nullptr, 0);
  unabsorb_outputs(s.weights, d, latent_out, output, T, s.team());
}

}  // namespace attnsel::kernel::mla::cpu
