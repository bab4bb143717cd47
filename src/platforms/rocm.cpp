// vLLM's ROCm platform chooser (vllm/platforms/rocm.py): AITER switches, the two paths,
// and the TurboQuant boundary rule.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "platforms/platforms.hpp"
#include "platforms/rocm_aiter.hpp"
#include "platforms/walk.hpp"

namespace attnsel::platforms {

namespace {
bool is_turboquant(CacheDType d) { return cache_dtype_name(d).starts_with("turboquant_"); }

bool shares_layout(const std::optional<std::vector<KVCacheLayout>>& a, const std::optional<std::vector<KVCacheLayout>>& b) {
  if (!a || !b) return true;  // "any layout" shares with everything
  return std::any_of(a->begin(), a->end(), [&](KVCacheLayout l) { return std::find(b->begin(), b->end(), l) != b->end(); });
}
}  // namespace

std::vector<BackendMember> RocmPlatform::backend_priorities(const AttentionSelectorConfig& c,
                                                            std::optional<int>) const {
  if (c.use_sparse) return {member("ROCM_AITER_MLA_SPARSE")};
  if (c.use_mla) {
    if (is_aiter_switch_enabled(env_, "rocm.use_aiter_mla"))
      return {member("ROCM_AITER_MLA"), member("TRITON_MLA"), member("ROCM_AITER_TRITON_MLA")};
    return {member("TRITON_MLA")};
  }
  std::vector<BackendMember> list{member("ROCM_ATTN")};
  if (is_aiter_switch_enabled(env_, "rocm.use_aiter_mha")) list.push_back(member("ROCM_AITER_FA"));
  if (is_aiter_found_and_supported(env_)) list.push_back(member("ROCM_AITER_UNIFIED_ATTN"));
  list.push_back(member("TRITON_ATTN"));
  list.push_back(member("TURBOQUANT"));
  return list;
}

Selection RocmPlatform::get_attn_backend_cls(const std::optional<BackendMember>& selected,
                                             const AttentionSelectorConfig& config, std::optional<int> num_heads,
                                             CacheDType run_cache_dtype) const {
  Selection s;
  // A layer with a TurboQuant cache: an explicit choice that cannot serve it gives way to
  // the automatic walk, whose last entry is TURBOQUANT (vLLM's
  // test_turboquant_boundary_layers_share_a_layout expects TURBOQUANT with ROCM_ATTN or
  // ROCM_AITER_FA requested); an invalid explicit TURBOQUANT still raises.
  const bool turboquant_layer = config.kv_cache_dtype && is_turboquant(*config.kv_cache_dtype);
  // In a TurboQuant run, the boundary layers that keep the native dtype must share a KV
  // layout with TURBOQUANT, whatever backend was requested (see docs/DECISIONS.md).
  const bool boundary_layer = !turboquant_layer && is_turboquant(run_cache_dtype) && !config.use_mla;
  std::optional<std::vector<KVCacheLayout>> turboquant_layouts;
  if (boundary_layer) turboquant_layouts = member("TURBOQUANT").get_attention_class()->supported_kv_cache_layouts(env_);

  std::optional<std::string> overridden;  // an explicit choice the walk replaces
  if (selected) {
    Checked checked = check_backend(*selected, config);
    const bool requested_turboquant = selected->name() == "TURBOQUANT";
    if (!(boundary_layer && requested_turboquant)) {
      s.candidates.push_back({selected->name(), 0, checked.reasons.empty(), checked.reasons});
      if (!checked.reasons.empty()) {
        if (!turboquant_layer || requested_turboquant)
          throw_selected_invalid(*selected, checked.reasons, std::move(s.candidates));
        overridden = selected->name();
      } else if (!boundary_layer || shares_layout(checked.cls->supported_kv_cache_layouts(env_), turboquant_layouts)) {
        accept_backend(s, selected->name(), checked.cls);
        s.explicit_choice = true;
        add_log(s, LogLine::Level::info,
                fmt::format("Using {} backend (selected via --attention-backend).", s.backend));
        return s;
      }
      s.candidates.clear();
    }
  }

  ExtraCheck layout_rule;
  if (boundary_layer)
    layout_rule = [&](const BackendMember& member, Checked& checked) {
      if (!checked.cls || member.name() == "TURBOQUANT") return;
      if (!shares_layout(checked.cls->supported_kv_cache_layouts(env_), turboquant_layouts))
        checked.reasons.emplace_back("KV cache layout not shared with TURBOQUANT (TurboQuant boundary layer)");
    };
  choose_by_priority(s, backend_priorities(config, num_heads), config, layout_rule);

  // vLLM's two closing lines; an explicit choice the walk replaced is named among the
  // incompatible backends.
  std::vector<std::string> rejected;
  if (overridden) rejected.push_back(*overridden);
  for (const Candidate& c : s.candidates)
    if (!c.valid && std::find(rejected.begin(), rejected.end(), c.backend) == rejected.end())
      rejected.push_back(c.backend);
  if (!rejected.empty())
    add_log(s, LogLine::Level::info,
            fmt::format("Found incompatible backend(s) [{}] with {}. Overriding with {} out of potential backends: {}.",
                        fmt::join(rejected, ", "), attn_type_name(config.attn_type), s.backend,
                        valid_names_str(s.candidates)),
            false);
  else
    add_log(s, LogLine::Level::info,
            fmt::format("Using {} backend out of potential backends: {}.", s.backend, valid_names_str(s.candidates)));
  return s;
}

}  // namespace attnsel::platforms
