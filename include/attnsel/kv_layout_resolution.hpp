// Layer: model (src/layers.txt)
// KV-cache layout resolution for a whole model (vllm/v1/attention/backends/utils.py): the
// layouts every backend of a worker supports (get_supported_kv_cache_layouts), and the one
// layout the engine core resolves from the workers' reports, the specs' shapes, the requested
// layout and the KV connector's preference (resolve_kv_cache_layout).
//
// Thread-safety: pure functions.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/export.hpp"
#include "attnsel/backend.hpp"
#include "attnsel/kv_cache_layout.hpp"
#include "attnsel/platform.hpp"

namespace attnsel {

/// vLLM's _layout_from_name: a member name or the legacy "NHD" (LBNHC) / "HND" (LBHNC);
/// ValueError "Unknown KV cache layout 'X'. Valid layouts: ['LBHNC', 'LBNHC', ...]" otherwise.
ATTNSEL_API KVCacheLayout layout_from_name(std::string_view name);
/// Python's repr of a list of layout names, as vLLM's messages print it: "['LBNHC', 'LBHNC']".
ATTNSEL_API std::string layout_names_repr(std::span<const KVCacheLayout> layouts);

/// vLLM's get_supported_kv_cache_layouts: the layouts every backend of one worker
/// supports, most preferred first. Backends that declare none take no part; with no
/// declaration at all, the default preference. ValueError "No KV cache layout satisfies
/// every supported set: [...]." when the declarations are disjoint.
ATTNSEL_API std::vector<KVCacheLayout> get_supported_kv_cache_layouts(std::span<const AttentionBackend* const> backends,
                                                                      const RuntimeEnv& env);

/// A KV-cache spec's shape as the layout rule compares it: vLLM's
/// (num_heads, num_states, page_size_bytes). Thread-safety: a plain value.
struct ATTNSEL_API KVCacheShape {
  int num_heads = 0;
  int num_states = 0;
  std::int64_t page_size_bytes = 0;
  auto operator<=>(const KVCacheShape&) const = default;
};

/// The engine-level inputs of the resolution. Thread-safety: a plain value.
struct ATTNSEL_API LayoutInputs {
  std::optional<std::string> recorded;          ///< cache_config.kv_cache_layout, already resolved: wins outright
  std::optional<std::string> requested;         ///< VLLM_KV_CACHE_LAYOUT (--kv-cache-layout): a hard constraint
  std::optional<std::string> connector_layout;  ///< the KV connector's preference: a soft one
};

/// The resolved layout and how it was decided. Thread-safety: a plain value.
struct ATTNSEL_API ResolvedLayout {
  KVCacheLayout layout = KVCacheLayout::LBNHC;
  std::vector<KVCacheLayout> candidates;  ///< worker 0's list after the mixed-shape filter
  bool mixed_hnc_shapes = false;          ///< the specs differ in (heads, states, page bytes)
  std::string decided_by;                 ///< "recorded", "requested", "connector", "first candidate"
  std::vector<LogLine> logs;              ///< the connector warning; "Using X KV cache layout."
};

/// vLLM's resolve_kv_cache_layout. `supported_layouts` holds each worker's report
/// (layout names). Errors, with vLLM's messages: "No worker reported supported KV cache
/// layouts.", "Workers disagree on supported KV cache layouts: ...", "Specs with mixed HNC
/// shapes need a block-compact layout, but none is in every supported set: ...",
/// "VLLM_KV_CACHE_LAYOUT=X does not satisfy every supported set; valid layouts: [...]."
/// (all ValueError).
ATTNSEL_API ResolvedLayout resolve_kv_cache_layout(const LayoutInputs& inputs,
                                                   const std::vector<std::vector<std::string>>& supported_layouts,
                                                   std::span<const KVCacheShape> specs);

}  // namespace attnsel
