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
#include "attnsel/registry.hpp"
#include "capi/status.hpp"

struct attnsel_kernel {
  std::unique_ptr<attnsel::kernel::AttentionImpl> impl;
  attnsel::kernel::KernelInfo info;  // asked once: the C strings below point into it
  std::string layout;                // info.preferred_layout's name, or ""
};

struct attnsel_step_plan {
  std::unique_ptr<attnsel::kernel::StepPlan> plan;
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

TensorView view(const DLTensor* t, std::string_view what) {
  require(t, what);
  try {
    return kernel::from_dlpack(*t);
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("{}: {}", what, e.what()));
  }
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

/// A host-memory batch as the kernel interface's view of it. Spans point into the caller's
/// arrays; plan() and update() copy what they keep. Only the sizes that locate the arrays
/// are checked here: the kernel interface checks the contents.
kernel::AttentionMetadata metadata(const attnsel_batch* batch) {
  require(batch, "batch");
  require_struct(batch->struct_size, sizeof(attnsel_batch), "attnsel_batch");
  const attnsel_batch& b = *batch;
  if (b.num_seqs < 0) throw ValueError(fmt::format("num_seqs = {} is negative", b.num_seqs));
  if (b.max_blocks_per_seq < 0)
    throw ValueError(fmt::format("max_blocks_per_seq = {} is negative", b.max_blocks_per_seq));
  const auto n = static_cast<std::size_t>(b.num_seqs);
  require(b.query_start_loc, "query_start_loc");
  if (n > 0) require(b.seq_lens, "seq_lens");
  const std::size_t table_size = n * static_cast<std::size_t>(b.max_blocks_per_seq);
  if (table_size > 0) require(b.block_table, "block_table");
  kernel::AttentionMetadata md;
  md.num_seqs = b.num_seqs;
  md.num_actual_tokens = b.query_start_loc[n];
  if (md.num_actual_tokens < 0)
    throw ValueError(fmt::format("query_start_loc[num_seqs] = {} is negative", md.num_actual_tokens));
  md.query_start_loc = {b.query_start_loc, n + 1};
  md.seq_lens = {b.seq_lens, n};
  md.block_table = {b.block_table, table_size};
  md.max_blocks_per_seq = b.max_blocks_per_seq;
  if (b.slot_mapping != nullptr) md.slot_mapping = {b.slot_mapping, static_cast<std::size_t>(md.num_actual_tokens)};
  for (std::size_t s = 0; s < n; ++s) {
    md.max_query_len = std::max(md.max_query_len, b.query_start_loc[s + 1] - b.query_start_loc[s]);
    md.max_seq_len = std::max(md.max_seq_len, b.seq_lens[s]);
  }
  return md;
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

kernel::Stream stream_of(attnsel_stream stream) { return kernel::Stream::from_native(stream); }

std::int32_t graph_support_code(kernel::GraphSupport g) {
  switch (g) {
    case kernel::GraphSupport::never: return ATTNSEL_GRAPH_SUPPORT_NEVER;
    case kernel::GraphSupport::uniform_single_token_decode: return ATTNSEL_GRAPH_SUPPORT_UNIFORM_SINGLE_TOKEN_DECODE;
    case kernel::GraphSupport::uniform_batch: return ATTNSEL_GRAPH_SUPPORT_UNIFORM_BATCH;
    case kernel::GraphSupport::always: return ATTNSEL_GRAPH_SUPPORT_ALWAYS;
  }
  return ATTNSEL_GRAPH_SUPPORT_NEVER;
}

/// Fills the fields of `out` that lie inside its struct_size. `isa` and `layout` must
/// outlive the caller's use of the struct.
void fill_info(const kernel::KernelInfo& k, const char* isa, const char* layout, attnsel_kernel_info* out) {
  require(out, "out");
  // The first version ended with lse_output; later fields are filled where the caller's struct has them.
  require_struct(out->struct_size, offsetof(attnsel_kernel_info, lse_prefill), "attnsel_kernel_info");
  out->available = k.available ? 1 : 0;
  out->device_type = k.device == kernel::DeviceKind::cuda ? kDLCUDA : kDLCPU;
  out->isa = isa;
  out->graph_support = graph_support_code(k.graph_support);
  out->graph_support_name = to_string(k.graph_support).data();  // a string literal's view
  out->preferred_layout = layout;
  out->lse_output = k.lse_output ? 1 : 0;
  if (out->struct_size >= offsetof(attnsel_kernel_info, lse_prefill) + sizeof(out->lse_prefill))
    out->lse_prefill = k.lse_prefill ? 1 : 0;
}

/// Strings handed out by attnsel_backend_get_kernel_info: a few ISA and layout names, kept
/// for the life of the process so that callers need not release them.
const char* interned(const std::string& text) {
  static std::mutex mutex;
  static std::set<std::string> strings;
  const std::lock_guard lock(mutex);
  return strings.insert(text).first->c_str();
}

const kernel::StepPlan& step_plan(const attnsel_step_plan* plan) {
  require(plan, "plan");
  return *plan->plan;
}

}  // namespace
}  // namespace attnsel::capi

