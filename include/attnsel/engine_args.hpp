// Layer: model (src/layers.txt)
// Engine options as vLLM's command line spells them (--attention-backend,
// --attention-config JSON, --kv-cache-dtype, --block-size, --dtype, the parallel sizes,
// --kv-transfer-config JSON, --kv-cache-layout), parsed and validated into the EngineConfig
// the selector reads plus the engine-level inputs of a whole-model plan.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "attnsel/export.hpp"
#include "attnsel/selector.hpp"

namespace attnsel {

/// vLLM's KVTransferConfig, the fields selection and layout resolution depend on.
/// Thread-safety: a plain value.
struct ATTNSEL_API KVTransferConfig {
  std::optional<std::string> kv_connector;  ///< e.g. "NixlConnector"
  std::optional<std::string> kv_role;       ///< "kv_producer", "kv_consumer" or "kv_both"

  /// kv_connector is set and kv_role is a known role.
  bool is_kv_transfer_instance() const;
};

/// The options as given on vLLM's command line (text, before validation). nullopt means the
/// option was not given; a given text is validated, the empty one too (it is refused, never
/// taken as "not given"). Thread-safety: a plain value.
struct ATTNSEL_API EngineArgs {
  std::optional<std::string> attention_backend;   ///< --attention-backend NAME ("auto" = automatic)
  std::optional<std::string> attention_config;    ///< --attention-config JSON
  std::string kv_cache_dtype = "auto";            ///< --kv-cache-dtype
  std::optional<int> block_size;                  ///< --block-size (nullopt = not user-specified)
  std::string dtype = "auto";                     ///< --dtype
  int tensor_parallel_size = 1;                   ///< --tensor-parallel-size
  int decode_context_parallel_size = 1;           ///< --decode-context-parallel-size
  int prefill_context_parallel_size = 1;          ///< --prefill-context-parallel-size
  std::optional<std::string> kv_transfer_config;  ///< --kv-transfer-config JSON
  std::optional<std::string> kv_cache_layout;     ///< --kv-cache-layout (vLLM's VLLM_KV_CACHE_LAYOUT)
  bool batch_invariant = false;                   ///< VLLM_BATCH_INVARIANT
};

/// Validated engine options. Thread-safety: a plain value.
struct ATTNSEL_API EngineOptions {
  EngineConfig engine;                         ///< everything get_attn_backend reads
  int tensor_parallel_size = 1;
  std::string dtype = "auto";                  ///< validated --dtype (resolved against the model later)
  std::optional<KVTransferConfig> kv_transfer;
  std::optional<std::string> kv_cache_layout;  ///< the requested layout as given (a valid name)
};

/// Parses and validates every option. ValueError, naming the option, for: an unknown
/// backend or per-kind kind (vLLM's messages), both --attention-backend and
/// --attention-config's backend ("attention_backend and attention_config.backend are
/// mutually exclusive"), malformed JSON or a mistyped or unknown field, an unknown
/// kv-cache dtype, dtype or layout, a non-positive size.
ATTNSEL_API EngineOptions parse_engine_args(const EngineArgs& args);

/// vLLM's AttentionConfig from JSON: "backend", "backend_per_kind", "use_non_causal",
/// "flash_attn_version", "use_trtllm_attention", "minimax_m3_msa_decode_backend" go through
/// vLLM's validators; the kernel-tuning fields are type-checked and otherwise ignored.
ATTNSEL_API AttentionConfig parse_attention_config(std::string_view json_text);

/// vLLM's --attention-backend and --attention-config together, as every entry point reads
/// them (nullopt = not given): the config through parse_attention_config, then the backend
/// ("auto" = automatic); ValueError "attention_backend and attention_config.backend are
/// mutually exclusive" when both name a backend.
ATTNSEL_API AttentionConfig make_attention_config(std::optional<std::string_view> attention_backend,
                                                  std::optional<std::string_view> attention_config_json);

/// vLLM's KVTransferConfig from JSON, with its kv_role validation.
ATTNSEL_API KVTransferConfig parse_kv_transfer_config(std::string_view json_text);

/// The layout the configured KV connector asks for (vLLM's get_kv_connector_cache_layout):
/// NixlConnector wants "HND" unless the model uses MLA; other connectors state none.
ATTNSEL_API std::optional<std::string> kv_connector_cache_layout(const KVTransferConfig& config, bool model_uses_mla);

}  // namespace attnsel
