#include "platforms/rocm_aiter.hpp"

namespace attnsel::platforms {

bool is_aiter_found_and_supported(const RuntimeEnv& env) {
  return env.device.kind == PlatformKind::rocm && env.device.arch.starts_with("gfx9") &&
         env.facts.get_bool("rocm.aiter_found");
}

bool is_aiter_switch_enabled(const RuntimeEnv& env, std::string_view sub_switch) {
  return is_aiter_found_and_supported(env) && env.facts.get_bool("rocm.use_aiter") && env.facts.get_bool(sub_switch);
}

}  // namespace attnsel::platforms
