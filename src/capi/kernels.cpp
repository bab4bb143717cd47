// Kernels through the C API: create a layer's implementation, plan a step, write the KV
// cache and execute a layer, on DLPack tensors and a caller's stream.
//
// The C functions are shaped as plan (once per step) + execute (per layer, with a stream).
// Today's kernel interface offers one call per layer (AttentionImpl::forward, which plans
// and launches on the default stream), so a step plan here holds the checked, copied batch
// description, and execute calls forward; on CUDA a caller's stream is ordered around the
// default-stream launch with events. This file is the only one that knows that mapping.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "attnsel/attnsel.h"
#include "attnsel/backend.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/registry.hpp"
#include "capi/status.hpp"
#include "kernels/cuda/flash_attn_cuda.hpp"

#if defined(ATTNSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

struct attnsel_kernel {
  std::string backend;
  std::unique_ptr<attnsel::kernel::AttentionImpl> impl;
  std::int32_t device_type = kDLCPU;
};

struct attnsel_step_plan {
  std::string backend;
  int num_heads = 0, num_kv_heads = 0, head_size = 0;  // the layer shape it was built for
  std::vector<std::int32_t> query_start_loc, seq_lens, block_table;
  std::vector<std::int64_t> slot_mapping;
  bool has_slot_mapping = false;
  attnsel::kernel::AttentionMetadata md;
};

