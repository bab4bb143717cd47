// Kernels through the C API: create a layer's implementation, ask what its kernel needs,
// plan a step, update the plan, write the KV cache and execute a layer, on DLPack tensors
// and the caller's stream. Each function maps onto one AttentionImpl method of the
// step-level kernel interface (include/attnsel/kernel.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "attnsel/attnsel.h"
#include "attnsel/backend.hpp"
#include "attnsel/kernel.hpp"
#include "capi/kernel_args.hpp"
#include "capi/status.hpp"

struct attnsel_kernel {
  std::unique_ptr<attnsel::kernel::AttentionImpl> impl;
  attnsel::kernel::KernelInfo info;  // asked once: the C strings below point into it
  std::string layout;                // info.preferred_layout's name, or ""
};

namespace attnsel::capi {
namespace {

using kernel::KVCacheView;
using kernel::LayerParams;
using kernel::ScalarType;
using kernel::TensorView;

std::vector<float> copy_floats(const float* data, std::uint32_t count, std::string_view what) {
  if (count == 0) return {};
  require(data, what);
  return std::vector<float>(data, data + count);
}

LayerParams layer_params(const attnsel_layer_params& c) {
  require_struct(c.struct_size, sizeof(attnsel_layer_params), "attnsel_layer_params");
  LayerParams p;
  p.num_heads = c.num_heads;
  p.num_kv_heads = c.num_kv_heads;
  p.head_size = c.head_size;
  p.scale = c.scale != 0.0f || c.head_size <= 0 ? c.scale : 1.0f / std::sqrt(static_cast<float>(c.head_size));
  if (c.sliding_window < 0) throw ValueError(fmt::format("sliding_window = {} is negative", c.sliding_window));
  if (c.sliding_window > 0) p.sliding_window = c.sliding_window;
  p.logits_soft_cap = c.logits_soft_cap;
  p.alibi_slopes = copy_floats(c.alibi_slopes, c.num_alibi_slopes, "alibi_slopes");
  p.sinks = copy_floats(c.sinks, c.num_sinks, "sinks");
  if (c.attn_type != nullptr) {
    const std::optional<AttentionType> t = parse_attn_type(c.attn_type);
    if (!t) throw ValueError(fmt::format("unknown attention type '{}'; valid values are: {}", c.attn_type,
                                         fmt::join(attn_type_names(), ", ")));
    p.attn_type = *t;
  }
  p.causal = c.causal != 0;
  if (c.kv_cache_dtype != nullptr) p.kv_cache_dtype = cache_dtype_from(c.kv_cache_dtype);
  p.k_scale = c.k_scale;
  p.v_scale = c.v_scale;
  p.k_scales = copy_floats(c.k_scales, c.num_k_scales, "k_scales");
  p.v_scales = copy_floats(c.v_scales, c.num_v_scales, "v_scales");
  p.batch_invariant = c.batch_invariant != 0;
  return p;
}

KVCacheView cache_view(const DLTensor* key_cache, const DLTensor* value_cache) {
  return KVCacheView{view(key_cache, "key_cache"), view(value_cache, "value_cache")};
}

/// The activation dtype of a plan: DLPack's code/bits/lanes, read by the one DLPack mapping.
ScalarType activation_dtype(DLDataType dtype) {
  DLTensor probe{};
  probe.device = DLDevice{kDLCPU, 0};
  probe.dtype = dtype;
  try {
    return kernel::from_dlpack(probe).dtype;
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("dtype: {}", e.what()));
  }
}

kernel::PlanOptions plan_options(const attnsel_plan_options* options) {
  kernel::PlanOptions o;
  if (options == nullptr) return o;
  require_struct(options->struct_size, sizeof(attnsel_plan_options), "attnsel_plan_options");
  o.graph_capturable = options->graph_capturable != 0;
  o.max_blocks_per_seq = options->max_blocks_per_seq;
  o.lse = options->lse != 0;
  o.early_cache_reads = options->early_cache_reads != 0;  // in the first version's padding: zeroed by _init
  return o;
}

}  // namespace
}  // namespace attnsel::capi

using namespace attnsel;
using namespace attnsel::capi;

