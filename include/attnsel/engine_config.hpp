// Layer: core (src/layers.txt)
// What get_attn_backend reads besides the model: vLLM's global config as an EngineConfig
// (AttentionConfig, CacheConfig, parallel sizes, ...) and one layer's arguments
// (LayerRequest). Plain values shared by the selector and the capability table.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/export.hpp"
#include "attnsel/registry.hpp"
#include "attnsel/types.hpp"

namespace attnsel {

/// vLLM's AttentionConfig, selection-relevant fields. Thread-safety: a plain value.
struct ATTNSEL_API AttentionConfig {
  std::optional<BackendMember> backend;                 ///< nullopt = automatic
  std::map<std::string, BackendMember> backend_per_kind;  ///< kind value → backend
  bool use_non_causal = false;
  std::optional<int> flash_attn_version;
  std::optional<bool> use_trtllm_attention;
  std::string minimax_m3_msa_decode_backend = "triton";

  /// The `backend` validator: "auto" (any case) → none, else a case-insensitive lookup
  /// with vLLM's unknown-backend error; then the MSA alias rule.
  void set_backend(std::string_view text);
  /// The `backend_per_kind` validator: keys must be KVCacheSpecKind values; values are
  /// case-insensitive names ("auto" is not special here, as in vLLM).
  void set_backend_per_kind(std::string_view kind, std::string_view backend_name);
};

/// vLLM's CacheConfig, selection-relevant fields.
struct ATTNSEL_API CacheConfig {
  int block_size = 16;
  bool user_specified_block_size = false;
  CacheDType cache_dtype = CacheDType::auto_;
};

/// Everything get_attn_backend reads from vLLM's global config.
struct ATTNSEL_API EngineConfig {
  AttentionConfig attention;
  CacheConfig cache;
  int prefill_context_parallel_size = 1;
  int decode_context_parallel_size = 1;
  bool kv_transfer_instance = false;      ///< kv_transfer_config.is_kv_transfer_instance
  bool batch_invariant = false;           ///< VLLM_BATCH_INVARIANT
  bool adaptive_verification = false;     ///< speculative_config.enable_adaptive_verification
  std::optional<int> rswa_window;         ///< model_arch_config.rswa_window
};

/// One attention layer's arguments to get_attn_backend.
struct ATTNSEL_API LayerRequest {
  int head_size = 0;
  DType dtype = DType::bfloat16;
  std::optional<CacheDType> kv_cache_dtype;
  bool use_mla = false;
  bool has_sink = false;
  bool use_sparse = false;
  bool use_mm_prefix = false;
  bool use_per_head_quant_scales = false;
  std::optional<AttentionType> attn_type;
  std::optional<int> num_heads;
  bool has_sliding_window = false;
};

}  // namespace attnsel
