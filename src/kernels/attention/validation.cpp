// Host-side checks of every kernel argument. Each check names the value, what it was
// compared with and the valid range, and runs before any kernel touches memory.
#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"
#include "kernels/attention/semantics.hpp"
#include "kernels/batch_layout.hpp"
#include "kernels/tensor_checks.hpp"

namespace attnsel::kernel {

namespace {


bool finite(float x) { return std::isfinite(x); }

void check_rank_and_last_stride(const TensorView& t, std::string_view name, int rank) {
  if (t.ndim != rank) fail(fmt::format("{} must have {} dimensions, got {}", name, rank, t.describe()));
  for (int d = 0; d < rank; ++d) {
    if (t.shape[d] < 0) fail(fmt::format("{} has a negative dimension: {}", name, t.describe()));
    if (t.stride[d] < 0) fail(fmt::format("{} has a negative stride: {}", name, t.describe()));
  }
  if (t.shape[rank - 1] > 1 && t.stride[rank - 1] != 1)
    fail(fmt::format("{} must be contiguous in its last dimension (stride 1), got {}", name, t.describe()));
  if (t.numel() > 0 && t.data == nullptr) fail(fmt::format("{} has a null data pointer: {}", name, t.describe()));
}

// A tensor the kernel writes must give every element its own memory, as PyTorch refuses
// writes into expanded or self-overlapping tensors.
void check_no_overlap(const TensorView& t, std::string_view name) { check_distinct_elements(t, name); }

void check_activation_dtype(const TensorView& t, std::string_view name) {
  if (!is_float_activation(t.dtype))
    fail(fmt::format("{} dtype {} is not supported; supported: f32, f16, bf16", name, to_string(t.dtype)));
}

void check_shape3(const TensorView& t, std::string_view name, std::int64_t min_tokens, int heads, int head_size,
                  std::string_view heads_name) {
  check_rank_and_last_stride(t, name, 3);
  if (t.shape[1] != heads)
    fail(fmt::format("{} has {} heads (dimension 1) but the layer has {} = {}: {}", name, t.shape[1], heads_name,
                     heads, t.describe()));
  if (t.shape[2] != head_size)
    fail(fmt::format("{} has head size {} (dimension 2) but the layer has head_size = {}: {}", name, t.shape[2],
                     head_size, t.describe()));
  if (t.shape[0] < min_tokens)
    fail(fmt::format("{} holds {} tokens but the batch has num_actual_tokens = {}: {}", name, t.shape[0], min_tokens,
                     t.describe()));
}

bool cache_dtype_matches(ScalarType actual, const CacheEncoding& enc) {
  if (actual == enc.stored) return true;
  return enc.quantized && actual == ScalarType::u8;  // fp8 caches are often allocated as uint8
}

void check_cache(const LayerParams& p, const KVCacheView& cache, ScalarType model_dtype) {
  const CacheEncoding enc = cache_encoding(p.kv_cache_dtype, model_dtype);
  for (const auto* t : {&cache.key, &cache.value}) {
    const std::string_view name = t == &cache.key ? "key_cache" : "value_cache";
    check_rank_and_last_stride(*t, name, 4);
    check_no_overlap(*t, name);
    if (!cache_dtype_matches(t->dtype, enc))
      fail(fmt::format("{} dtype {} does not match kv_cache_dtype '{}' (expected {}{}): {}", name, to_string(t->dtype),
                       cache_dtype_name(p.kv_cache_dtype), to_string(enc.stored), enc.quantized ? " or u8" : "", t->describe()));
    if (t->shape[2] != p.num_kv_heads)
      fail(fmt::format("{} has {} KV heads (dimension 2, layout [num_blocks, block_size, num_kv_heads, head_size]) "
                       "but the layer has num_kv_heads = {}: {}",
                       name, t->shape[2], p.num_kv_heads, t->describe()));
    if (t->shape[3] != p.head_size)
      fail(fmt::format("{} has head size {} (dimension 3) but the layer has head_size = {}: {}", name, t->shape[3],
                       p.head_size, t->describe()));
    if (t->shape[1] < 1) fail(fmt::format("{} has block size {}; it must be at least 1: {}", name, t->shape[1],
                                          t->describe()));
    if (t->device != cache.key.device)
      fail("key_cache and value_cache must be on the same device");
  }
  for (int d = 0; d < 2; ++d)
    if (cache.key.shape[d] != cache.value.shape[d])
      fail(fmt::format("key_cache and value_cache shapes differ: {} vs {}", cache.key.describe(),
                       cache.value.describe()));
  if (cache.key.dtype != cache.value.dtype)
    fail(fmt::format("key_cache and value_cache dtypes differ: {} vs {}", to_string(cache.key.dtype),
                     to_string(cache.value.dtype)));
}

void check_sequences(const LayerParams& p, const KVCacheView& cache, const AttentionMetadata& md) {
  check_request_arrays(md);
  const auto n = static_cast<std::size_t>(md.num_seqs);
  const std::int64_t block_size = cache.key.shape[1];
  const std::int64_t num_blocks = cache.key.shape[0];
  const bool self_attention = p.attn_type != AttentionType::encoder_decoder;
  int max_q = 0, max_s = 0;
  for (std::size_t s = 0; s < n; ++s) {
    const std::int64_t seq_len = md.seq_lens[s];
    const std::int64_t q_len = md.query_start_loc[s + 1] - md.query_start_loc[s];
    if (seq_len < 0) fail(fmt::format("seq_lens[{}] = {} is negative", s, seq_len));
    if (self_attention && q_len > seq_len)
      fail(fmt::format("sequence {} has {} new tokens but seq_lens[{}] = {}; a sequence's context includes its new "
                       "tokens, so seq_len >= query_len",
                       s, q_len, s, seq_len));
    check_request_blocks(md, s, num_blocks, block_size, "KV cache");
    max_q = std::max<int>(max_q, static_cast<int>(q_len));
    max_s = std::max<int>(max_s, static_cast<int>(seq_len));
  }
  check_max_lengths(md, max_q, max_s);
}

void check_slots(const KVCacheView& cache, const AttentionMetadata& md) {
  const auto tokens = static_cast<std::size_t>(md.num_actual_tokens);
  if (md.slot_mapping.size() < tokens)
    fail(fmt::format("slot_mapping has {} entries but num_actual_tokens = {}", md.slot_mapping.size(), tokens));
  const std::int64_t num_slots = cache.key.shape[0] * cache.key.shape[1];
  for (std::size_t i = 0; i < tokens; ++i) {
    const std::int64_t slot = md.slot_mapping[i];
    if (slot != -1 && (slot < 0 || slot >= num_slots))
      fail(fmt::format("slot_mapping[{}] = {} is outside the KV cache: valid slots are [0, {}) (num_blocks x "
                       "block_size = {} x {}), or -1 to skip",
                       i, slot, num_slots, cache.key.shape[0], cache.key.shape[1]));
  }
}

}  // namespace

CacheEncoding cache_encoding(CacheDType kv_cache_dtype, ScalarType model_dtype) {
  switch (kv_cache_dtype) {
    case CacheDType::auto_: return {model_dtype, false};
    case CacheDType::float16: return {ScalarType::f16, false};
    case CacheDType::bfloat16: return {ScalarType::bf16, false};
    case CacheDType::fp8:
    case CacheDType::fp8_e4m3: return {ScalarType::fp8_e4m3, true};
    case CacheDType::fp8_e5m2: return {ScalarType::fp8_e5m2, true};
    default: break;
  }
  fail(fmt::format("kv_cache_dtype '{}' is not supported by the kernels; supported: auto, float16, bfloat16, fp8, "
                   "fp8_e4m3, fp8_e5m2",
                   cache_dtype_name(kv_cache_dtype)));
}

void validate_layer_params(const LayerParams& p) {
  if (p.num_heads < 1) fail(fmt::format("num_heads = {}; it must be at least 1", p.num_heads));
  if (p.num_kv_heads < 1) fail(fmt::format("num_kv_heads = {}; it must be at least 1", p.num_kv_heads));
  if (p.num_heads % p.num_kv_heads != 0)
    fail(fmt::format("num_heads = {} is not a multiple of num_kv_heads = {}", p.num_heads, p.num_kv_heads));
  if (p.head_size < 1) fail(fmt::format("head_size = {}; it must be at least 1", p.head_size));
  if (!finite(p.scale) || p.scale <= 0.0f) fail(fmt::format("scale = {}; it must be a positive finite number", p.scale));
  if (p.sliding_window && *p.sliding_window < 1)
    fail(fmt::format("sliding_window = {}; it must be at least 1 (or unset for full attention)", *p.sliding_window));
  if (!finite(p.logits_soft_cap) || p.logits_soft_cap < 0.0f)
    fail(fmt::format("logits_soft_cap = {}; it must be 0 (off) or a positive finite number", p.logits_soft_cap));
  if (!p.alibi_slopes.empty() && p.alibi_slopes.size() != static_cast<std::size_t>(p.num_heads))
    fail(fmt::format("alibi_slopes has {} entries; it must be empty or have num_heads = {}", p.alibi_slopes.size(),
                     p.num_heads));
  for (float s : p.alibi_slopes)
    if (!finite(s)) fail(fmt::format("alibi_slopes contains {}; slopes must be finite", s));
  if (!p.sinks.empty() && p.sinks.size() != static_cast<std::size_t>(p.num_heads))
    fail(fmt::format("sinks has {} entries; it must be empty or have num_heads = {}", p.sinks.size(), p.num_heads));
  for (float s : p.sinks)
    if (!finite(s)) fail(fmt::format("sinks contains {}; sink logits must be finite", s));
  const CacheEncoding enc = cache_encoding(p.kv_cache_dtype, ScalarType::f32);
  if (enc.quantized && (!finite(p.k_scale) || p.k_scale <= 0.0f || !finite(p.v_scale) || p.v_scale <= 0.0f))
    fail(fmt::format("k_scale = {} and v_scale = {}; fp8 caches need positive finite scales", p.k_scale, p.v_scale));
  // Per-head scales are checked whatever the cache: a wrong length is a wrong layer either way.
  for (const auto& [scales, name] : {std::pair{&p.k_scales, "k_scales"}, std::pair{&p.v_scales, "v_scales"}}) {
    if (scales->empty()) continue;
    if (scales->size() != static_cast<std::size_t>(p.num_kv_heads))
      fail(fmt::format("{} has {} entries; it must be empty (one scale per layer) or have one per KV head: "
                       "num_kv_heads = {}",
                       name, scales->size(), p.num_kv_heads));
    for (std::size_t h = 0; h < scales->size(); ++h)
      if (!finite((*scales)[h]) || (*scales)[h] <= 0.0f)
        fail(fmt::format("{}[{}] = {}; per-head quantization scales must be positive finite numbers", name, h,
                         (*scales)[h]));
  }
  if (p.attn_type == AttentionType::encoder_decoder) {
    // Cross attention has no common position axis between decoder queries and encoder keys.
    if (p.sliding_window)
      fail("sliding_window is not defined for encoder_decoder (cross) attention: queries and keys come from "
           "different sequences");
    if (!p.alibi_slopes.empty())
      fail("alibi_slopes are not defined for encoder_decoder (cross) attention: queries and keys come from different "
           "sequences");
  }
}

void validate_forward_args(const LayerParams& p, const TensorView& query, const KVCacheView& cache,
                           const AttentionMetadata& md, const TensorView& output) {
  validate_layer_params(p);
  check_query_layout(md);
  check_activation_dtype(query, "query");
  check_shape3(query, "query", md.num_actual_tokens, p.num_heads, p.head_size, "num_heads");
  check_activation_dtype(output, "output");
  check_shape3(output, "output", md.num_actual_tokens, p.num_heads, p.head_size, "num_heads");
  check_no_overlap(output, "output");
  if (output.dtype != query.dtype)
    fail(fmt::format("output dtype {} must equal the query dtype {}", to_string(output.dtype), to_string(query.dtype)));
  if (query.device != cache.key.device || output.device != cache.key.device)
    fail("query, output and the KV cache must be on the same device");
  check_cache(p, cache, query.dtype);
  check_sequences(p, cache, md);
}

void validate_cache_write_args(const LayerParams& p, const TensorView& key, const TensorView& value,
                               const KVCacheView& cache, const AttentionMetadata& md) {
  validate_layer_params(p);
  if (md.num_actual_tokens < 0) fail(fmt::format("num_actual_tokens = {} is negative", md.num_actual_tokens));
  check_activation_dtype(key, "key");
  check_activation_dtype(value, "value");
  if (key.dtype != value.dtype)
    fail(fmt::format("key dtype {} and value dtype {} differ", to_string(key.dtype), to_string(value.dtype)));
  check_shape3(key, "key", md.num_actual_tokens, p.num_kv_heads, p.head_size, "num_kv_heads");
  check_shape3(value, "value", md.num_actual_tokens, p.num_kv_heads, p.head_size, "num_kv_heads");
  if (key.device != cache.key.device || value.device != cache.key.device)
    fail("key, value and the KV cache must be on the same device");
  check_cache(p, cache, key.dtype);
  check_slots(cache, md);
}

namespace {

// A layer's tensor against what the plan was built for: rank, sizes, dtype, device.
void check_planned_activation(const TensorView& t, std::string_view name, const StepShape& s, int heads) {
  if (t.ndim != 3)
    fail(fmt::format("{} must have 3 dimensions [tokens, heads, head_size], got {}", name, t.describe()));
  if (t.shape[0] < s.num_actual_tokens || t.shape[1] != heads || t.shape[2] != s.head_size)
    fail(fmt::format("{} is {} but the plan's batch needs at least [{}, {}, {}]", name, t.describe(),
                     s.num_actual_tokens, heads, s.head_size));
  if (t.dtype != s.dtype)
    fail(fmt::format("{} dtype {} differs from the plan's dtype {}", name, to_string(t.dtype), to_string(s.dtype)));
  if (t.device != s.device || t.device_index != s.device_index)
    fail(fmt::format("{} is on {}:{} but the plan was built for {}:{}", name, t.device == DeviceKind::cpu ? "cpu" : "cuda",
                     t.device_index, s.device == DeviceKind::cpu ? "cpu" : "cuda", s.device_index));
  if (t.shape[2] > 1 && t.stride[2] != 1)
    fail(fmt::format("{} must be contiguous in its last dimension (stride 1), got {}", name, t.describe()));
  if (t.stride[0] < 0 || t.stride[1] < 0) fail(fmt::format("{} has a negative stride: {}", name, t.describe()));
  if (t.data == nullptr && s.num_actual_tokens > 0) fail(fmt::format("{} has a null data pointer", name));
}

void check_planned_cache(const KVCacheView& cache, const StepShape& s) {
  for (const auto* t : {&cache.key, &cache.value}) {
    const bool is_key = t == &cache.key;
    const std::string_view name = is_key ? "key_cache" : "value_cache";
    const std::int64_t* strides = is_key ? s.key_strides : s.value_strides;
    bool same = t->ndim == 4 && t->dtype == s.cache_dtype && t->device == s.device && t->device_index == s.device_index;
    for (int d = 0; same && d < 4; ++d) same = t->shape[d] == s.cache_shape[d] && t->stride[d] == strides[d];
    if (!same)
      fail(fmt::format("{} {} on {}:{} differs from the plan's cache geometry {}[{}, {}, {}, {}] strides [{}, {}, {}, "
                       "{}]: every layer of a plan's group has the same cache shape, layout and dtype",
                       name, t->describe(), t->device == DeviceKind::cpu ? "cpu" : "cuda", t->device_index,
                       to_string(s.cache_dtype), s.cache_shape[0], s.cache_shape[1], s.cache_shape[2], s.cache_shape[3],
                       strides[0], strides[1], strides[2], strides[3]));
    if (t->data == nullptr) fail(fmt::format("{} has a null data pointer", name));
  }
}

void check_planned_layer(const LayerParams& p, const StepShape& s) {
  const MaskRule rule = MaskRule::from(p);
  if (p.num_heads != s.num_heads || p.num_kv_heads != s.num_kv_heads || p.head_size != s.head_size ||
      rule.window != s.window || rule.causal != s.causal || p.batch_invariant != s.batch_invariant)
    fail(fmt::format("the layer (heads {}/{}, head_size {}, window {}, {}{}) is not in the plan's group (heads {}/{}, "
                     "head_size {}, window {}, {}{}): build one plan per KV-cache group",
                     p.num_heads, p.num_kv_heads, p.head_size, rule.window, rule.causal ? "causal" : "non-causal",
                     p.batch_invariant ? ", batch-invariant" : "", s.num_heads, s.num_kv_heads, s.head_size, s.window,
                     s.causal ? "causal" : "non-causal", s.batch_invariant ? ", batch-invariant" : ""));
}

}  // namespace

void validate_plan_args(const LayerParams& p, const KVCacheView& cache, ScalarType dtype, const AttentionMetadata& md) {
  validate_layer_params(p);
  check_query_layout(md);
  if (!is_float_activation(dtype))
    fail(fmt::format("activation dtype {} is not supported; supported: f32, f16, bf16", to_string(dtype)));
  check_cache(p, cache, dtype);
  check_sequences(p, cache, md);
  if (!md.slot_mapping.empty()) check_slots(cache, md);
}

StepShape step_shape(const LayerParams& p, const KVCacheView& cache, ScalarType dtype, const AttentionMetadata& md) {
  StepShape s;
  s.num_seqs = md.num_seqs;
  s.num_actual_tokens = md.num_actual_tokens;
  s.max_blocks_per_seq = md.max_blocks_per_seq;
  s.slot_mapping = md.slot_mapping.size() >= static_cast<std::size_t>(md.num_actual_tokens) &&
                   (md.num_actual_tokens == 0 || !md.slot_mapping.empty());
  s.dtype = dtype;
  s.device = cache.key.device;
  s.device_index = cache.key.device_index;
  s.num_heads = p.num_heads;
  s.num_kv_heads = p.num_kv_heads;
  s.head_size = p.head_size;
  s.cache_dtype = cache.key.dtype;
  for (int d = 0; d < 4; ++d) {
    s.cache_shape[d] = cache.key.shape[d];
    s.key_strides[d] = cache.key.stride[d];
    s.value_strides[d] = cache.value.stride[d];
  }
  const MaskRule rule = MaskRule::from(p);
  s.window = rule.window;
  s.causal = rule.causal;
  s.batch_invariant = p.batch_invariant;
  return s;
}

void validate_execute_args(const LayerParams& p, const StepShape& s, const TensorView& query, const KVCacheView& cache,
                           const TensorView& output, const TensorView* lse) {
  check_planned_layer(p, s);
  check_planned_activation(query, "query", s, s.num_heads);
  check_planned_activation(output, "output", s, s.num_heads);
  check_no_overlap(output, "output");
  check_planned_cache(cache, s);
  if (lse) {
    if (lse->ndim != 2 || lse->dtype != ScalarType::f32 || lse->shape[0] < s.num_actual_tokens ||
        lse->shape[1] != s.num_heads || (lse->shape[1] > 1 && lse->stride[1] != 1))
      fail(fmt::format("lse must be f32 [tokens >= {}, num_heads = {}] with unit stride over heads, got {}",
                       s.num_actual_tokens, s.num_heads, lse->describe()));
    if (lse->device != s.device || lse->device_index != s.device_index)
      fail("lse must be on the plan's device");
    if (lse->data == nullptr && s.num_actual_tokens > 0) fail("lse has a null data pointer");
    check_no_overlap(*lse, "lse");
  }
}

void validate_plan_cache_write_args(const LayerParams& p, const StepShape& s, const TensorView& key,
                                    const TensorView& value, const KVCacheView& cache) {
  check_planned_layer(p, s);
  if (!s.slot_mapping)
    fail("write_kv_cache: the plan's batch came without a slot_mapping (AttentionMetadata::slot_mapping was empty)");
  check_planned_activation(key, "key", s, s.num_kv_heads);
  check_planned_activation(value, "value", s, s.num_kv_heads);
  check_planned_cache(cache, s);
}

void validate_execute_append_args(const LayerParams& p, const StepShape& s, const TensorView& query,
                                  const NewKeysValues& new_kv, const KVCacheView& cache, const TensorView& output,
                                  const TensorView* lse) {
  validate_execute_args(p, s, query, cache, output, lse);
  if (!s.slot_mapping)
    fail("execute with new keys and values: the plan's batch came without a slot_mapping "
         "(AttentionMetadata::slot_mapping was empty), so there is nowhere to write them");
  check_planned_activation(new_kv.key, "new_kv.key", s, s.num_kv_heads);
  check_planned_activation(new_kv.value, "new_kv.value", s, s.num_kv_heads);
}

}  // namespace attnsel::kernel
