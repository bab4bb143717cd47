// Layer: core (src/layers.txt)
// The one table of capability checks: each row is one check of vLLM's
// AttentionBackend.validate_configuration (vllm/v1/attention/backend.py), in vLLM's order,
// with everything derived from it — the capability record's field, when the check applies,
// the test, vLLM's reason string, the plugin ABI's feature bit, the CLI flag and the JSON
// keys. validate_configuration, the plugin adapter, `attnsel list`, the generated docs,
// the CLI's boolean selector flags and the JSON output all read this table.
//
// A selector flag is one row here: the C API (attnsel_select_request_set_flag,
// attnsel_list_selector_flags), the Python package's keyword arguments, the CLI, the JSON
// output and docs/selector-flags.md are read from it. docs/ADDING_A_FLAG.md says what
// adding one touches.
//
// Thread-safety: the table is immutable static data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/capabilities.hpp"
#include "attnsel/export.hpp"
#include "attnsel/engine_config.hpp"
#include "attnsel/selector_config.hpp"

namespace attnsel {

/// What a check sees.
struct ATTNSEL_API CheckContext {
  const AttentionSelectorConfig& config;
  const BackendCapabilities& capabilities;
  std::optional<DeviceCapability> device_capability;  ///< the environment's device
};

/// One row. A boolean row is "the flag is requested ⇒ the capability is declared";
/// other rows give `passes` (a test with a fixed reason) or `custom` (a test that
/// writes its own reasons).
struct ATTNSEL_API CapabilityCheck {
  /// The capability's name in `attnsel list` (its JSON "features" key and the docs'
  /// "supports" column); empty for checks of lists and rules.
  std::string_view capability = {};
  /// The record's field; nullptr for checks of lists and rules.
  bool BackendCapabilities::*declared = nullptr;
  /// The selector flag, by vLLM's field name (also its JSON key); empty when none.
  std::string_view flag = {};
  bool AttentionSelectorConfig::*requested = nullptr;
  /// vLLM's reason string when the check fails.
  std::string_view reason = {};
  /// When the check applies; unset: when `requested` is set (always, without one).
  bool (*applies)(const AttentionSelectorConfig& config) = nullptr;
  /// The test; unset: the `declared` field.
  bool (*passes)(const CheckContext& context) = nullptr;
  /// A test with reasons of its own (MLA/non-MLA, the attention type, supports_combination).
  void (*custom)(const CheckContext& context, std::vector<std::string>& reasons) = nullptr;
  /// The plugin ABI's ATTNSEL_FEATURE_* bit (attnsel/plugin.h); 0 when none.
  std::uint64_t plugin_bit = 0;
  /// The `attnsel select`/`plan` flag and its help; empty when the CLI has none.
  std::string_view cli_flag = {};
  std::string_view cli_help = {};
  /// Where get_attn_backend reads the flag: the layer's argument, or the engine config.
  bool LayerRequest::*layer_argument = nullptr;
  bool (*from_engine)(const EngineConfig& engine) = nullptr;
  /// Sets the engine config as the CLI flag asks (engine-level flags only).
  void (*to_engine)(EngineConfig& engine, bool on) = nullptr;
};

/// Every check, in vLLM's validate_configuration order; the capabilities that no check
/// reads (alibi_sqrt, forward_includes_kv_cache_update) come last, with no flag.
ATTNSEL_API std::span<const CapabilityCheck> capability_checks();

/// Runs every check of the table, then the backend's own checks: every failing reason,
/// in vLLM's order (empty = valid).
ATTNSEL_API std::vector<std::string> run_capability_checks(const AttentionSelectorConfig& config,
                                                           const BackendCapabilities& capabilities,
                                                           const std::optional<DeviceCapability>& device_capability);

/// The selector flags: the rows with a `flag`, in table order (the order of the C API's
/// flag indices and of `attnsel select --list-flags`).
ATTNSEL_API std::span<const CapabilityCheck* const> selector_flags();

/// The index in selector_flags() of the flag named `name` (vLLM's field name); ValueError
/// naming the valid flags when there is none.
ATTNSEL_API std::size_t selector_flag_index(std::string_view name);

/// AttentionSelectorConfig's field names: vLLM's, in the order of its AttentionSelectorConfig
/// (vllm/v1/attention/selector.py), then the selector flags vLLM does not have, in table
/// order. This is repr()'s order and that of the Python package's AttentionSelectorConfig.
ATTNSEL_API std::vector<std::string_view> selector_config_fields();

/// The boolean capabilities in table order: (name, declared) for each row with a name.
ATTNSEL_API std::vector<std::pair<std::string_view, bool>> capability_flags(const BackendCapabilities& capabilities);

}  // namespace attnsel
