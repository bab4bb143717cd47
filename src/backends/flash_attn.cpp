// FLASH_ATTN's capabilities (vllm/v1/attention/backends/flash_attn.py).
#include "backends/flash_attn.hpp"

#include <algorithm>

#include "backends/common.hpp"
#include "backends/families.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

namespace {
constexpr int kFa4Hd256PageSize = 128;  // vLLM's FA4_HD256_PAGE_SIZE
}

std::vector<DType> FlashAttentionBackend::supported_dtypes(const RuntimeEnv&) const { return kHalfDTypes; }

std::vector<std::string> FlashAttentionBackend::supported_kv_cache_dtypes(const RuntimeEnv&) const {
  return {"auto", "float16", "bfloat16", "fp8", "fp8_e4m3"};
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

std::vector<KernelBlockSize> FlashAttentionBackend::get_supported_kernel_block_sizes(const RuntimeEnv& env) const {
  if (auto pinned = fa4_hd256_block_size(env)) return {*pinned};
  return {MultipleOf{16}};
}

int FlashAttentionBackend::get_preferred_block_size(int default_block_size, const RuntimeEnv& env) const {
  if (auto pinned = fa4_hd256_block_size(env)) return std::max(default_block_size, *pinned);
  if (env.device.kind == PlatformKind::xpu) return std::max(default_block_size, 64);
  return AttentionBackend::get_preferred_block_size(default_block_size, env);
}

bool FlashAttentionBackend::supports_kv_cache_dtype(const std::optional<std::string>& d, const RuntimeEnv& env) const {
  if (!d) return true;
  if (!contains(supported_kv_cache_dtypes(env), *d)) return false;
  if (is_quantized_kv_cache(*d)) return flash_attn_supports_kv_cache_dtype(env, *d);
  return true;
}

bool FlashAttentionBackend::supports_head_size(int head_size, const RuntimeEnv& env) const {
  if (head_size % 8 != 0) return false;
  if (head_size <= 256) return true;
  return is_fa_version_supported(env, 4) && head_size <= 512;
}

bool FlashAttentionBackend::supports_sink(const RuntimeEnv& env) const {
  return flash_attn_varlen_available(env) && flash_attn_supports_sinks(env);
}

bool FlashAttentionBackend::supports_mm_prefix(const RuntimeEnv& env) const { return is_fa_version_supported(env, 4); }

bool FlashAttentionBackend::supports_per_head_quant_scales(const RuntimeEnv& env) const {
  const std::optional<int> v = get_flash_attn_version(env);
  return v && *v >= 3;
}

bool FlashAttentionBackend::supports_compute_capability(const std::optional<DeviceCapability>& cap,
                                                        const RuntimeEnv&) const {
  // XPU passes no capability and validates FA there (see docs/DECISIONS.md).
  return !cap || *cap >= DeviceCapability{8, 0};
}

std::optional<std::string> FlashAttentionBackend::supports_combination(const CombinationArgs& a,
                                                                       const RuntimeEnv& env) const {
  if (a.has_sink && a.device_capability && *a.device_capability < DeviceCapability{9, 0})
    return "sink not supported on compute capability < 9.0";
  FaVersionQuery q;
  q.head_size = a.head_size;
  q.head_size_v = a.head_size;
  q.has_sinks = a.has_sink;
  q.kv_cache_block_size = a.block_size;
  q.supports_fa4_hd256 = true;
  q.mm_prefix = a.use_mm_prefix;
  if (a.kv_cache_dtype && is_quantized_kv_cache(*a.kv_cache_dtype) &&
      !flash_attn_supports_kv_cache_dtype(env, *a.kv_cache_dtype, q))
    return "FP8 KV cache requires FA3 on SM90 or FA4 on SM100";
  if (a.use_mm_prefix) {
    FaVersionQuery mm;
    mm.head_size = a.head_size;
    mm.has_sinks = a.has_sink;
    mm.kv_cache_block_size = a.block_size;
    mm.supports_fa4_hd256 = true;
    mm.mm_prefix = true;  // a layer that asks for mm-prefix belongs to a PrefixLM model
    if (get_flash_attn_version(env, mm) != 4)
      return "mm_prefix (PrefixLM bidirectional attention) requires FlashAttention v4, which does not resolve for "
             "this head_size";
  }
  return std::nullopt;
}

}  // namespace attnsel::backends

namespace attnsel::backends {
void append_flash_attn_classes(ClassList& out) { out.push_back(std::make_shared<const FlashAttentionBackend>()); }
}  // namespace attnsel::backends