extern "C" {

void attnsel_layer_params_init(attnsel_layer_params* params) {
  if (!reset_struct(params)) return;
  params->causal = 1;
  params->k_scale = 1.0f;
  params->v_scale = 1.0f;
}

void attnsel_batch_init(attnsel_batch* batch) { reset_struct(batch); }

void attnsel_plan_options_init(attnsel_plan_options* options) { reset_struct(options); }

void attnsel_kernel_info_init(attnsel_kernel_info* info) { reset_struct(info); }

attnsel_status attnsel_kernel_create(const char* backend, const attnsel_layer_params* params, attnsel_kernel** out) {
  return guarded_out(out, [&] {
    require(backend, "backend");  // the NULL arguments first, in their order
    require(params, "params");
    const std::shared_ptr<const AttentionBackend> cls = backend_with_kernel(backend);
    auto k = std::make_unique<attnsel_kernel>();
    k->impl = cls->make_impl(layer_params(*params));
    k->info = k->impl->kernel_info();
    if (k->info.preferred_layout) k->layout = layout_name(*k->info.preferred_layout);
    return k;
  });
}

void attnsel_kernel_destroy(attnsel_kernel* kernel) { delete kernel; }

attnsel_status attnsel_kernel_get_info(const attnsel_kernel* kernel, attnsel_kernel_info* out) {
  return guarded([&] {
    require(kernel, "kernel");
    fill_info(kernel->info, kernel->info.isa.c_str(), kernel->layout.empty() ? nullptr : kernel->layout.c_str(), out);
  });
}

attnsel_status attnsel_backend_get_kernel_info(const char* backend, const char* dtype, const char* kv_cache_dtype,
                                               attnsel_kernel_info* out) {
  return guarded([&] {
    const std::shared_ptr<const AttentionBackend> cls = named_backend(backend);
    ScalarType activation = ScalarType::bf16;
    if (dtype != nullptr) {
      const std::optional<DType> d = parse_dtype(dtype);
      if (!d) throw ValueError(fmt::format("unknown dtype '{}'; valid values are: {}", dtype, fmt::join(dtype_names(), ", ")));
      activation = kernel::scalar_type(*d);
    }
    const CacheDType cache = kv_cache_dtype != nullptr ? cache_dtype_from(kv_cache_dtype) : CacheDType::auto_;
    const kernel::KernelInfo k = cls->kernel_info(activation, cache);
    fill_info(k, interned(k.isa),
              k.preferred_layout ? interned(std::string(layout_name(*k.preferred_layout))) : nullptr, out);
  });
}

attnsel_status attnsel_kernel_plan(const attnsel_kernel* kernel, const attnsel_batch* batch, const DLTensor* key_cache,
                                   const DLTensor* value_cache, DLDataType dtype, const attnsel_plan_options* options,
                                   attnsel_stream stream, attnsel_step_plan** out) {
  return guarded_out(out, [&] {
    require(kernel, "kernel");
    const kernel::AttentionMetadata md = metadata(batch);
    const KVCacheView cache = cache_view(key_cache, value_cache);
    auto plan = std::make_unique<attnsel_step_plan>();
    plan->plan = kernel->impl->plan(md, cache, activation_dtype(dtype), stream_of(stream), plan_options(options));
    return plan;
  });
}

attnsel_status attnsel_kernel_update_plan(const attnsel_kernel* kernel, attnsel_step_plan* plan,
                                          const attnsel_batch* batch, attnsel_stream stream) {
  return guarded([&] {
    require(kernel, "kernel");
    require(plan, "plan");
    kernel->impl->update(*plan->plan, metadata(batch), stream_of(stream));
  });
}

void attnsel_step_plan_destroy(attnsel_step_plan* plan) { delete plan; }

uint64_t attnsel_step_plan_workspace_bytes(const attnsel_step_plan* plan) {
  return plan != nullptr ? plan->plan->workspace_bytes() : 0;
}

int attnsel_step_plan_fp8_queries(const attnsel_step_plan* plan) {
  return plan != nullptr && plan->plan->fp8_queries() ? 1 : 0;
}

attnsel_status attnsel_kernel_write_kv_cache(const attnsel_kernel* kernel, const attnsel_step_plan* plan,
                                             const DLTensor* key, const DLTensor* value, const DLTensor* key_cache,
                                             const DLTensor* value_cache, attnsel_stream stream) {
  return guarded([&] {
    require(kernel, "kernel");
    const kernel::StepPlan& p = step_plan(plan);
    if (!p.shape().slot_mapping)
      throw ValueError("this step plan's batch has no slot_mapping: give attnsel_batch.slot_mapping to write the KV cache");
    kernel->impl->write_kv_cache(p, view(key, "key"), view(value, "value"), cache_view(key_cache, value_cache),
                                 stream_of(stream));
  });
}

attnsel_status attnsel_kernel_execute(const attnsel_kernel* kernel, const attnsel_step_plan* plan,
                                      const DLTensor* query, const DLTensor* key_cache, const DLTensor* value_cache,
                                      const DLTensor* output, const DLTensor* lse, attnsel_stream stream) {
  return guarded([&] {
    require(kernel, "kernel");
    const kernel::StepPlan& p = step_plan(plan);
    const std::optional<TensorView> lse_view = optional_view(lse, "lse");
    kernel->impl->execute(p, view(query, "query"), cache_view(key_cache, value_cache), view(output, "output"),
                          stream_of(stream), lse_view ? &*lse_view : nullptr);
  });
}

attnsel_status attnsel_kernel_execute_append(const attnsel_kernel* kernel, const attnsel_step_plan* plan,
                                             const DLTensor* query, const DLTensor* key, const DLTensor* value,
                                             const DLTensor* key_cache, const DLTensor* value_cache,
                                             const DLTensor* output, const DLTensor* lse, attnsel_stream stream) {
  return guarded([&] {
    require(kernel, "kernel");
    const kernel::StepPlan& p = step_plan(plan);
    if (!p.shape().slot_mapping)
      throw ValueError("this step plan's batch has no slot_mapping: give attnsel_batch.slot_mapping to append keys "
                       "and values in execute");
    const std::optional<TensorView> lse_view = optional_view(lse, "lse");
    const kernel::NewKeysValues new_kv{view(key, "key"), view(value, "value")};
    kernel->impl->execute(p, view(query, "query"), new_kv, cache_view(key_cache, value_cache), view(output, "output"),
                          stream_of(stream), lse_view ? &*lse_view : nullptr);
  });
}

}  // extern "C"
