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

namespace attnsel {

/// Declaration order matters: it is vLLM's tie-break order (spec §9.2).
enum class KVCacheLayout : std::uint8_t { LBHNC, LBNHC, LHBNC, BLHNC, BLNHC, BHLNC };

std::string_view layout_name(KVCacheLayout l);
std::span<const KVCacheLayout> all_layouts();
/// Accepts member names and the legacy "NHD" (= LBNHC) and "HND" (= LBHNC).
std::optional<KVCacheLayout> parse_layout(std::string_view s);
std::array<int, 5> layout_permutation(KVCacheLayout l);
bool is_layer_compact(KVCacheLayout l);
bool is_block_contiguous(KVCacheLayout l);
bool is_block_compact(KVCacheLayout l);
bool is_block_outermost(KVCacheLayout l);

/// vLLM's default preference when no backend declares layouts.
std::vector<KVCacheLayout> default_layout_preference();

}  // namespace attnsel
