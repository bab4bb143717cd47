// The documented runtime facts and their per-platform defaults (vLLM's defaults).
#include <array>

#include "attnsel/facts.hpp"

namespace attnsel {

namespace {
bool is_cuda(const DeviceDescription& d) { return d.kind == PlatformKind::cuda; }

const std::array<FactDefinition, 1> kFacts = {{
    {"flash_attn_version", "int",
     "AttentionConfig.flash_attn_version: 0 = auto (FA3 on SM 9.x, FA4 on SM >= 10 except 12.x, FA2 otherwise), "
     "or 2, 3, 4 to force one",
     [](const DeviceDescription&) -> FactValue { return std::int64_t{0}; }},
}};
}  // namespace

std::span<const FactDefinition> fact_definitions() {
  (void)is_cuda;
  return kFacts;
}

}  // namespace attnsel