namespace attnsel::capi {
namespace {

using kernel::KVCacheView;
using kernel::LayerParams;
using kernel::TensorView;

template <class T>
std::vector<T> copy_array(const T* data, std::uint32_t count, std::string_view what) {
  if (count == 0) return {};
  require(data, what);
  return std::vector<T>(data, data + count);
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
  p.alibi_slopes = copy_array(c.alibi_slopes, c.num_alibi_slopes, "alibi_slopes");
  p.sinks = copy_array(c.sinks, c.num_sinks, "sinks");
  if (c.attn_type != nullptr) {
    const std::optional<AttentionType> t = parse_attn_type(c.attn_type);
    if (!t) throw ValueError(fmt::format("unknown attention type '{}'; valid values are: {}", c.attn_type,
                                         fmt::join(attn_type_names(), ", ")));
    p.attn_type = *t;
  }
  p.causal = c.causal != 0;
  if (c.kv_cache_dtype != nullptr) p.kv_cache_dtype = c.kv_cache_dtype;
  p.k_scale = c.k_scale;
  p.v_scale = c.v_scale;
  p.k_scales = copy_array(c.k_scales, c.num_k_scales, "k_scales");
  p.v_scales = copy_array(c.v_scales, c.num_v_scales, "v_scales");
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

// A plan serves every layer whose head counts and head size match the one it was built for.
void check_plan(const attnsel_kernel& k, const attnsel_step_plan& plan) {
  const LayerParams& p = k.impl->params();
  if (plan.num_heads != p.num_heads || plan.num_kv_heads != p.num_kv_heads || plan.head_size != p.head_size)
    throw ValueError(fmt::format(
        "this step plan was built for layers with num_heads={}, num_kv_heads={}, head_size={}; this {} kernel has "
        "num_heads={}, num_kv_heads={}, head_size={}",
        plan.num_heads, plan.num_kv_heads, plan.head_size, k.backend, p.num_heads, p.num_kv_heads, p.head_size));
}

#if defined(ATTNSEL_HAVE_CUDA)
// Orders a default-stream launch inside a caller's stream: the launch waits for the work
// queued on `stream` so far, and `stream`'s later work waits for the launch.
class StreamOrder {
 public:
  explicit StreamOrder(attnsel_stream stream) : stream_(static_cast<cudaStream_t>(stream)) {
    if (!active()) return;
    check(cudaEventCreateWithFlags(&before_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check(cudaEventCreateWithFlags(&after_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check(cudaEventRecord(before_, stream_), "cudaEventRecord on the caller's stream");
    check(cudaStreamWaitEvent(nullptr, before_, 0), "cudaStreamWaitEvent");
  }
  ~StreamOrder() {
    if (before_) cudaEventDestroy(before_);
    if (after_) cudaEventDestroy(after_);
  }
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;
  /// After the launch.
  void done() {
    if (!active()) return;
    check(cudaEventRecord(after_, nullptr), "cudaEventRecord");
    check(cudaStreamWaitEvent(stream_, after_, 0), "cudaStreamWaitEvent on the caller's stream");
  }

 private:
  bool active() const { return stream_ != nullptr && stream_ != cudaStreamLegacy; }
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw RuntimeError(fmt::format("{} failed: {}", what, cudaGetErrorString(e)));
  }
  cudaStream_t stream_;
  cudaEvent_t before_ = nullptr;
  cudaEvent_t after_ = nullptr;
};
#else
class StreamOrder {
 public:
  explicit StreamOrder(attnsel_stream) {}
  void done() {}
};
#endif

template <class F>
void on_stream(const attnsel_kernel& k, attnsel_stream stream, F&& launch) {
  if (k.device_type != kDLCUDA) {
    launch();  // CPU kernels return when the work is done; there is no stream
    return;
  }
  StreamOrder order(stream);
  launch();
  order.done();
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

attnsel_status attnsel_kernel_create(const char* backend, const attnsel_layer_params* params, attnsel_kernel** out) {
  if (out == nullptr) return fail(ATTNSEL_STATUS_VALUE_ERROR, "out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    require(backend, "backend");
    require(params, "params");
    register_builtin_backends();
    const BackendMember member = AttentionBackendEnum.from_user_text(backend);
    const std::shared_ptr<const AttentionBackend> cls = member.get_attention_class();
    if (!cls->has_kernel()) throw NotImplementedError(cls->missing_kernel_reason());
    auto k = std::make_unique<attnsel_kernel>();
    k->backend = member.name();
    k->impl = cls->make_impl(layer_params(*params));
    if (dynamic_cast<const kernel::cuda::FlashAttnCuda*>(k->impl.get()) != nullptr) k->device_type = kDLCUDA;
    *out = k.release();
  });
}

void attnsel_kernel_destroy(attnsel_kernel* kernel) { delete kernel; }

int32_t attnsel_kernel_device_type(const attnsel_kernel* kernel) { return kernel ? kernel->device_type : kDLCPU; }

attnsel_status attnsel_kernel_plan(const attnsel_kernel* kernel, const attnsel_batch* batch, attnsel_step_plan** out) {
  if (out == nullptr) return fail(ATTNSEL_STATUS_VALUE_ERROR, "out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    require(kernel, "kernel");
    require(batch, "batch");
    require_struct(batch->struct_size, sizeof(attnsel_batch), "attnsel_batch");
    const attnsel_batch& b = *batch;
    if (b.num_seqs < 0) throw ValueError(fmt::format("num_seqs = {} is negative", b.num_seqs));
    if (b.max_blocks_per_seq < 0)
      throw ValueError(fmt::format("max_blocks_per_seq = {} is negative", b.max_blocks_per_seq));
    auto plan = std::make_unique<attnsel_step_plan>();
    const kernel::LayerParams& p = kernel->impl->params();
    plan->backend = kernel->backend;
    plan->num_heads = p.num_heads;
    plan->num_kv_heads = p.num_kv_heads;
    plan->head_size = p.head_size;
    const auto n = static_cast<std::uint32_t>(b.num_seqs);
    plan->query_start_loc = copy_array(b.query_start_loc, n + 1, "query_start_loc");
    plan->seq_lens = copy_array(b.seq_lens, n, "seq_lens");
    plan->block_table = copy_array(b.block_table, n * static_cast<std::uint32_t>(b.max_blocks_per_seq), "block_table");
    const std::int32_t num_tokens = plan->query_start_loc.back();
    if (num_tokens < 0) throw ValueError(fmt::format("query_start_loc[num_seqs] = {} is negative", num_tokens));
    plan->has_slot_mapping = b.slot_mapping != nullptr;
    if (plan->has_slot_mapping)
      plan->slot_mapping.assign(b.slot_mapping, b.slot_mapping + num_tokens);
    int max_q = 0, max_s = 0;
    for (std::uint32_t s = 0; s < n; ++s) {
      max_q = std::max(max_q, plan->query_start_loc[s + 1] - plan->query_start_loc[s]);
      max_s = std::max(max_s, plan->seq_lens[s]);
    }
    kernel::AttentionMetadata& md = plan->md;
    md.num_seqs = b.num_seqs;
    md.num_actual_tokens = num_tokens;
    md.query_start_loc = plan->query_start_loc;
    md.seq_lens = plan->seq_lens;
    md.block_table = plan->block_table;
    md.max_blocks_per_seq = b.max_blocks_per_seq;
    md.slot_mapping = plan->slot_mapping;
    md.max_query_len = max_q;
    md.max_seq_len = max_s;
    *out = plan.release();
  });
}

void attnsel_step_plan_destroy(attnsel_step_plan* plan) { delete plan; }

attnsel_status attnsel_kernel_write_kv_cache(const attnsel_kernel* kernel, const attnsel_step_plan* plan,
                                             const DLTensor* key, const DLTensor* value, const DLTensor* key_cache,
                                             const DLTensor* value_cache, attnsel_stream stream) {
  return guarded([&] {
    require(kernel, "kernel");
    require(plan, "plan");
    check_plan(*kernel, *plan);
    if (!plan->has_slot_mapping)
      throw ValueError("this step plan has no slot_mapping: give attnsel_batch.slot_mapping to write the KV cache");
    const TensorView k = view(key, "key"), v = view(value, "value");
    const KVCacheView cache{view(key_cache, "key_cache"), view(value_cache, "value_cache")};
    on_stream(*kernel, stream, [&] { kernel->impl->write_kv_cache(k, v, cache, plan->md); });
  });
}

attnsel_status attnsel_kernel_execute(const attnsel_kernel* kernel, const attnsel_step_plan* plan,
                                      const DLTensor* query, const DLTensor* key_cache, const DLTensor* value_cache,
                                      const DLTensor* output, attnsel_stream stream) {
  return guarded([&] {
    require(kernel, "kernel");
    require(plan, "plan");
    check_plan(*kernel, *plan);
    const TensorView q = view(query, "query"), o = view(output, "output");
    const KVCacheView cache{view(key_cache, "key_cache"), view(value_cache, "value_cache")};
    on_stream(*kernel, stream, [&] { kernel->impl->forward(q, cache, plan->md, o); });
  });
}

}  // extern "C"
