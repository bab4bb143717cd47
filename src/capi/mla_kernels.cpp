// MLA kernels through the C API: create a layer's MlaImpl from a backend, plan a step,
// update it, write the latent cache, execute a layer and run the absorbed decode kernel
// alone, on DLPack tensors and the caller's stream. Each function maps onto one MlaImpl
// method (include/attnsel/mla.hpp); the kernel checks every tensor against the plan (written
// tensors whose elements share memory included), and this door adds what a C caller can get
// wrong besides (NULLs, struct sizes, dtype names).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <memory>
#include <optional>

#include "attnsel/attnsel.h"
#include "attnsel/backend.hpp"
#include "attnsel/mla.hpp"
#include "capi/kernel_args.hpp"
#include "capi/status.hpp"

struct attnsel_mla_kernel {
  std::unique_ptr<attnsel::kernel::MlaImpl> impl;
  attnsel::kernel::KernelInfo info;  // asked once: the C strings handed out point into it
};

namespace attnsel::capi {
namespace {

using kernel::ScalarType;
using kernel::TensorView;

ScalarType activation_dtype(const char* name) {
  const std::optional<DType> d = parse_dtype(name);
  if (!d)
    throw ValueError(fmt::format("dtype: unknown dtype '{}'; valid values are: {}", name, fmt::join(dtype_names(), ", ")));
  return kernel::scalar_type(*d);
}

kernel::MlaLayerParams mla_params(const attnsel_mla_layer_params& c) {
  require_struct(c.struct_size, sizeof(attnsel_mla_layer_params), "attnsel_mla_layer_params");
  kernel::MlaLayerParams p;
  p.dims.num_heads = c.num_heads;
  p.dims.kv_lora_rank = c.kv_lora_rank;
  p.dims.qk_rope_head_dim = c.qk_rope_head_dim;
  p.dims.qk_nope_head_dim = c.qk_nope_head_dim;
  p.dims.v_head_dim = c.v_head_dim;
  if (c.kv_b_proj != nullptr) p.kv_b_proj = view(c.kv_b_proj, "kv_b_proj");
  p.dtype = c.dtype != nullptr ? activation_dtype(c.dtype) : c.kv_b_proj != nullptr ? p.kv_b_proj.dtype : ScalarType::bf16;
  const int qk = c.qk_nope_head_dim + c.qk_rope_head_dim;
  p.scale = c.scale != 0.0f || qk <= 0 ? c.scale : 1.0f / std::sqrt(static_cast<float>(qk));
  if (c.kv_cache_dtype != nullptr) p.kv_cache_dtype = cache_dtype_from(c.kv_cache_dtype);
  p.k_scale = c.k_scale;
  p.batch_invariant = c.batch_invariant != 0;
  return p;
}

kernel::MlaPlanOptions plan_options(const attnsel_mla_plan_options* options) {
  kernel::MlaPlanOptions o;
  if (options == nullptr) return o;
  require_struct(options->struct_size, sizeof(attnsel_mla_plan_options), "attnsel_mla_plan_options");
  o.graph_capturable = options->graph_capturable != 0;
  o.max_blocks_per_seq = options->max_blocks_per_seq;
  o.decode_query_len = options->decode_query_len;
  o.lse = options->lse != 0;
  o.context_chunk_tokens = options->context_chunk_tokens;
  return o;
}

const kernel::MlaImpl& impl_of(const attnsel_mla_kernel* kernel) {
  require(kernel, "kernel");
  return *kernel->impl;
}

}  // namespace
}  // namespace attnsel::capi

using namespace attnsel;
using namespace attnsel::capi;

