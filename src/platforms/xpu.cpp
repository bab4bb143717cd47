// vLLM's XPU platform chooser (vllm/platforms/xpu.py): routing rules in vLLM's order, each
// route validated (XPUPlatform.get_attn_backend_cls in vllm/platforms/xpu.py).
#include <fmt/format.h>

#include <algorithm>

#include "platforms/platforms.hpp"
#include "platforms/walk.hpp"

namespace attnsel::platforms {

namespace {
// What XPU's Flash Attention kernels lack beyond FLASH_ATTN's declared capabilities.
void add_xpu_flash_attn_limits(const AttentionSelectorConfig& c, std::vector<std::string>& reasons) {
  auto add = [&](const char* r) {
    if (std::find(reasons.begin(), reasons.end(), r) == reasons.end()) reasons.emplace_back(r);
  };
  if (c.use_mm_prefix) add("multimodal prefix-LM attention not supported by Flash Attention on XPU");
  if (c.use_batch_invariant) add("batch invariance not supported");
}
}  // namespace

Selection XpuPlatform::get_attn_backend_cls(const std::optional<BackendMember>& selected,
                                            const AttentionSelectorConfig& config, std::optional<int>,
                                            CacheDType) const {
  Selection s;
  const auto is_selected = [&](std::string_view name) { return selected && selected->name() == name; };

  // Validates the routed backend; a forced route raises "Selected backend ... is not valid"
  // with the reasons, the automatic one "No valid attention backend found".
  auto route = [&](std::string_view name, const std::string& info, bool raise_as_selected) -> Selection& {
    const BackendMember member = AttentionBackendEnum[name];
    Checked checked = check_backend(member, config);
    if (name == "FLASH_ATTN") add_xpu_flash_attn_limits(config, checked.reasons);
    s.candidates.push_back({std::string(name), static_cast<int>(s.candidates.size()), checked.reasons.empty(),
                            checked.reasons});
    if (!checked.reasons.empty()) {
      if (raise_as_selected) throw_selected_invalid(member, checked.reasons, std::move(s.candidates));
      throw no_valid_backend(device_name(), config, std::move(s.candidates));
    }
    accept_backend(s, std::string(name), checked.cls);
    s.explicit_choice = is_selected(name);
    add_log(s, LogLine::Level::info, info);
    return s;
  };

  if (config.kv_cache_dtype && cache_dtype_name(*config.kv_cache_dtype).starts_with("turboquant_"))
    return route("TURBOQUANT", "Using TurboQuant attention backend.", true);
  if (config.use_sparse) return route("XPU_MLA_SPARSE", "Using XPU MLA Sparse backend.", true);
  if (config.use_mla) return route("TRITON_MLA", "Using Triton MLA backend on V1 engine.", true);
  if (is_selected("TRITON_ATTN")) return route("TRITON_ATTN", "Using Triton backend.", true);
  if (config.use_mm_prefix) {
    if (is_selected("FLASH_ATTN")) return route("FLASH_ATTN", "Using Flash Attention backend.", true);
    add_log(s, LogLine::Level::warning,
            "Flash Attention on XPU does not support multimodal prefix-LM attention. Falling back to Triton "
            "Attention backend.");
    return route("TRITON_ATTN", "Using Triton backend.", true);
  }
  if (config.dtype == DType::float32) {
    add_log(s, LogLine::Level::warning,
            "Flash Attention on XPU does not support float32 dtype. Falling back to Triton Attention backend.");
    return route("TRITON_ATTN", "Using Triton backend.", true);
  }
  if (is_selected("FLASH_ATTN")) return route("FLASH_ATTN", "Using Flash Attention backend.", true);
  if (selected)
    throw SelectionError(ErrorKind::value,
                         fmt::format("Invalid attention backend for {}, with use_mla: {}", device_name(),
                                     config.use_mla ? "True" : "False"),
                         {});
  if (config.use_batch_invariant) return route("TRITON_ATTN", "Using Triton backend.", true);

  // Automatic: Flash Attention when it validates, else Triton.
  const BackendMember fa = AttentionBackendEnum["FLASH_ATTN"];
  Checked checked = check_backend(fa, config);
  add_xpu_flash_attn_limits(config, checked.reasons);
  if (checked.reasons.empty()) return route("FLASH_ATTN", "Using Flash Attention backend.", false);
  s.candidates.push_back({"FLASH_ATTN", 0, false, checked.reasons});
  return route("TRITON_ATTN", "Using Triton backend.", false);
}

}  // namespace attnsel::platforms
