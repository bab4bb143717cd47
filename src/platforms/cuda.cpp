// vLLM's CUDA platform chooser (vllm/platforms/cuda.py): priority lists per compute
// capability, the explicit path, the automatic walk, the block-size warning.
#include "platforms/platforms.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "platforms/walk.hpp"

namespace attnsel::platforms {

std::vector<BackendMember> CudaPlatform::backend_priorities(const AttentionSelectorConfig& c,
                                                            std::optional<int> num_heads) const {
  const int major = env_.device.capability ? env_.device.capability->major : 0;
  std::vector<BackendMember> list;
  if (c.use_mla) {
    if (major == 10) {
      for (auto n : {"FLASHINFER_MLA", "TOKENSPEED_MLA", "CUTLASS_MLA", "FLASH_ATTN_MLA", "FLASHMLA", "TRITON_MLA"})
        list.push_back(member(n));
      // Sparse tail: FlashInfer first for quantized caches (fp8) and for few heads
      // (FlashMLA pads heads to 64).
      const bool quantized = c.kv_cache_dtype && is_quantized_kv_cache(*c.kv_cache_dtype);
      const bool few_heads = num_heads && *num_heads <= 16;
      if (quantized || few_heads) {
        list.push_back(member("FLASHINFER_MLA_SPARSE"));
        list.push_back(member("FLASHMLA_SPARSE"));
      } else {
        list.push_back(member("FLASHMLA_SPARSE"));
        list.push_back(member("FLASHINFER_MLA_SPARSE"));
      }
    } else if (major == 12) {
      list = {member("TRITON_MLA"), member("FLASHINFER_MLA_SPARSE_SM120")};
    } else {
      for (auto n : {"FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA", "FLASH_ATTN_MLA_SPARSE",
                     "FLASHMLA_SPARSE"})
        list.push_back(member(n));
    }
    return list;
  }
  if (major == 10 && !c.use_non_causal) {
    // FlashInfer's non-causal cutlass path on SM100 has known problems: non-causal prefers FA.
    if (c.use_mm_prefix) list.push_back(member("TRITON_FLASHINFER"));
    for (auto n : {"FLASHINFER", "FLASH_ATTN", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"})
      list.push_back(member(n));
  } else {
    if (major == 9 && c.use_mm_prefix) list.push_back(member("TRITON_FLASH_ATTN"));
    for (auto n : {"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"})
      list.push_back(member(n));
  }
  return list;
}

Selection CudaPlatform::get_attn_backend_cls(const std::optional<BackendMember>& selected,
                                             const AttentionSelectorConfig& config, std::optional<int> num_heads,
                                             CacheDType) const {
  Selection s;
  if (selected) {
    Checked checked = check_backend(*selected, config);
    s.candidates.push_back({selected->name(), 0, checked.reasons.empty(), checked.reasons});
    if (!checked.reasons.empty()) throw_selected_invalid(*selected, checked.reasons, std::move(s.candidates));
    accept_backend(s, selected->name(), checked.cls);
    s.explicit_choice = true;
    add_log(s, LogLine::Level::info, fmt::format("Using {} backend.", s.backend), false);
    return s;
  }
  walk_priorities(s, config, num_heads);
  return s;
}

void CudaPlatform::walk_priorities(Selection& s, const AttentionSelectorConfig& config,
                                   std::optional<int> num_heads) const {
  choose_by_priority(s, backend_priorities(config, num_heads), config);
  const auto index = static_cast<std::size_t>(*s.priority);
  if (config.block_size) {
    std::vector<std::string> precluded;
    for (std::size_t i = 0; i < index; ++i)
      if (s.candidates[i].reasons == std::vector<std::string>{"block_size not supported"})
        precluded.push_back(s.candidates[i].backend);
    if (!precluded.empty())
      add_log(s, LogLine::Level::warning,
              fmt::format("--block-size {} precluded higher-priority backend(s) {}. Using {} instead, which may "
                          "result in reduced performance. Consider removing --block-size to auto-select the "
                          "optimal block size.",
                          *config.block_size, fmt::join(precluded, ", "), s.backend),
              false);
  }
  add_log(s, LogLine::Level::info,
          fmt::format("Using {} attention backend out of potential backends: {}.", s.backend,
                      valid_names_str(s.candidates)));
}

}  // namespace attnsel::platforms
