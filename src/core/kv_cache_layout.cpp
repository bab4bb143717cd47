#include "attnsel/kv_cache_layout.hpp"

namespace attnsel {

namespace {
constexpr std::array<KVCacheLayout, 6> kLayouts = {KVCacheLayout::LBHNC, KVCacheLayout::LBNHC, KVCacheLayout::LHBNC,
                                                   KVCacheLayout::BLHNC, KVCacheLayout::BLNHC, KVCacheLayout::BHLNC};
constexpr std::array<std::string_view, 6> kLayoutNames = {"LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"};
// Logical axes: L=0, B=1, H=2, N=3, C=4.
constexpr std::array<std::array<int, 5>, 6> kPerms = {{{0, 1, 2, 3, 4},
                                                       {0, 1, 3, 2, 4},
                                                       {0, 2, 1, 3, 4},
                                                       {1, 0, 2, 3, 4},
                                                       {1, 0, 3, 2, 4},
                                                       {1, 2, 0, 3, 4}}};
}  // namespace

std::string_view layout_name(KVCacheLayout l) { return kLayoutNames[static_cast<std::size_t>(l)]; }
std::span<const KVCacheLayout> all_layouts() { return kLayouts; }
std::array<int, 5> layout_permutation(KVCacheLayout l) { return kPerms[static_cast<std::size_t>(l)]; }

std::optional<KVCacheLayout> parse_layout(std::string_view s) {
  if (s == "NHD") return KVCacheLayout::LBNHC;
  if (s == "HND") return KVCacheLayout::LBHNC;
  for (std::size_t i = 0; i < kLayoutNames.size(); ++i)
    if (s == kLayoutNames[i]) return kLayouts[i];
  return std::nullopt;
}

bool is_layer_compact(KVCacheLayout l) { return layout_permutation(l)[0] == 0; }
bool is_block_contiguous(KVCacheLayout l) {
  auto p = layout_permutation(l);
  return p[2] == 2 && p[3] == 3 && p[4] == 4;
}
bool is_block_compact(KVCacheLayout l) {
  auto p = layout_permutation(l);
  return (p[0] == 0 && p[1] == 1) || (p[0] == 1 && p[1] == 0);
}
bool is_block_outermost(KVCacheLayout l) { return layout_permutation(l)[0] == 1; }

std::vector<KVCacheLayout> default_layout_preference() {
  return {KVCacheLayout::LBNHC, KVCacheLayout::LBHNC, KVCacheLayout::BLNHC,
          KVCacheLayout::BLHNC, KVCacheLayout::BHLNC, KVCacheLayout::LHBNC};
}

}  // namespace attnsel
