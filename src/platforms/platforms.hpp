// Internal: the concrete platforms. Each implements vLLM's get_attn_backend_cls for its
// device; construct them through make_platform / detect_host_platform.
#pragma once

#include <memory>

#include "attnsel/platform.hpp"

namespace attnsel::platforms {

/// What every concrete platform P shares: Platform's constructor, and with_facts giving a P
/// on the same device, mode and host.
template <class P>
class PlatformOf : public Platform {
 public:
  using Platform::Platform;
  std::shared_ptr<Platform> with_facts(RuntimeFacts facts) const override {
    auto copy = std::make_shared<P>(env().device, std::move(facts), mode());
    copy->host_detail = host_detail;
    return copy;
  }
};

/// NVIDIA GPUs (vllm/platforms/cuda.py).
class CudaPlatform final : public PlatformOf<CudaPlatform> {
 public:
  using PlatformOf::PlatformOf;
  Selection get_attn_backend_cls(const std::optional<BackendMember>& selected, const AttentionSelectorConfig& config,
                                 std::optional<int> num_heads, CacheDType run_cache_dtype) const override;
  std::vector<BackendMember> backend_priorities(const AttentionSelectorConfig& config,
                                                std::optional<int> num_heads) const override;

 private:
  void walk_priorities(Selection& s, const AttentionSelectorConfig& config, std::optional<int> num_heads) const;
};

/// AMD GPUs (vllm/platforms/rocm.py), with the AITER switches as facts.
class RocmPlatform final : public PlatformOf<RocmPlatform> {
 public:
  using PlatformOf::PlatformOf;
  Selection get_attn_backend_cls(const std::optional<BackendMember>& selected, const AttentionSelectorConfig& config,
                                 std::optional<int> num_heads, CacheDType run_cache_dtype) const override;
  std::vector<BackendMember> backend_priorities(const AttentionSelectorConfig& config,
                                                std::optional<int> num_heads) const override;
};

/// The CPU (vllm/platforms/cpu.py): fixed routing, no priority list.
class CpuPlatform final : public PlatformOf<CpuPlatform> {
 public:
  using PlatformOf::PlatformOf;
  Selection get_attn_backend_cls(const std::optional<BackendMember>& selected, const AttentionSelectorConfig& config,
                                 std::optional<int> num_heads, CacheDType run_cache_dtype) const override;
  std::optional<int> default_block_size() const override { return 128; }
};

/// Intel GPUs (vllm/platforms/xpu.py): routing rules, each route validated.
class XpuPlatform final : public PlatformOf<XpuPlatform> {
 public:
  using PlatformOf::PlatformOf;
  Selection get_attn_backend_cls(const std::optional<BackendMember>& selected, const AttentionSelectorConfig& config,
                                 std::optional<int> num_heads, CacheDType run_cache_dtype) const override;
};

/// An out-of-tree platform that does not override get_attn_backend_cls (vLLM's base
/// Platform): every selection fails with "Invalid attention backend for <device>".
class OtherPlatform final : public PlatformOf<OtherPlatform> {
 public:
  using PlatformOf::PlatformOf;
  Selection get_attn_backend_cls(const std::optional<BackendMember>& selected, const AttentionSelectorConfig& config,
                                 std::optional<int> num_heads, CacheDType run_cache_dtype) const override;
};

}  // namespace attnsel::platforms
