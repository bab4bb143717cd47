// Internal: small helpers shared by the capability records of the built-in backends.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/backend.hpp"

namespace attnsel::backends {

inline const std::vector<DType> kHalfDTypes = {DType::float16, DType::bfloat16};
inline const std::vector<DType> kHalfAndFloatDTypes = {DType::float16, DType::bfloat16, DType::float32};
/// The KV-cache dtypes of the backends that store 16-bit caches and every FP8 format (the ROCm ones).
inline const std::vector<CacheDType> kHalfAndFp8KvDTypes = {
    CacheDType::auto_, CacheDType::float16, CacheDType::bfloat16, CacheDType::fp8, CacheDType::fp8_e4m3,
    CacheDType::fp8_e5m2};
/// The KV-cache dtypes of the dense MLA backends that take FP8 caches.
inline const std::vector<CacheDType> kMlaFp8KvDTypes = {CacheDType::auto_, CacheDType::float16, CacheDType::bfloat16,
                                                        CacheDType::fp8, CacheDType::fp8_e4m3};
/// The sparse CUDA kernels gather whole blocks of one layer's latents: block-outermost pages.
inline const std::vector<KVCacheLayout> kBlockOuterLayouts = {KVCacheLayout::BLHNC};
inline const std::vector<AttentionType> kAllAttnTypes = {AttentionType::decoder, AttentionType::encoder,
                                                         AttentionType::encoder_only, AttentionType::encoder_decoder};

template <class T, class U>
bool contains(const std::vector<T>& list, const U& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

/// Compute-capability rules for CUDA backends. A device without a CUDA capability (ROCm,
/// XPU, CPU) never satisfies a CUDA range: the Python comparison would not even be reached
/// there because those platforms never list these backends.
inline bool cap_at_least(const std::optional<DeviceCapability>& cap, int major, int minor) {
  return cap && *cap >= DeviceCapability{major, minor};
}
inline bool cap_major_in(const std::optional<DeviceCapability>& cap, std::initializer_list<int> majors) {
  return cap && std::find(majors.begin(), majors.end(), cap->major) != majors.end();
}
/// supports_compute_capability() as "the major is one of these".
inline auto majors(std::initializer_list<int> list) {
  return [v = std::vector<int>(list)](const std::optional<DeviceCapability>& cap) {
    return cap && std::find(v.begin(), v.end(), cap->major) != v.end();
  };
}
/// A rule that does not depend on its argument (decided from the environment up front).
inline auto always(bool answer) {
  return [answer](const std::optional<DeviceCapability>&) { return answer; };
}

/// vLLM's MLACommonBackend (vllm/v1/attention/backends/mla/common.py): every MLA backend
/// derives from it; MLA impls opt into PCP.
inline BackendCapabilities mla_common_capabilities() {
  BackendCapabilities c;
  c.mla = true;
  c.pcp = true;
  /// The latent (kv_lora_rank + rope) sizes of DeepSeek-style models: 576, and 320 for the small variants.
  c.head_sizes = {320, 576};
  return c;
}
/// The dense MLA backends opt into DCP.
inline BackendCapabilities dense_mla_capabilities() {
  BackendCapabilities c = mla_common_capabilities();
  c.dcp = true;
  return c;
}
/// The sparse (indexer + top-k) MLA backends.
inline BackendCapabilities sparse_mla_capabilities() {
  BackendCapabilities c = mla_common_capabilities();
  c.sparse = true;
  return c;
}

}  // namespace attnsel::backends
