#include "attnsel/backend.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"

namespace attnsel {

std::string AttentionBackend::missing_kernel_reason() const {
  return fmt::format("{} has no kernel implementation in this build", get_name());
}

std::vector<std::string> AttentionBackend::kernel_gaps(const AttentionSelectorConfig&, const RuntimeEnv&) const {
  return {};
}

std::unique_ptr<kernel::AttentionImpl> AttentionBackend::make_impl(const kernel::LayerParams&) const {
  throw NotImplementedError(missing_kernel_reason());
}

std::vector<DType> AttentionBackend::supported_dtypes(const RuntimeEnv&) const {
  return {DType::float16, DType::bfloat16};
}

std::vector<std::string> AttentionBackend::supported_kv_cache_dtypes(const RuntimeEnv&) const {
  return {"auto", "float16", "bfloat16"};
}

std::vector<KernelBlockSize> AttentionBackend::get_supported_kernel_block_sizes(const RuntimeEnv&) const {
  return {MultipleOf{1}};
}

bool AttentionBackend::supports_dtype(DType d, const RuntimeEnv& env) const {
  const auto list = supported_dtypes(env);
  return std::find(list.begin(), list.end(), d) != list.end();
}

bool AttentionBackend::supports_kv_cache_dtype(const std::optional<std::string>& d, const RuntimeEnv& env) const {
  if (!d) return true;
  const auto list = supported_kv_cache_dtypes(env);
  return list.empty() || std::find(list.begin(), list.end(), *d) != list.end();
}

bool AttentionBackend::supports_block_size(std::optional<int> block_size, const RuntimeEnv& env) const {
  if (!block_size) return true;
  const auto list = get_supported_kernel_block_sizes(env);
  if (list.empty()) return true;
  return std::any_of(list.begin(), list.end(), [&](const KernelBlockSize& s) {
    const int base = block_base(s);
    return base > 0 && *block_size % base == 0;
  });
}

int AttentionBackend::get_preferred_block_size(int default_block_size, const RuntimeEnv& env) const {
  const auto list = get_supported_kernel_block_sizes(env);
  if (list.empty() || supports_block_size(default_block_size, env)) return default_block_size;
  int best = block_base(list.front());
  for (const KernelBlockSize& s : list) best = std::min(best, block_base(s));
  return best;
}

bool AttentionBackend::supports_head_size(int head_size, const RuntimeEnv& env) const {
  const auto list = get_supported_head_sizes(env);
  return list.empty() || std::find(list.begin(), list.end(), head_size) != list.end();
}

bool AttentionBackend::supports_compute_capability(const std::optional<DeviceCapability>&, const RuntimeEnv&) const {
  return true;
}

std::optional<std::string> AttentionBackend::supports_combination(const CombinationArgs&, const RuntimeEnv&) const {
  return std::nullopt;
}

std::optional<std::vector<KVCacheLayout>> AttentionBackend::supported_kv_cache_layouts(const RuntimeEnv&) const {
  return std::nullopt;
}

std::vector<std::string> AttentionBackend::validate_configuration(const AttentionSelectorConfig& c,
                                                                  const RuntimeEnv& env) const {
  std::vector<std::string> reasons;
  if (!supports_head_size(c.head_size, env)) reasons.emplace_back("head_size not supported");
  if (!supports_dtype(c.dtype, env)) reasons.emplace_back("dtype not supported");
  if (!supports_kv_cache_dtype(c.kv_cache_dtype, env)) reasons.emplace_back("kv_cache_dtype not supported");
  if (!supports_block_size(c.block_size, env)) reasons.emplace_back("block_size not supported");
  if (c.use_mm_prefix && !supports_mm_prefix(env))
    reasons.emplace_back("partial multimodal token full attention not supported");
  if (c.use_mla != is_mla()) reasons.emplace_back(c.use_mla ? "MLA not supported" : "non-MLA not supported");
  if (c.has_sink && !supports_sink(env)) reasons.emplace_back("attention sinks not supported");
  if (c.use_sparse != is_sparse()) reasons.emplace_back(c.use_sparse ? "sparse not supported" : "non-sparse not supported");
  if (c.use_per_head_quant_scales && !supports_per_head_quant_scales(env))
    reasons.emplace_back("per-head quant scales not supported");
  if (!supports_compute_capability(env.device.capability, env)) reasons.emplace_back("compute capability not supported");
  if (!supports_attn_type(c.attn_type))
    reasons.emplace_back(fmt::format("attention type {} not supported", attn_type_name(c.attn_type)));
  if (c.has_sliding_window && !supports_sliding_window(env)) reasons.emplace_back("sliding window not supported");
  if (c.use_non_causal && !supports_non_causal(env)) reasons.emplace_back("non-causal attention not supported");
  if (c.use_mla && c.use_non_causal && c.use_dcp && !supports_non_causal_dcp())
    reasons.emplace_back("non-causal MLA attention with DCP not supported");
  if (c.use_batch_invariant && !supports_batch_invariance(env)) reasons.emplace_back("batch invariance not supported");
  if (c.use_kv_connector && !supports_kv_connector(env)) reasons.emplace_back("KV connector not supported");
  if (c.use_pcp && !supports_pcp()) reasons.emplace_back("PCP not supported");
  if (c.use_dcp && !supports_dcp()) reasons.emplace_back("DCP not supported");
  if (c.use_adaptive_verification && !supports_device_cpu_query_lens_mismatch())
    reasons.emplace_back(
        "device-cpu query lens mismatch not supported, this is needed for adaptive verification");
  if (c.use_rswa && !supports_rswa(env)) reasons.emplace_back("R-SWA not supported");
  const CombinationArgs args{c.head_size, c.dtype,       c.kv_cache_dtype, c.block_size,         c.use_mla,
                             c.has_sink,  c.use_sparse,  c.use_mm_prefix,  env.device.capability};
  if (auto r = supports_combination(args, env)) reasons.push_back(std::move(*r));
  return reasons;
}

}  // namespace attnsel
