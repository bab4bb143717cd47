// The one table of capability checks (attnsel/capability_checks.hpp). The rows follow
// AttentionBackend.validate_configuration in vllm/v1/attention/backend.py, with vLLM's
// reason strings; the selector fields are vLLM's AttentionSelectorConfig
// (vllm/v1/attention/selector.py), read in get_attn_backend as vLLM reads them.
#include "attnsel/capability_checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "attnsel/errors.hpp"
#include "attnsel/plugin.h"

namespace attnsel {

namespace {

using C = BackendCapabilities;
using S = AttentionSelectorConfig;
using L = LayerRequest;

bool never(const S&) { return false; }

// is_mla()/is_sparse() must equal the request: an MLA backend cannot serve a non-MLA layer.
void check_mla(const CheckContext& x, std::vector<std::string>& reasons) {
  if (x.config.use_mla != x.capabilities.mla) reasons.emplace_back(x.config.use_mla ? "MLA not supported" : "non-MLA not supported");
}
void check_sparse(const CheckContext& x, std::vector<std::string>& reasons) {
  if (x.config.use_sparse != x.capabilities.sparse)
    reasons.emplace_back(x.config.use_sparse ? "sparse not supported" : "non-sparse not supported");
}
void check_attn_type(const CheckContext& x, std::vector<std::string>& reasons) {
  if (!x.capabilities.supports_attn_type(x.config.attn_type))
    reasons.push_back(fmt::format("attention type {} not supported", attn_type_name(x.config.attn_type)));
}
void check_combination(const CheckContext& x, std::vector<std::string>& reasons) {
  const S& c = x.config;
  const CombinationArgs args{c.head_size, c.dtype,      c.kv_cache_dtype, c.block_size,       c.use_mla,
                             c.has_sink,  c.use_sparse, c.use_mm_prefix,  x.device_capability};
  if (auto reason = x.capabilities.check_combination(args)) reasons.push_back(std::move(*reason));
}

const CapabilityCheck kChecks[] = {
    {.reason = "head_size not supported",
     .passes = [](const CheckContext& x) { return x.capabilities.supports_head_size(x.config.head_size); }},
    {.reason = "dtype not supported",
     .passes = [](const CheckContext& x) { return x.capabilities.supports_dtype(x.config.dtype); }},
    {.reason = "kv_cache_dtype not supported",
     .passes = [](const CheckContext& x) { return x.capabilities.supports_kv_cache_dtype(x.config.kv_cache_dtype); }},
    {.reason = "block_size not supported",
     .passes = [](const CheckContext& x) { return x.capabilities.supports_block_size(x.config.block_size); }},
    {.capability = "mm_prefix", .declared = &C::mm_prefix, .flag = "use_mm_prefix", .requested = &S::use_mm_prefix,
     .reason = "partial multimodal token full attention not supported", .plugin_bit = ATTNSEL_FEATURE_MM_PREFIX,
     .cli_flag = "--use-mm-prefix", .cli_help = "multimodal prefix (image-mask, PrefixLM) attention",
     .layer_argument = &L::use_mm_prefix},
    {.capability = "mla", .declared = &C::mla, .flag = "use_mla", .requested = &S::use_mla, .custom = check_mla,
     .plugin_bit = ATTNSEL_FEATURE_MLA, .cli_flag = "--use-mla",
     .cli_help = "the layer uses multi-head latent attention (MLA)", .layer_argument = &L::use_mla},
    {.capability = "sink", .declared = &C::sink, .flag = "has_sink", .requested = &S::has_sink,
     .reason = "attention sinks not supported", .plugin_bit = ATTNSEL_FEATURE_SINK, .cli_flag = "--has-sink",
     .cli_help = "the layer has attention sinks", .layer_argument = &L::has_sink},
    {.capability = "sparse", .declared = &C::sparse, .flag = "use_sparse", .requested = &S::use_sparse,
     .custom = check_sparse, .plugin_bit = ATTNSEL_FEATURE_SPARSE, .cli_flag = "--use-sparse",
     .cli_help = "the layer uses sparse attention (sparse MLA)", .layer_argument = &L::use_sparse},
    {.capability = "per_head_quant_scales", .declared = &C::per_head_quant_scales,
     .flag = "use_per_head_quant_scales", .requested = &S::use_per_head_quant_scales,
     .reason = "per-head quant scales not supported", .plugin_bit = ATTNSEL_FEATURE_PER_HEAD_QUANT_SCALES,
     .cli_flag = "--use-per-head-quant-scales", .cli_help = "per-head quantisation scales",
     .layer_argument = &L::use_per_head_quant_scales},
    {.reason = "compute capability not supported",
     .passes = [](const CheckContext& x) { return x.capabilities.supports_compute_capability(x.device_capability); }},
    {.custom = check_attn_type},
    {.capability = "sliding_window", .declared = &C::sliding_window, .flag = "has_sliding_window",
     .requested = &S::has_sliding_window, .reason = "sliding window not supported",
     .plugin_bit = ATTNSEL_FEATURE_SLIDING_WINDOW, .cli_flag = "--has-sliding-window",
     .cli_help = "the layer has a sliding window", .layer_argument = &L::has_sliding_window},
    {.capability = "non_causal", .declared = &C::non_causal, .flag = "use_non_causal", .requested = &S::use_non_causal,
     .reason = "non-causal attention not supported", .plugin_bit = ATTNSEL_FEATURE_NON_CAUSAL,
     .cli_flag = "--use-non-causal", .cli_help = "AttentionConfig.use_non_causal",
     .from_engine = [](const EngineConfig& e) { return e.attention.use_non_causal; },
     .to_engine = [](EngineConfig& e, bool on) { e.attention.use_non_causal = on; }},
    {.capability = "non_causal_dcp", .declared = &C::non_causal_dcp,
     .reason = "non-causal MLA attention with DCP not supported",
     .applies = [](const S& c) { return c.use_mla && c.use_non_causal && c.use_dcp; },
     .plugin_bit = ATTNSEL_FEATURE_NON_CAUSAL_DCP},
    {.capability = "batch_invariance", .declared = &C::batch_invariance, .flag = "use_batch_invariant",
     .requested = &S::use_batch_invariant, .reason = "batch invariance not supported",
     .plugin_bit = ATTNSEL_FEATURE_BATCH_INVARIANT, .cli_flag = "--use-batch-invariant",
     .cli_help = "VLLM_BATCH_INVARIANT", .from_engine = [](const EngineConfig& e) { return e.batch_invariant; },
     .to_engine = [](EngineConfig& e, bool on) { e.batch_invariant = on; }},
    {.capability = "kv_connector", .declared = &C::kv_connector, .flag = "use_kv_connector",
     .requested = &S::use_kv_connector, .reason = "KV connector not supported",
     .plugin_bit = ATTNSEL_FEATURE_KV_CONNECTOR, .cli_flag = "--use-kv-connector",
     .cli_help = "a KV-transfer instance (KV connector)",
     .from_engine = [](const EngineConfig& e) { return e.kv_transfer_instance; },
     .to_engine = [](EngineConfig& e, bool on) { e.kv_transfer_instance = on; }},
    // Only "> 1" reaches the selector; 2 is the smallest parallel size that turns it on.
    {.capability = "pcp", .declared = &C::pcp, .flag = "use_pcp", .requested = &S::use_pcp,
     .reason = "PCP not supported", .plugin_bit = ATTNSEL_FEATURE_PCP, .cli_flag = "--use-pcp",
     .cli_help = "prefill context parallelism (size > 1)",
     .from_engine = [](const EngineConfig& e) { return e.prefill_context_parallel_size > 1; },
     .to_engine = [](EngineConfig& e, bool on) { e.prefill_context_parallel_size = on ? 2 : 1; }},
    {.capability = "dcp", .declared = &C::dcp, .flag = "use_dcp", .requested = &S::use_dcp,
     .reason = "DCP not supported", .plugin_bit = ATTNSEL_FEATURE_DCP, .cli_flag = "--use-dcp",
     .cli_help = "decode context parallelism (size > 1)",
     .from_engine = [](const EngineConfig& e) { return e.decode_context_parallel_size > 1; },
     .to_engine = [](EngineConfig& e, bool on) { e.decode_context_parallel_size = on ? 2 : 1; }},
    {.capability = "device_cpu_query_lens_mismatch", .declared = &C::device_cpu_query_lens_mismatch,
     .flag = "use_adaptive_verification", .requested = &S::use_adaptive_verification,
     .reason = "device-cpu query lens mismatch not supported, this is needed for adaptive verification",
     .plugin_bit = ATTNSEL_FEATURE_QUERY_LENS_MISMATCH, .cli_flag = "--use-adaptive-verification",
     .cli_help = "speculative decoding with adaptive verification",
     .from_engine = [](const EngineConfig& e) { return e.adaptive_verification; },
     .to_engine = [](EngineConfig& e, bool on) { e.adaptive_verification = on; }},
    // Only "is set" reaches the selector; 128 is the window of vLLM's own R-SWA test.
    {.capability = "rswa", .declared = &C::rswa, .flag = "use_rswa", .requested = &S::use_rswa,
     .reason = "R-SWA not supported", .plugin_bit = ATTNSEL_FEATURE_RSWA, .cli_flag = "--use-rswa",
     .cli_help = "the model uses Reference Sliding Window Attention (R-SWA)",
     .from_engine = [](const EngineConfig& e) { return e.rswa_window.has_value(); },
     .to_engine = [](EngineConfig& e, bool on) {
       if (on) e.rswa_window = 128;
     }},
    {.custom = check_combination},
    // Declared capabilities that selection does not check.
    {.capability = "alibi_sqrt", .declared = &C::alibi_sqrt, .applies = never, .plugin_bit = ATTNSEL_FEATURE_ALIBI_SQRT},
    {.capability = "forward_includes_kv_cache_update", .declared = &C::forward_includes_kv_cache_update,
     .applies = never, .plugin_bit = ATTNSEL_FEATURE_FORWARD_UPDATES_KV},
};

}  // namespace

std::span<const CapabilityCheck> capability_checks() { return kChecks; }

std::vector<std::string> run_capability_checks(const AttentionSelectorConfig& config,
                                               const BackendCapabilities& capabilities,
                                               const std::optional<DeviceCapability>& device_capability) {
  std::vector<std::string> reasons;
  const CheckContext context{config, capabilities, device_capability};
  for (const CapabilityCheck& check : kChecks) {
    if (check.custom) {
      check.custom(context, reasons);
      continue;
    }
    const bool applies = check.applies ? check.applies(config) : check.requested == nullptr || config.*check.requested;
    if (!applies) continue;
    const bool passes = check.passes ? check.passes(context) : capabilities.*check.declared;
    if (!passes) reasons.emplace_back(check.reason);
  }
  if (capabilities.own_checks)
    for (std::string& r : capabilities.own_checks(config)) reasons.push_back(std::move(r));
  return reasons;
}

std::span<const CapabilityCheck* const> selector_flags() {
  static const std::vector<const CapabilityCheck*> flags = [] {
    std::vector<const CapabilityCheck*> out;
    for (const CapabilityCheck& check : kChecks)
      if (check.requested != nullptr) out.push_back(&check);
    return out;
  }();
  return flags;
}

std::size_t selector_flag_index(std::string_view name) {
  const std::span<const CapabilityCheck* const> flags = selector_flags();
  std::vector<std::string_view> names;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    if (flags[i]->flag == name) return i;
    names.push_back(flags[i]->flag);
  }
  throw ValueError(fmt::format("unknown selector flag '{}'; valid flags are: {}", name, fmt::join(names, ", ")));
}

std::vector<std::pair<std::string_view, bool>> capability_flags(const BackendCapabilities& capabilities) {
  std::vector<std::pair<std::string_view, bool>> out;
  for (const CapabilityCheck& check : kChecks)
    if (!check.capability.empty()) out.emplace_back(check.capability, capabilities.*check.declared);
  return out;
}

}  // namespace attnsel
