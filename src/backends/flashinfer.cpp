// FLASHINFER's capabilities (vllm/v1/attention/backends/flashinfer.py).
#include <fmt/format.h>

#include "backends/flashinfer.hpp"
#include "backends/common.hpp"
#include "backends/families.hpp"
#include "backends/runtime_facts.hpp"

namespace attnsel::backends {

std::vector<DType> FlashInferBackend::supported_dtypes(const RuntimeEnv&) const { return kHalfDTypes; }

std::vector<std::string> FlashInferBackend::supported_kv_cache_dtypes(const RuntimeEnv&) const {
  return {"auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4", "nvfp4_4over6"};
}

std::vector<KernelBlockSize> FlashInferBackend::get_supported_kernel_block_sizes(const RuntimeEnv& env) const {
  // Pages >= 128 only run on the TRTLLM-gen kernel (GQA on Blackwell); they are advertised only
  // when the served model can use it, so that selection never picks a page it cannot serve.
  const long q_heads = static_cast<long>(env.facts.get_int("model.num_attention_heads"));
  const long kv_heads = static_cast<long>(env.facts.get_int("model.num_kv_heads"));
  const bool large_pages = kv_heads > 0 && q_heads / kv_heads > 1 && can_use_trtllm_attention(env, q_heads, kv_heads);
  if (!large_pages) return {16, 32, 64};
  return {16, 32, 64, 128, 256, 512, 1024};
}

std::vector<int> FlashInferBackend::get_supported_head_sizes(const RuntimeEnv&) const { return {64, 128, 256, 512}; }

bool FlashInferBackend::supports_sink(const RuntimeEnv& env) const {
  if (force_use_trtllm_attention(env) == false) return false;  // --attention-config.use_trtllm_attention=0
  return supports_trtllm_attention(env);
}

bool FlashInferBackend::supports_compute_capability(const std::optional<DeviceCapability>& cap,
                                                    const RuntimeEnv&) const {
  // FlashInfer runs on SM75+, but vLLM raises the floor to SM80 (SM75 is broken upstream).
  return cap_at_least(cap, 8, 0) && *cap <= DeviceCapability{12, 1};
}

std::optional<std::string> FlashInferBackend::supports_combination(const CombinationArgs& a,
                                                                   const RuntimeEnv& env) const {
  if (!a.use_mm_prefix) return std::nullopt;
  // mm-prefix runs on FlashInfer's JIT-built custom-mask prefill (FA2 template), which cannot
  // take what only TRTLLM-gen serves.
  const std::string kv = a.kv_cache_dtype.value_or("auto");
  if (kv == "nvfp4" && a.device_capability && a.device_capability->major == 10)
    return "mm-prefix attention with an nvfp4 KV cache is served by TRTLLM-gen on SM100, which cannot run the "
           "mm-prefix variant";
  if (kv == "nvfp4_4over6") return "mm-prefix attention does not support the nvfp4_4over6 KV cache (TRTLLM-gen only)";
  if (kv.starts_with("fp8")) return "mm-prefix attention does not support an fp8 KV cache";
  if (a.has_sink) return "mm-prefix attention does not support attention sinks";
  if (a.block_size && *a.block_size > 64)
    return fmt::format("mm-prefix attention does not support page size {} (TRTLLM-gen only)", *a.block_size);
  if (!env.facts.get_bool("flashinfer.mm_prefix_jit_available"))
    return "FlashInfer cannot build its mm-prefix attention variant here";
  return std::nullopt;
}

std::vector<std::string> FlashInferBackend::validate_configuration(const AttentionSelectorConfig& c,
                                                                   const RuntimeEnv& env) const {
  std::vector<std::string> reasons = AttentionBackend::validate_configuration(c, env);
  if (c.use_mm_prefix && c.use_dcp) reasons.emplace_back("DCP not supported with mm-prefix attention");
  return reasons;
}

}  // namespace attnsel::backends

namespace attnsel::backends {
void append_flashinfer_classes(ClassList& out) { out.push_back(std::make_shared<const FlashInferBackend>()); }
}  // namespace attnsel::backends
