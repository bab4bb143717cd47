#include "kernels/mla/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "attnsel/errors.hpp"
#include "kernels/tensor_checks.hpp"

namespace attnsel::kernel::mla {

namespace {


std::string_view device_name(DeviceKind d) { return d == DeviceKind::cpu ? "cpu" : "cuda"; }

bool is_activation(ScalarType t) { return t == ScalarType::f32 || t == ScalarType::f16 || t == ScalarType::bf16; }

}  // namespace

CacheFormat cache_format(const MlaLayerParams& p) {
  switch (p.kv_cache_dtype) {
    case CacheDType::auto_: return {p.dtype, false};
    case CacheDType::bfloat16:
    case CacheDType::float16: {
      const ScalarType named = p.kv_cache_dtype == CacheDType::bfloat16 ? ScalarType::bf16 : ScalarType::f16;
      if (named != p.dtype)
        fail(fmt::format("kv_cache_dtype '{}' stores {} but the layer's activation dtype is {}: the MLA kernels read a "
                         "cache of the activation dtype (use 'auto'), or fp8 / fp8_e4m3",
                         cache_dtype_name(p.kv_cache_dtype), to_string(named), to_string(p.dtype)));
      return {named, false};
    }
    case CacheDType::fp8:
    case CacheDType::fp8_e4m3: return {ScalarType::fp8_e4m3, true};
    default:
      fail(fmt::format("kv_cache_dtype '{}' is not supported by the MLA kernels; supported: auto, bfloat16, float16 "
                       "(the activation dtype), fp8, fp8_e4m3",
                       cache_dtype_name(p.kv_cache_dtype)));
  }
}

void validate_layer_params(const MlaLayerParams& p, const MlaKernelLimits& limits, DeviceKind device) {
  const MlaDims& d = p.dims;
  if (d.num_heads < 1 || d.num_heads > limits.max_heads)
    fail(fmt::format("num_heads = {}; this kernel computes 1 to {} query heads per rank", d.num_heads,
                     limits.max_heads));
  for (const auto& [value, name] : {std::pair{d.kv_lora_rank, "kv_lora_rank"},
                                    std::pair{d.qk_rope_head_dim, "qk_rope_head_dim"},
                                    std::pair{d.qk_nope_head_dim, "qk_nope_head_dim"},
                                    std::pair{d.v_head_dim, "v_head_dim"}})
    if (value < 1) fail(fmt::format("{} = {}; it must be at least 1", name, value));
  if (!is_activation(p.dtype))
    fail(fmt::format("dtype {} is not an activation dtype; supported: f32, f16, bf16", to_string(p.dtype)));
  if (!std::isfinite(p.scale) || p.scale <= 0.0f)
    fail(fmt::format("scale = {}; the softmax scale must be a positive finite number", p.scale));
  const CacheFormat format = cache_format(p);
  if (format.fp8 && (!std::isfinite(p.k_scale) || p.k_scale <= 0.0f))
    fail(fmt::format("k_scale = {}; an fp8 cache ('{}') needs a positive finite k_scale", p.k_scale,
                     cache_dtype_name(p.kv_cache_dtype)));
  const TensorView& w = p.kv_b_proj;
  if (w.data == nullptr) return;  // a layer that runs decode_latent only
  const std::int64_t rows = static_cast<std::int64_t>(d.num_heads) * (d.qk_nope_head_dim + d.v_head_dim);
  if (w.ndim != 2 || w.shape[0] != rows || w.shape[1] != d.kv_lora_rank)
    fail(fmt::format("kv_b_proj must be [num_heads · (qk_nope_head_dim + v_head_dim), kv_lora_rank] = [{}, {}], got {}",
                     rows, d.kv_lora_rank, w.describe()));
  if (w.dtype != p.dtype)
    fail(fmt::format("kv_b_proj dtype {} must be the activation dtype {}", to_string(w.dtype), to_string(p.dtype)));
  if (w.device != device)
    fail(fmt::format("kv_b_proj is on {} but this kernel runs on {}", device_name(w.device), device_name(device)));
  if (w.stride[1] != 1 || w.stride[0] < d.kv_lora_rank)
    fail(fmt::format("kv_b_proj rows must be contiguous and not overlap (strides [>= {}, 1]), got {}",
                     d.kv_lora_rank, w.describe()));
}

void require_deepseek_dims(const MlaDims& d, std::string_view kernel) {
  for (const auto& [value, want, name] : {std::tuple{d.kv_lora_rank, 512, "kv_lora_rank"},
                                          std::tuple{d.qk_rope_head_dim, 64, "qk_rope_head_dim"},
                                          std::tuple{d.qk_nope_head_dim, 128, "qk_nope_head_dim"},
                                          std::tuple{d.v_head_dim, 128, "v_head_dim"}})
    if (value != want)
      fail(fmt::format("{} = {} is not supported by {}: it computes DeepSeek's MLA dimensions (kv_lora_rank 512, "
                       "qk_rope_head_dim 64, so a 576-entry latent; qk_nope_head_dim 128, v_head_dim 128)",
                       name, value, kernel));
}

void validate_cache(const MlaLayerParams& p, const TensorView& cache, DeviceKind device) {
  const CacheFormat format = cache_format(p);
  const int latent = p.dims.latent_size();
  if (cache.ndim != 3)
    fail(fmt::format("cache must have 3 dimensions [num_blocks, block_size, {}], got {}", latent, cache.describe()));
  if (cache.shape[0] < 1 || cache.shape[1] < 1)
    fail(fmt::format("cache {} needs at least one block of at least one token", cache.describe()));
  if (cache.shape[2] != latent)
    fail(fmt::format("cache entries (dimension 2) must be kv_lora_rank + qk_rope_head_dim = {}, got {}", latent,
                     cache.describe()));
  const bool dtype_ok = cache.dtype == format.stored || (format.fp8 && cache.dtype == ScalarType::u8);
  if (!dtype_ok)
    fail(fmt::format("cache dtype {} does not match kv_cache_dtype '{}' with activation dtype {} (expected {}{})",
                     to_string(cache.dtype), cache_dtype_name(p.kv_cache_dtype), to_string(p.dtype),
                     to_string(format.stored), format.fp8 ? " or u8" : ""));
  if (cache.device != device)
    fail(fmt::format("cache is on {} but this kernel runs on {}", device_name(cache.device), device_name(device)));
  const std::int64_t* st = cache.stride;
  if (st[2] != 1 || st[1] < 0 || st[0] < 0)
    fail(fmt::format("cache must have unit stride over its entries and no negative stride, got {}", cache.describe()));
  if ((cache.shape[1] > 1 && st[1] < latent) || (cache.shape[0] > 1 && st[0] < cache.shape[1] * std::max<std::int64_t>(st[1], latent)))
    fail(fmt::format("cache rows overlap: token stride must be at least {} and block stride at least block_size × "
                     "token stride, got {}",
                     latent, cache.describe()));
}

void check_tensor(const TensorView& t, std::string_view name, std::initializer_list<std::int64_t> dims,
                  ScalarType dtype, const StepShape& plan) {
  const int rank = static_cast<int>(dims.size());
  std::string want = "[";
  int i = 0;
  for (std::int64_t d : dims) {
    want += fmt::format("{}{}{}", i == 0 ? ">= " : ", ", "", d);
    ++i;
  }
  want += "]";
  if (t.ndim != rank) fail(fmt::format("{} must be {} {}, got {}", name, to_string(dtype), want, t.describe()));
  i = 0;
  for (std::int64_t d : dims) {
    if (i == 0 ? t.shape[0] < d : t.shape[i] != d)
      fail(fmt::format("{} must be {} {} for the plan's batch, got {}", name, to_string(dtype), want, t.describe()));
    if (t.stride[i] < 0) fail(fmt::format("{} has a negative stride: {}", name, t.describe()));
    ++i;
  }
  if (t.dtype != dtype)
    fail(fmt::format("{} dtype {} must be {}: {}", name, to_string(t.dtype), to_string(dtype), t.describe()));
  if (t.device != plan.device || t.device_index != plan.device_index)
    fail(fmt::format("{} is on {}:{} but the plan was built for {}:{}", name, device_name(t.device), t.device_index,
                     device_name(plan.device), plan.device_index));
  if (t.shape[rank - 1] > 1 && t.stride[rank - 1] != 1)
    fail(fmt::format("{} must be contiguous in its last dimension (stride 1), got {}", name, t.describe()));
  if (t.numel() > 0 && t.data == nullptr) fail(fmt::format("{} has a null data pointer: {}", name, t.describe()));
}

void check_plan_group(const StepShape& plan, int num_heads, ScalarType dtype, bool batch_invariant) {
  if (plan.num_heads != num_heads || plan.dtype != dtype || plan.batch_invariant != batch_invariant)
    fail(fmt::format("the layer ({} heads, {}{}) is not in the plan's group ({} heads, {}{}): build one plan per "
                     "KV-cache group",
                     num_heads, to_string(dtype), batch_invariant ? ", batch-invariant" : "", plan.num_heads,
                     to_string(plan.dtype), plan.batch_invariant ? ", batch-invariant" : ""));
}

void require_slot_mapping(const StepShape& plan) {
  if (!plan.slot_mapping)
    fail("write_cache: the plan's batch came without a slot_mapping (AttentionMetadata::slot_mapping was empty), so "
         "there is nowhere to write");
}

void check_latent_write_inputs(const StepShape& plan, const MlaDims& d, ScalarType dtype, const TensorView& kv_c,
                               const TensorView& k_pe) {
  require_slot_mapping(plan);
  check_tensor(kv_c, "kv_c", {plan.num_actual_tokens, d.kv_lora_rank}, dtype, plan);
  check_tensor(k_pe, "k_pe", {plan.num_actual_tokens, d.qk_rope_head_dim}, dtype, plan);
}

void check_planned_cache(const TensorView& cache, const StepShape& s) {
  bool same = cache.ndim == 3 && cache.dtype == s.cache_dtype && cache.device == s.device &&
              cache.device_index == s.device_index;
  const std::int64_t shape[3] = {s.cache_shape[0], s.cache_shape[1], s.cache_shape[3]};
  const std::int64_t strides[3] = {s.key_strides[0], s.key_strides[1], s.key_strides[3]};
  for (int d = 0; same && d < 3; ++d) same = cache.shape[d] == shape[d] && cache.stride[d] == strides[d];
  if (!same)
    fail(fmt::format("cache {} on {}:{} differs from the plan's cache geometry {}[{}, {}, {}] strides [{}, {}, {}]: "
                     "every layer of a plan's group has the same cache shape, layout and dtype",
                     cache.describe(), device_name(cache.device), cache.device_index, to_string(s.cache_dtype),
                     shape[0], shape[1], shape[2], strides[0], strides[1], strides[2]));
  if (cache.data == nullptr) fail("cache has a null data pointer");
}

ByteRange byte_range(const TensorView& t) {
  std::int64_t last = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) return {};
    last += (t.shape[d] - 1) * t.stride[d];
  }
  const auto* begin = static_cast<const std::uint8_t*>(t.data);
  return {begin, begin + (last + 1) * static_cast<std::int64_t>(element_size(t.dtype))};
}

void check_no_overlap(const TensorView& output, std::string_view output_name, const TensorView& input,
                      std::string_view input_name) {
  check_distinct_elements(output, output_name);
  const ByteRange o = byte_range(output), i = byte_range(input);
  if (o.begin == nullptr || i.begin == nullptr) return;
  if (o.begin < i.end && i.begin < o.end)
    fail(fmt::format("{} {} overlaps {} {} in memory: the kernel writes {} while it reads {}", output_name,
                     output.describe(), input_name, input.describe(), output_name, input_name));
}

}  // namespace attnsel::kernel::mla
