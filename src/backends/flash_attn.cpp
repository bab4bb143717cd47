// FLASH_ATTN's capabilities (vllm/v1/attention/backends/flash_attn.py).
#include "backends/flash_attn.hpp"

#include <algorithm>

#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

namespace {
constexpr int kFa4Hd256PageSize = 128;  // vLLM's FA4_HD256_PAGE_SIZE
}

std::optional<int> FlashAttentionBackend::fa4_hd256_block_size(const RuntimeEnv& env) const {
  const auto model_head = env.facts.get_int("model.head_size");
  if (model_head <= 0) return std::nullopt;
  const int head = static_cast<int>(model_head);
  FaVersionQuery q;
  q.head_size = head;
  q.head_size_v = head_size_v();
  q.supports_fa4_hd256 = true;
  if (uses_fa4_hd256_kernel(env, head, head_size_v()) && get_flash_attn_version(env, q) == 4) return kFa4Hd256PageSize;
  return std::nullopt;
}

BackendCapabilities FlashAttentionBackend::capabilities(const RuntimeEnv& env) const {
  BackendCapabilities c;
  c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::float16, CacheDType::bfloat16, CacheDType::fp8,
                       CacheDType::fp8_e4m3};
  c.kv_cache_dtype_rule = [&env, listed = c.kv_cache_dtypes](std::optional<CacheDType> d) {
    if (!d) return true;
    if (!contains(listed, *d)) return false;
    if (is_quantized_kv_cache(*d)) return flash_attn_supports_kv_cache_dtype(env, *d);
    return true;
  };
  c.forward_includes_kv_cache_update = false;
  const std::optional<int> pinned = fa4_hd256_block_size(env);
  c.kernel_block_sizes = pinned ? std::vector<KernelBlockSize>{*pinned} : std::vector<KernelBlockSize>{MultipleOf{16}};
  c.preferred_block_size_rule = [pinned, xpu = env.device.kind == PlatformKind::xpu](int d) -> std::optional<int> {
    if (pinned) return std::max(d, *pinned);
    if (xpu) return std::max(d, 64);
    return std::nullopt;
  };
  c.head_size_rule = [fa4 = is_fa_version_supported(env, 4)](int head_size) {
    if (head_size % 8 != 0) return false;
    if (head_size <= 256) return true;
    return fa4 && head_size <= 512;
  };
  c.sink = flash_attn_varlen_available(env) && flash_attn_supports_sinks(env);
  c.mm_prefix = is_fa_version_supported(env, 4);
  const std::optional<int> version = get_flash_attn_version(env);
  c.per_head_quant_scales = version && *version >= 3;
  c.sliding_window = true;
  c.non_causal = true;
  c.batch_invariance = true;
  c.dcp = true;
  c.attn_types = kAllAttnTypes;
  // XPU passes no capability and validates FA there (see docs/DECISIONS.md).
  c.compute_capability_rule = [](const std::optional<DeviceCapability>& cap) {
    return !cap || *cap >= DeviceCapability{8, 0};
  };
  c.combination_rule = [this, &env](const CombinationArgs& a) { return combination_reason(a, env); };
  return c;
}

FaVersionQuery FlashAttentionBackend::layer_query(const CombinationArgs& a) {
  FaVersionQuery q;
  q.head_size = a.head_size;
  q.has_sinks = a.has_sink;
  q.kv_cache_block_size = a.block_size;
  q.supports_fa4_hd256 = true;
  return q;
}

std::optional<std::string> FlashAttentionBackend::combination_reason(const CombinationArgs& a,
                                                                     const RuntimeEnv& env) const {
  if (a.has_sink && a.device_capability && *a.device_capability < DeviceCapability{9, 0})
    return "sink not supported on compute capability < 9.0";
  FaVersionQuery q = layer_query(a);
  q.head_size_v = a.head_size;
  q.mm_prefix = a.use_mm_prefix;
  if (a.kv_cache_dtype && is_quantized_kv_cache(*a.kv_cache_dtype) &&
      !flash_attn_supports_kv_cache_dtype(env, *a.kv_cache_dtype, q))
    return "FP8 KV cache requires FA3 on SM90 or FA4 on SM100";
  if (a.use_mm_prefix) {
    FaVersionQuery mm = layer_query(a);
    mm.mm_prefix = true;  // a layer that asks for mm-prefix belongs to a PrefixLM model
    if (get_flash_attn_version(env, mm) != 4)
      return "mm_prefix (PrefixLM bidirectional attention) requires FlashAttention v4, which does not resolve for "
             "this head_size";
  }
  return std::nullopt;
}

void append_flash_attn(ClassList& out) { out.push_back(std::make_shared<const FlashAttentionBackend>()); }

}  // namespace attnsel::backends
