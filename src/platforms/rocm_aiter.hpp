// Internal: vLLM's AITER gates (vllm/_aiter_ops.py), the one rule the ROCm chooser and the
// ROCm backends share.
#pragma once

#include <string_view>

#include "attnsel/facts.hpp"

namespace attnsel::platforms {

/// is_aiter_found_and_supported(): ROCm, a gfx9 device, and the aiter package importable.
bool is_aiter_found_and_supported(const RuntimeEnv& env);
/// rocm_aiter_ops.is_*_enabled() (e.g. is_mha_enabled, is_mla_enabled): the sub-switch AND-ed
/// with the VLLM_ROCM_USE_AITER master switch. Each carries @if_aiter_supported, which returns
/// None (false) unless is_aiter_found_and_supported() holds.
bool is_aiter_switch_enabled(const RuntimeEnv& env, std::string_view sub_switch);

}  // namespace attnsel::platforms