using namespace attnsel;
using namespace attnsel::capi;

extern "C" {

void attnsel_layer_params_init(attnsel_layer_params* params) {
  if (params == nullptr) return;
  *params = attnsel_layer_params{};
  params->struct_size = sizeof(attnsel_layer_params);
  params->causal = 1;
  params->k_scale = 1.0f;
  params->v_scale = 1.0f;
}

void attnsel_batch_init(attnsel_batch* batch) {
  if (batch == nullptr) return;
  *batch = attnsel_batch{};
  batch->struct_size = sizeof(attnsel_batch);
}

void attnsel_plan_options_init(attnsel_plan_options* options) {
  if (options == nullptr) return;
  *options = attnsel_plan_options{};
  options->struct_size = sizeof(attnsel_plan_options);
}

void attnsel_kernel_info_init(attnsel_kernel_info* info) {
  if (info == nullptr) return;
  *info = attnsel_kernel_info{};
  info->struct_size = sizeof(attnsel_kernel_info);
}

attnsel_status attnsel_kernel_create(const char* backend, const attnsel_layer_params* params, attnsel_kernel** out) {
  if (out == nullptr) return fail(ATTNSEL_STATUS_VALUE_ERROR, "out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    require(backend, "backend");
    require(params, "params");
    const BackendMember member = AttentionBackendEnum.from_user_text(backend);
    const std::shared_ptr<const AttentionBackend> cls = member.get_attention_class();
    if (!cls->has_kernel()) throw NotImplementedError(cls->missing_kernel_reason());
    auto k = std::make_unique<attnsel_kernel>();
    k->impl = cls->make_impl(layer_params(*params));
    k->info = k->impl->kernel_info();
    if (k->info.preferred_layout) k->layout = layout_name(*k->info.preferred_layout);
    *out = k.release();
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
    require(backend, "backend");
    const BackendMember member = AttentionBackendEnum.from_user_text(backend);
    const std::shared_ptr<const AttentionBackend> cls = member.get_attention_class();
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
  if (out == nullptr) return fail(ATTNSEL_STATUS_VALUE_ERROR, "out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    require(kernel, "kernel");
    const kernel::AttentionMetadata md = metadata(batch);
    const KVCacheView cache = cache_view(key_cache, value_cache);
    auto plan = std::make_unique<attnsel_step_plan>();
    plan->plan = kernel->impl->plan(md, cache, activation_dtype(dtype), stream_of(stream), plan_options(options));
    *out = plan.release();
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
    std::optional<TensorView> lse_view;
    if (lse != nullptr) lse_view = view(lse, "lse");
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
    std::optional<TensorView> lse_view;
    if (lse != nullptr) lse_view = view(lse, "lse");
    const kernel::NewKeysValues new_kv{view(key, "key"), view(value, "value")};
    kernel->impl->execute(p, view(query, "query"), new_kv, cache_view(key_cache, value_cache), view(output, "output"),
                          stream_of(stream), lse_view ? &*lse_view : nullptr);
  });
}

}  // extern "C"
