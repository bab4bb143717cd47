// Layer: core (src/layers.txt)
// KV-cache layouts (vLLM's KVCacheLayout): a stride permutation of the logical
// [L, B, H, N, C] cache (layer, block, head, token-in-block, content).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/export.hpp"

namespace attnsel {

/// Declaration order matters: it is the tie-break order of vLLM's get_supported_kv_cache_layouts
/// (vllm/v1/attention/backends/utils.py).
enum class KVCacheLayout : std::uint8_t { LBHNC, LBNHC, LHBNC, BLHNC, BLNHC, BHLNC };

ATTNSEL_API std::string_view layout_name(KVCacheLayout l);
ATTNSEL_API std::span<const KVCacheLayout> all_layouts();
/// Accepts member names and the legacy "NHD" (= LBNHC) and "HND" (= LBHNC).
ATTNSEL_API std::optional<KVCacheLayout> parse_layout(std::string_view s);
ATTNSEL_API std::array<int, 5> layout_permutation(KVCacheLayout l);
ATTNSEL_API bool is_layer_compact(KVCacheLayout l);
ATTNSEL_API bool is_block_contiguous(KVCacheLayout l);
ATTNSEL_API bool is_block_compact(KVCacheLayout l);
ATTNSEL_API bool is_block_outermost(KVCacheLayout l);

/// vLLM's default preference when no backend declares layouts.
ATTNSEL_API std::vector<KVCacheLayout> default_layout_preference();

}  // namespace attnsel
