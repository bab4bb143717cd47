// Internal: small helpers shared by the capability declarations of the built-in backends.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/backend.hpp"

namespace attnsel::backends {

using StringList = std::vector<std::string>;

inline const std::vector<DType> kHalfDTypes = {DType::float16, DType::bfloat16};
inline const std::vector<DType> kHalfAndFloatDTypes = {DType::float16, DType::bfloat16, DType::float32};

template <class T, class U>
bool contains(const std::vector<T>& list, const U& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

/// Compute-capability predicates for CUDA backends. A device without a CUDA capability
/// (ROCm, XPU, CPU) never satisfies a CUDA range: the Python comparison would not even be
/// reached there because those platforms never list these backends.
inline bool cap_at_least(const std::optional<DeviceCapability>& cap, int major, int minor) {
  return cap && *cap >= DeviceCapability{major, minor};
}
inline bool cap_major_in(const std::optional<DeviceCapability>& cap, std::initializer_list<int> majors) {
  return cap && std::find(majors.begin(), majors.end(), cap->major) != majors.end();
}

/// vLLM's MLACommonBackend: every MLA backend derives from it.
class MLACommonBackend : public AttentionBackend {
 public:
  bool is_mla() const override { return true; }
  /// The latent (kv_lora_rank + rope) sizes of DeepSeek-style models: 576, and 320 for the small variants.
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return {320, 576}; }
};

}  // namespace attnsel::backends
