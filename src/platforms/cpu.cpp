// vLLM's CPU platform chooser (vllm/platforms/cpu.py): fixed routing with no priority list.
#include <fmt/format.h>

#include "platforms/platforms.hpp"
#include "platforms/walk.hpp"

namespace attnsel::platforms {

Selection CpuPlatform::get_attn_backend_cls(const std::optional<BackendMember>& selected,
                                            const AttentionSelectorConfig& config, std::optional<int>,
                                            CacheDType) const {
  Selection s;
  // vLLM has no sparse attention on the CPU. Runnable mode routes sparse layers to attnsel's
  // own CPU_MLA_SPARSE kernel and says so (see docs/DECISIONS.md).
  if (config.use_sparse && mode_ == SelectionMode::reference)
    throw SelectionError(ErrorKind::not_implemented, "Sparse Attention is not supported on CPU.", {});

  // MLA routes to AMX_MLA where AMX, bf16 and a block size that is a multiple of 32 allow
  // it, else to CPU_MLA (see docs/DECISIONS.md); everything else runs on CPU_ATTN.
  std::string target = "CPU_ATTN";
  if (config.use_sparse) {
    target = "CPU_MLA_SPARSE";
    add_log(s, LogLine::Level::info,
            "vLLM has no sparse attention on CPU (it raises \"Sparse Attention is not supported on CPU.\"); "
            "attnsel runs sparse layers on its own CPU_MLA_SPARSE kernel.");
  } else if (config.use_mla) {
    const bool amx_ok = env_.facts.get_bool("cpu.amx") && config.dtype == DType::bfloat16 &&
                        (!config.block_size || *config.block_size % 32 == 0);
    target = amx_ok ? "AMX_MLA" : "CPU_MLA";
  }
  // CpuPlatform.check_and_update_config: a block size the user gave that is not a multiple
  // of 32 (the platform's own is 128).
  if (config.block_size && *config.block_size % 32 != 0)
    add_log(s, LogLine::Level::warning,
            "CPU backend prefers block_size is multiples of 32, otherwise the performance is not optimized.");

  // Reference mode answers what vLLM does: it routes without validating. Runnable mode
  // validates, so a configuration the kernel cannot compute is rejected with its reasons.
  Checked checked = check_backend(AttentionBackendEnum[target], config);
  if (mode_ == SelectionMode::reference && checked.cls) checked.reasons.clear();
  // Runnable mode: where AMX_MLA cannot run (attnsel has no AMX_MLA kernel), MLA layers run
  // on CPU_MLA, with AMX_MLA's reasons listed beside it.
  if (target == "AMX_MLA" && !checked.reasons.empty()) {
    s.candidates.push_back({target, 0, false, checked.reasons});
    add_log(s, LogLine::Level::info,
            "vLLM routes MLA to AMX_MLA on this CPU, which attnsel cannot run here (see its reasons); MLA "
            "layers run on attnsel's own CPU_MLA kernel.");
    target = "CPU_MLA";
    checked = check_backend(AttentionBackendEnum[target], config);
  }
  if (selected && selected->name() != target)
    add_log(s, LogLine::Level::info, fmt::format("Cannot use {} backend on CPU.", selected->name()), false);
  s.candidates.push_back({target, static_cast<int>(s.candidates.size()), checked.reasons.empty(), checked.reasons});
  if (!checked.reasons.empty()) throw no_valid_backend(device_name(), config, std::move(s.candidates));
  accept_backend(s, target, checked.cls);
  add_log(s, LogLine::Level::info, fmt::format("Using {} backend.", target));
  return s;
}

}  // namespace attnsel::platforms
