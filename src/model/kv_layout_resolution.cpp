#include "attnsel/kv_layout_resolution.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <set>

#include "attnsel/errors.hpp"
#include "backends/composite.hpp"
#include "core/log.hpp"

namespace attnsel {

namespace {

// Python's repr of a list of lists of strings: "[['LBNHC', 'LBHNC'], ['BLHNC']]".
std::string nested_repr(const std::vector<std::vector<std::string>>& lists) {
  std::vector<std::string> inner;
  for (const auto& l : lists) {
    std::vector<std::string> q;
    for (const std::string& s : l) q.push_back(fmt::format("'{}'", s));
    inner.push_back(fmt::format("[{}]", fmt::join(q, ", ")));
  }
  return fmt::format("[{}]", fmt::join(inner, ", "));
}

bool contains(const std::vector<KVCacheLayout>& v, KVCacheLayout l) { return std::find(v.begin(), v.end(), l) != v.end(); }

}  // namespace

KVCacheLayout layout_from_name(std::string_view name) {
  if (auto l = parse_layout(name)) return *l;
  std::vector<KVCacheLayout> all(all_layouts().begin(), all_layouts().end());
  // The name is quoted as Python's repr would: printable text only.
  std::string shown;
  for (char c : name) shown += (c >= 0x20 && c < 0x7f && c != '\'') ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  throw ValueError(fmt::format("Unknown KV cache layout '{}'. Valid layouts: {}", shown, layout_names_repr(all)));
}

std::string layout_names_repr(std::span<const KVCacheLayout> layouts) {
  std::vector<std::string> q;
  for (KVCacheLayout l : layouts) q.push_back(fmt::format("'{}'", layout_name(l)));
  return fmt::format("[{}]", fmt::join(q, ", "));
}

std::vector<KVCacheLayout> get_supported_kv_cache_layouts(std::span<const AttentionBackend* const> backends,
                                                          const RuntimeEnv& env) {
  return backends::get_supported_kv_cache_layouts(std::vector<const AttentionBackend*>(backends.begin(), backends.end()),
                                                  env);
}

ResolvedLayout resolve_kv_cache_layout(const LayoutInputs& inputs,
                                       const std::vector<std::vector<std::string>>& supported_layouts,
                                       std::span<const KVCacheShape> specs) {
  ResolvedLayout out;
  if (inputs.recorded) {
    out.layout = layout_from_name(*inputs.recorded);
    out.candidates = {out.layout};
    out.decided_by = "recorded";
    return out;
  }
  const bool any_empty = std::any_of(supported_layouts.begin(), supported_layouts.end(),
                                     [](const auto& l) { return l.empty(); });
  if (supported_layouts.empty() || any_empty) throw ValueError("No worker reported supported KV cache layouts.");
  for (const auto& worker : supported_layouts)
    if (worker != supported_layouts.front())
      throw ValueError(
          fmt::format("Workers disagree on supported KV cache layouts: {}.", nested_repr(supported_layouts)));
  for (const std::string& name : supported_layouts.front()) out.candidates.push_back(layout_from_name(name));

  // A non-block-compact layout makes every spec alias the same HNC page; specs of different
  // shapes can only share a page when the block is densely packed (block-compact).
  const std::set<KVCacheShape> shapes(specs.begin(), specs.end());
  out.mixed_hnc_shapes = shapes.size() > 1;
  if (out.mixed_hnc_shapes) {
    std::erase_if(out.candidates, [](KVCacheLayout l) { return !is_block_compact(l); });
    if (out.candidates.empty())
      throw ValueError(fmt::format("Specs with mixed HNC shapes need a block-compact layout, but none is in every "
                                   "supported set: {}.",
                                   nested_repr(supported_layouts)));
  }

  if (inputs.requested) {
    const KVCacheLayout wanted = layout_from_name(*inputs.requested);
    if (!contains(out.candidates, wanted))
      throw ValueError(fmt::format("VLLM_KV_CACHE_LAYOUT={} does not satisfy every supported set; valid layouts: {}.",
                                   *inputs.requested, layout_names_repr(out.candidates)));
    out.layout = wanted;
    out.decided_by = "requested";
  } else if (inputs.connector_layout) {
    const KVCacheLayout wanted = layout_from_name(*inputs.connector_layout);
    if (contains(out.candidates, wanted)) {
      out.layout = wanted;
      out.decided_by = "connector";
    } else {
      out.layout = out.candidates.front();
      out.decided_by = "first candidate";
      const std::string text =
          fmt::format("KV connector cache layout {} does not satisfy every supported set; valid layouts: {}. Using {} "
                      "instead.",
                      *inputs.connector_layout, layout_names_repr(out.candidates), layout_name(out.layout));
      out.logs.push_back({LogLine::Level::warning, text});
      log::warning_once(text);
    }
  } else {
    out.layout = out.candidates.front();
    out.decided_by = "first candidate";
  }
  const std::string info = fmt::format("Using {} KV cache layout.", layout_name(out.layout));
  out.logs.push_back({LogLine::Level::info, info});
  log::info_once(info);
  return out;
}

}  // namespace attnsel