extern "C" {

void attnsel_mla_layer_params_init(attnsel_mla_layer_params* params) {
  if (!reset_struct(params)) return;
  const kernel::MlaDims deepseek;
  params->kv_lora_rank = deepseek.kv_lora_rank;
  params->qk_rope_head_dim = deepseek.qk_rope_head_dim;
  params->qk_nope_head_dim = deepseek.qk_nope_head_dim;
  params->v_head_dim = deepseek.v_head_dim;
  params->k_scale = 1.0f;
}

void attnsel_mla_plan_options_init(attnsel_mla_plan_options* options) {
  if (reset_struct(options)) options->decode_query_len = 1;
}

void attnsel_mla_step_summary_init(attnsel_mla_step_summary* summary) { reset_struct(summary); }

attnsel_status attnsel_mla_kernel_create(const char* backend, const attnsel_mla_layer_params* params,
                                         attnsel_mla_kernel** out) {
  return guarded_out(out, [&] {
    require(backend, "backend");  // the NULL arguments first, in their order
    require(params, "params");
    const std::shared_ptr<const AttentionBackend> cls = backend_with_kernel(backend);
    auto k = std::make_unique<attnsel_mla_kernel>();
    k->impl = cls->make_mla_impl(mla_params(*params));
    k->info = k->impl->kernel_info();
    return k;
  });
}

void attnsel_mla_kernel_destroy(attnsel_mla_kernel* kernel) { delete kernel; }

attnsel_status attnsel_mla_kernel_get_info(const attnsel_mla_kernel* kernel, attnsel_kernel_info* out) {
  return guarded([&] {
    require(kernel, "kernel");
    fill_info(kernel->info, kernel->info.isa.c_str(), nullptr, out);
  });
}

attnsel_status attnsel_mla_kernel_limits(const attnsel_mla_kernel* kernel, int32_t* max_decode_query_len,
                                         int32_t* max_heads) {
  return guarded([&] {
    const kernel::MlaKernelLimits limits = impl_of(kernel).limits();
    require(max_decode_query_len, "max_decode_query_len");
    require(max_heads, "max_heads");
    *max_decode_query_len = limits.max_decode_query_len;
    *max_heads = limits.max_heads;
  });
}

attnsel_status attnsel_mla_kernel_plan(const attnsel_mla_kernel* kernel, const attnsel_batch* batch,
                                       const DLTensor* cache, const attnsel_mla_plan_options* options,
                                       attnsel_stream stream, attnsel_step_plan** out) {
  return guarded_out(out, [&] {
    const kernel::MlaImpl& impl = impl_of(kernel);
    const kernel::AttentionMetadata md = metadata(batch);
    auto plan = std::make_unique<attnsel_step_plan>();
    plan->plan = impl.plan(md, view(cache, "cache"), stream_of(stream), plan_options(options));
    return plan;
  });
}

attnsel_status attnsel_mla_kernel_update_plan(const attnsel_mla_kernel* kernel, attnsel_step_plan* plan,
                                              const attnsel_batch* batch, attnsel_stream stream) {
  return guarded([&] {
    const kernel::MlaImpl& impl = impl_of(kernel);
    require(plan, "plan");
    impl.update(*plan->plan, metadata(batch), stream_of(stream));
  });
}

attnsel_status attnsel_mla_step_plan_summary(const attnsel_step_plan* plan, attnsel_mla_step_summary* out) {
  return guarded([&] {
    require(out, "out");
    require_struct(out->struct_size, sizeof(attnsel_mla_step_summary), "attnsel_mla_step_summary");
    const kernel::MlaStepSummary s = kernel::mla_step_summary(step_plan(plan));
    out->num_decodes = s.num_decodes;
    out->num_decode_tokens = s.num_decode_tokens;
    out->num_prefills = s.num_prefills;
    out->num_prefill_tokens = s.num_prefill_tokens;
    out->context_chunks = s.context_chunks;
  });
}

attnsel_status attnsel_mla_kernel_write_cache(const attnsel_mla_kernel* kernel, const attnsel_step_plan* plan,
                                              const DLTensor* kv_c, const DLTensor* k_pe, const DLTensor* cache,
                                              attnsel_stream stream) {
  return guarded([&] {
    const kernel::MlaImpl& impl = impl_of(kernel);
    const kernel::StepPlan& p = step_plan(plan);
    if (!p.shape().slot_mapping)
      throw ValueError("this step plan's batch has no slot_mapping: give attnsel_batch.slot_mapping to write the cache");
    impl.write_cache(p, view(kv_c, "kv_c"), view(k_pe, "k_pe"), view(cache, "cache"), stream_of(stream));
  });
}

attnsel_status attnsel_mla_kernel_execute(const attnsel_mla_kernel* kernel, const attnsel_step_plan* plan,
                                          const DLTensor* q, const DLTensor* kv_c, const DLTensor* k_pe,
                                          const DLTensor* cache, const DLTensor* output, attnsel_stream stream) {
  return guarded([&] {
    const kernel::MlaImpl& impl = impl_of(kernel);
    impl.execute(step_plan(plan), view(q, "q"), view(kv_c, "kv_c"), view(k_pe, "k_pe"), view(cache, "cache"),
                 view(output, "output"), stream_of(stream));
  });
}

attnsel_status attnsel_mla_kernel_decode_latent(const attnsel_mla_kernel* kernel, const attnsel_step_plan* plan,
                                                const DLTensor* q_latent, const DLTensor* cache, const DLTensor* out,
                                                const DLTensor* lse, attnsel_stream stream) {
  return guarded([&] {
    const kernel::MlaImpl& impl = impl_of(kernel);
    const std::optional<TensorView> lse_view = optional_view(lse, "lse");
    impl.decode_latent(step_plan(plan), view(q_latent, "q_latent"), view(cache, "cache"), view(out, "out"),
                       stream_of(stream), lse_view ? &*lse_view : nullptr);
  });
}

}  // extern "C"
