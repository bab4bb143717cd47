#include "kernels/sparse_mla/validation.hpp"

#include <fmt/format.h>

#include <string>

#include "attnsel/errors.hpp"
#include "kernels/mla/step_plan.hpp"
#include "kernels/mla/validation.hpp"
#include "kernels/sparse_mla/formats.hpp"
#include "kernels/tensor_checks.hpp"

namespace attnsel::kernel::sparse_mla {

namespace {


std::string_view device_name(DeviceKind d) { return d == DeviceKind::cpu ? "cpu" : "cuda"; }

bool is_activation(ScalarType t) { return t == ScalarType::f32 || t == ScalarType::f16 || t == ScalarType::bf16; }

// A paged cache [num_blocks, block_size, entry] of `dtype` on `device`, named `name`.
void check_paged(const TensorView& cache, std::string_view name, ScalarType dtype, std::int64_t entry,
                 DeviceKind device, std::string_view entry_what) {
  if (cache.ndim != 3)
    fail(fmt::format("{} must have 3 dimensions [num_blocks, block_size, {}], got {}", name, entry, cache.describe()));
  if (cache.shape[0] < 1 || cache.shape[1] < 1)
    fail(fmt::format("{} {} needs at least one block of at least one token", name, cache.describe()));
  if (cache.shape[2] != entry)
    fail(fmt::format("{} entries (dimension 2) must be {} = {}, got {}", name, entry_what, entry, cache.describe()));
  if (cache.dtype != dtype)
    fail(fmt::format("{} dtype {} must be {}: {}", name, to_string(cache.dtype), to_string(dtype), cache.describe()));
  if (cache.device != device)
    fail(fmt::format("{} is on {} but this kernel runs on {}", name, device_name(cache.device), device_name(device)));
  if (cache.stride[2] != 1 || cache.stride[1] < 0 || cache.stride[0] < 0)
    fail(fmt::format("{} must have unit stride over its entries and no negative stride, got {}", name,
                     cache.describe()));
}

}  // namespace

LatentFormat latent_format(const SparseMlaLayerParams& p) {
  switch (p.kv_cache_dtype) {
    case CacheDType::auto_: return {p.dtype, false, 576};
    case CacheDType::bfloat16:
    case CacheDType::float16: {
      const ScalarType named = p.kv_cache_dtype == CacheDType::bfloat16 ? ScalarType::bf16 : ScalarType::f16;
      if (named != p.dtype)
        fail(fmt::format("kv_cache_dtype '{}' stores {} but the layer's activation dtype is {}: the sparse MLA kernels "
                         "read a cache of the activation dtype (use 'auto'), or fp8_ds_mla",
                         cache_dtype_name(p.kv_cache_dtype), to_string(named), to_string(p.dtype)));
      return {named, false, 576};
    }
    case CacheDType::fp8_ds_mla:
      if (p.dtype != ScalarType::bf16)
        fail(fmt::format("kv_cache_dtype 'fp8_ds_mla' holds each token's rope key as bf16 and is read as bf16 (as "
                         "FlashMLA reads it): it needs a bf16 layer, not {}",
                         to_string(p.dtype)));
      return {ScalarType::u8, true, kDsMlaTokenBytes};
    default:
      fail(fmt::format("kv_cache_dtype '{}' is not supported by the sparse MLA kernels; supported: auto, bfloat16, "
                       "float16 (the activation dtype), fp8_ds_mla",
                       cache_dtype_name(p.kv_cache_dtype)));
  }
}

MlaLayerParams mla_params(const SparseMlaLayerParams& p) {
  MlaLayerParams m;
  m.dims = p.dims;
  m.dtype = p.dtype;
  m.scale = p.scale;
  m.kv_cache_dtype = CacheDType::auto_;
  m.batch_invariant = p.batch_invariant;
  m.kv_b_proj = p.kv_b_proj;
  return m;
}

void validate_sparse_layer(const SparseMlaLayerParams& p, const SparseMlaKernelLimits& limits, DeviceKind device,
                           std::string_view kernel) {
  MlaKernelLimits mla_limits;
  mla_limits.max_heads = limits.max_heads;
  mla::validate_layer_params(mla_params(p), mla_limits, device);
  mla::require_deepseek_dims(p.dims, kernel);
  (void)latent_format(p);
  if (p.topk < 1 || p.topk > limits.max_topk)
    fail(fmt::format("topk = {}; the index rows of {} hold 1 to {} entries", p.topk, kernel, limits.max_topk));
}

void validate_latent_cache(const SparseMlaLayerParams& p, const TensorView& cache, DeviceKind device) {
  const LatentFormat f = latent_format(p);
  check_paged(cache, "cache", f.stored, f.entry, device,
              f.ds_mla ? "the bytes of an fp8_ds_mla token" : "kv_lora_rank + qk_rope_head_dim");
  const std::int64_t* st = cache.stride;
  if ((cache.shape[1] > 1 || cache.shape[0] > 1) && st[1] < f.entry)
    fail(fmt::format("cache rows overlap: the token stride must be at least {}, got {}", f.entry, cache.describe()));
  if (cache.shape[0] > 1 && st[0] != cache.shape[1] * st[1])
    fail(fmt::format("cache blocks must be packed (block stride = block_size × token stride = {}), so that the "
                     "physical row block · block_size + offset addresses a token; got {}",
                     cache.shape[1] * st[1], cache.describe()));
}

void validate_indexer_layer(const IndexerLayerParams& p, const IndexerKernelLimits& limits) {
  if (p.num_heads < 1 || p.num_heads > limits.max_heads)
    fail(fmt::format("num_heads = {}; the indexer kernel computes 1 to {} heads", p.num_heads, limits.max_heads));
  if (p.head_dim != 128)
    fail(fmt::format("head_dim = {}; the indexer kernel quantises each key and query head as one block of 128 "
                     "values (vLLM's quant_block_size): index_head_dim must be 128",
                     p.head_dim));
  if (p.topk < 1 || p.topk > limits.max_topk)
    fail(fmt::format("topk = {}; the indexer's index rows hold 1 to {} entries", p.topk, limits.max_topk));
  if (!is_activation(p.dtype))
    fail(fmt::format("dtype {} is not an activation dtype; supported: f32, f16, bf16", to_string(p.dtype)));
}

void check_decode_query_len(std::string_view option, int value, std::string_view kernel, int max) {
  if (value < 1 || value > max)
    fail(fmt::format("{} = {}; {} takes 1 to {} query tokens per decode request", option, value, kernel, max));
}

void check_indexer_plan_options(const IndexerPlanOptions& options, const IndexerKernelLimits& limits,
                                std::string_view kernel) {
  check_decode_query_len("IndexerPlanOptions::decode_query_len", options.decode_query_len, kernel,
                         limits.max_decode_query_len);
  if (options.logits_bytes < 0)
    fail(fmt::format("IndexerPlanOptions::logits_bytes = {} is negative (0 = the kernel's default)",
                     options.logits_bytes));
}

void validate_key_cache(const IndexerLayerParams& p, const TensorView& key_cache, DeviceKind device) {
  const int token = indexer_token_bytes(p.head_dim);
  check_paged(key_cache, "key_cache", ScalarType::u8, token, device, "head_dim values + a 4-byte scale");
  const std::int64_t* st = key_cache.stride;
  if (key_cache.shape[1] > 1 && st[1] != token)
    fail(fmt::format("key_cache blocks must be contiguous (token stride {}: a block holds its tokens' values, then "
                     "their scales), got {}",
                     token, key_cache.describe()));
  if (key_cache.shape[0] > 1 && st[0] < key_cache.shape[1] * token)
    fail(fmt::format("key_cache blocks overlap: the block stride must be at least block_size × {} = {}, got {}", token,
                     key_cache.shape[1] * token, key_cache.describe()));
}

StepShape step_shape(const mla::MlaBatch& batch, ScalarType dtype, int num_heads, const TensorView& cache,
                     bool batch_invariant) {
  return mla::row_cache_step_shape(batch, dtype, num_heads, cache, false, batch_invariant);
}

void check_planned_key_cache(const IndexerLayerParams& p, const TensorView& key_cache, const StepShape& plan,
                             DeviceKind device) {
  validate_key_cache(p, key_cache, device);
  try {
    mla::check_planned_cache(key_cache, plan);
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("key_cache: {}", e.what()));
  }
}

void check_indexer_inputs(const IndexerLayerParams& p, const TensorView& q, const TensorView& weights,
                          const StepShape& plan) {
  const int T = plan.num_actual_tokens;
  mla::check_tensor(q, "q", {T, p.num_heads, p.head_dim}, p.dtype, plan);
  const ScalarType weights_dtype = weights.dtype == ScalarType::f32 ? ScalarType::f32 : p.dtype;
  mla::check_tensor(weights, "weights", {T, p.num_heads}, weights_dtype, plan);
}

TensorView planned_key_cache_geometry(const StepShape& shape, DeviceKind device) {
  return mla::planned_cache_geometry(shape, device);
}

}  // namespace attnsel::kernel::sparse_mla
