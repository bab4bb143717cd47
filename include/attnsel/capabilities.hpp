// Layer: core (src/layers.txt)
// The capability record: everything one attention backend class declares on one runtime
// environment — vLLM's AttentionBackend class attributes and classmethods
// (vllm/v1/attention/backend.py), evaluated. It has the shape of the plugin ABI's
// attnsel_backend declaration (attnsel/plugin.h) plus the parts that depend on the
// environment, which vLLM computes in classmethods: those are optional rules.
//
// Every boolean capability is one field here and one row of capability_checks()
// (attnsel/capability_checks.hpp), which derives validation, the plugin's feature bits,
// `attnsel list`, the generated docs, the CLI flags and the JSON output from it.
//
// Thread-safety: a plain value. A rule may refer to the RuntimeEnv the record was made
// for: use a record only while that environment lives.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attnsel/export.hpp"
#include "attnsel/kv_cache_layout.hpp"
#include "attnsel/selector_config.hpp"
#include "attnsel/types.hpp"

namespace attnsel {

/// One backend class's capabilities on one runtime environment. The defaults are vLLM's
/// AttentionBackend base class: a backend states only where it differs.
struct ATTNSEL_API BackendCapabilities {
  // --- lists (vLLM's supported_dtypes, supported_kv_cache_dtypes, ...) ------------------
  std::vector<DType> dtypes = {DType::float16, DType::bfloat16};
  std::vector<CacheDType> kv_cache_dtypes = {CacheDType::auto_, CacheDType::float16, CacheDType::bfloat16};  ///< empty = any
  std::vector<KernelBlockSize> kernel_block_sizes = {MultipleOf{1}};           ///< empty = any
  std::vector<int> head_sizes;                                                 ///< empty = any
  std::vector<AttentionType> attn_types = {AttentionType::decoder};
  std::optional<std::vector<KVCacheLayout>> kv_cache_layouts;  ///< most preferred first; nullopt = any

  // --- boolean capabilities: one row of capability_checks() each -----------------------
  bool mla = false;                               ///< is_mla()
  bool sparse = false;                            ///< is_sparse()
  bool mm_prefix = false;                         ///< supports_mm_prefix()
  bool sink = false;                              ///< supports_sink()
  bool per_head_quant_scales = false;             ///< supports_per_head_quant_scales()
  bool sliding_window = false;                    ///< supports_sliding_window()
  bool non_causal = false;                        ///< supports_non_causal()
  bool non_causal_dcp = false;                    ///< supports_non_causal_dcp()
  bool batch_invariance = false;                  ///< supports_batch_invariance()
  bool kv_connector = true;                       ///< supports_kv_connector()
  bool pcp = false;                               ///< derived from the impl class (MLA impls: true)
  bool dcp = false;                               ///< derived from the impl class (opt-in, docs/DECISIONS.md)
  bool device_cpu_query_lens_mismatch = true;     ///< supports_device_cpu_query_lens_mismatch()
  bool rswa = false;                              ///< R-SWA; no vLLM backend declares it yet
  bool alibi_sqrt = false;                        ///< supports_alibi_sqrt()
  bool forward_includes_kv_cache_update = true;   ///< forward_includes_kv_cache_update

  // --- rules: where vLLM computes instead of listing (unset = the lists above decide) ----
  /// supports_head_size(); unset: `head_sizes` is empty or holds it.
  std::function<bool(int head_size)> head_size_rule;
  /// supports_kv_cache_dtype(); unset: not given, or `kv_cache_dtypes` is empty or holds it.
  std::function<bool(std::optional<CacheDType> kv_cache_dtype)> kv_cache_dtype_rule;
  /// supports_block_size(); unset: not given, or a multiple of one of `kernel_block_sizes`.
  std::function<bool(std::optional<int> block_size)> block_size_rule;
  /// get_preferred_block_size() where a backend overrides it; unset or nullopt: the default
  /// when supported, else the smallest kernel block size.
  std::function<std::optional<int>(int default_block_size)> preferred_block_size_rule;
  /// supports_compute_capability(); unset: any device.
  std::function<bool(const std::optional<DeviceCapability>& capability)> compute_capability_rule;
  /// supports_combination(): a reason, or nullopt when the combination works; unset: always works.
  std::function<std::optional<std::string>(const CombinationArgs& args)> combination_rule;
  /// Reasons a backend's own validate_configuration override adds after the common checks.
  std::function<std::vector<std::string>(const AttentionSelectorConfig& config)> own_checks;

  // --- the queries, with vLLM's base-class defaults -----------------------------------
  bool supports_dtype(DType d) const;
  bool supports_kv_cache_dtype(std::optional<CacheDType> d) const;
  bool supports_block_size(std::optional<int> block_size) const;
  bool supports_head_size(int head_size) const;
  bool supports_attn_type(AttentionType t) const;
  bool supports_compute_capability(const std::optional<DeviceCapability>& capability) const;
  int preferred_block_size(int default_block_size) const;
  std::optional<std::string> check_combination(const CombinationArgs& args) const;
};

}  // namespace attnsel
