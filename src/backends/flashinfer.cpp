// FLASHINFER's capabilities (vllm/v1/attention/backends/flashinfer.py).
#include "backends/flashinfer.hpp"

#include <fmt/format.h>

#include "backends/class_factories.hpp"
#include "backends/common.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

BackendCapabilities FlashInferBackend::capabilities(const RuntimeEnv& env) const {
  BackendCapabilities c;
  c.kv_cache_dtypes = {CacheDType::auto_, CacheDType::float16, CacheDType::bfloat16, CacheDType::fp8,
                       CacheDType::fp8_e4m3, CacheDType::fp8_e5m2, CacheDType::nvfp4, CacheDType::nvfp4_4over6};
  c.forward_includes_kv_cache_update = false;
  // Pages >= 128 only run on the TRTLLM-gen kernel (GQA on Blackwell); they are advertised only
  // when the served model can use it, so that selection never picks a page it cannot serve.
  const long q_heads = static_cast<long>(env.facts.get_int("model.num_attention_heads"));
  const long kv_heads = static_cast<long>(env.facts.get_int("model.num_kv_heads"));
  const bool large_pages = kv_heads > 0 && q_heads / kv_heads > 1 && can_use_trtllm_attention(env, q_heads, kv_heads);
  if (large_pages) c.kernel_block_sizes = {16, 32, 64, 128, 256, 512, 1024};
  else c.kernel_block_sizes = {16, 32, 64};
  c.head_sizes = {64, 128, 256, 512};
  // --attention-config.use_trtllm_attention=0 turns sinks off.
  c.sink = force_use_trtllm_attention(env) != false && supports_trtllm_attention(env);
  // Served through FlashInfer's JIT mm-prefix variant; the combination rule has its limits.
  c.mm_prefix = true;
  c.sliding_window = true;
  c.non_causal = true;
  c.dcp = true;
  // FlashInfer runs on SM75+, but vLLM raises the floor to SM80 (SM75 is broken upstream).
  c.compute_capability_rule = [](const std::optional<DeviceCapability>& cap) {
    return cap_at_least(cap, 8, 0) && *cap <= DeviceCapability{12, 1};
  };
  c.combination_rule = [jit = env.facts.get_bool("flashinfer.mm_prefix_jit_available")](
                           const CombinationArgs& a) -> std::optional<std::string> {
    if (!a.use_mm_prefix) return std::nullopt;
    // mm-prefix runs on FlashInfer's JIT-built custom-mask prefill (FA2 template), which cannot
    // take what only TRTLLM-gen serves.
    const CacheDType kv = a.kv_cache_dtype.value_or(CacheDType::auto_);
    if (kv == CacheDType::nvfp4 && a.device_capability && a.device_capability->major == 10)
      return "mm-prefix attention with an nvfp4 KV cache is served by TRTLLM-gen on SM100, which cannot run the "
             "mm-prefix variant";
    if (kv == CacheDType::nvfp4_4over6) return "mm-prefix attention does not support the nvfp4_4over6 KV cache (TRTLLM-gen only)";
    if (cache_dtype_name(kv).starts_with("fp8")) return "mm-prefix attention does not support an fp8 KV cache";
    if (a.has_sink) return "mm-prefix attention does not support attention sinks";
    if (a.block_size && *a.block_size > 64)
      return fmt::format("mm-prefix attention does not support page size {} (TRTLLM-gen only)", *a.block_size);
    if (!jit) return "FlashInfer cannot build its mm-prefix attention variant here";
    return std::nullopt;
  };
  // vLLM's validate_configuration override: mm-prefix attention cannot run with DCP.
  c.own_checks = [](const AttentionSelectorConfig& config) {
    std::vector<std::string> reasons;
    if (config.use_mm_prefix && config.use_dcp) reasons.emplace_back("DCP not supported with mm-prefix attention");
    return reasons;
  };
  return c;
}

void append_flashinfer(ClassList& out) { out.push_back(std::make_shared<const FlashInferBackend>()); }

}  // namespace attnsel::backends
