// Layer: core (src/layers.txt)
// AttentionSelectorConfig: the hashable value a selection is keyed on (vLLM field names).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "attnsel/export.hpp"
#include "attnsel/types.hpp"

namespace attnsel {

/// Thread-safety: a plain value.
struct ATTNSEL_API AttentionSelectorConfig {
  int head_size = 0;
  DType dtype = DType::bfloat16;
  std::optional<CacheDType> kv_cache_dtype;  ///< nullopt = not given (differs from "auto" in the key)
  std::optional<int> block_size;              ///< only when the user specified one
  bool use_mla = false;
  bool has_sink = false;
  bool use_sparse = false;
  bool use_mm_prefix = false;
  bool use_per_head_quant_scales = false;
  AttentionType attn_type = AttentionType::decoder;
  bool has_sliding_window = false;
  bool use_non_causal = false;
  bool use_batch_invariant = false;
  bool use_kv_connector = false;
  bool use_pcp = false;
  bool use_adaptive_verification = false;
  bool use_dcp = false;
  bool use_rswa = false;

  bool operator==(const AttentionSelectorConfig&) const = default;
  std::size_t hash() const noexcept;
  /// vLLM's __repr__: "AttentionSelectorConfig(head_size=128, dtype=torch.bfloat16, ...)".
  /// use_rswa, absent from vLLM's printed form, is appended only when true.
  std::string repr() const;
};

struct ATTNSEL_API AttentionSelectorConfigHash {
  std::size_t operator()(const AttentionSelectorConfig& c) const noexcept { return c.hash(); }
};

/// The arguments of supports_combination, as vLLM passes them.
struct ATTNSEL_API CombinationArgs {
  int head_size;
  DType dtype;
  std::optional<CacheDType> kv_cache_dtype;
  std::optional<int> block_size;
  bool use_mla;
  bool has_sink;
  bool use_sparse;
  bool use_mm_prefix;
  std::optional<DeviceCapability> device_capability;
};

}  // namespace attnsel
