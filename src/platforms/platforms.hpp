// Internal: the concrete platforms. Each implements vLLM's get_attn_backend_cls for its
// device; construct them through make_platform / detect_host_platform.
#pragma once

#include <memory>

#include "attnsel/platform.hpp"

namespace attnsel::platforms {

/// Platform::with_facts for a concrete platform P: a P on the same device, mode and host.
template <class P>
std::shared_ptr<Platform> copy_with_facts(const P& platform, RuntimeFacts facts) {
  auto copy = std::make_shared<P>(platform.env().device, std::move(facts), platform.mode());
  copy->host_detail = platform.host_detail;
  return copy;
}

/// NVIDIA GPUs (vllm/platforms/cuda.py).
class CudaPlatform final : public Platform {
 public:
  using Platform::Platform;
  std::shared_ptr<Platform> with_facts(RuntimeFacts facts) const override {
    return copy_with_facts(*this, std::move(facts));
  }
  Selection get_attn_backend_cls(const std::optional<BackendMember>& selected, const AttentionSelectorConfig& config,
                                 std::optional<int> num_heads, CacheDType run_cache_dtype) const override;
  std::vector<BackendMember> backend_priorities(const AttentionSelectorConfig& config,
                                                std::optional<int> num_heads) const override;

 private:
  void walk_priorities(Selection& s, const AttentionSelectorConfig& config, std::optional<int> num_heads) const;
};

/// AMD GPUs (vllm/platforms/rocm.py), with the AITER switches as facts.
class RocmPlatform final : public Platform {
 public:
  using Platform::Platform;
  std::shared_ptr<Platform> with_facts(RuntimeFacts facts) const override {
    return copy_with_facts(*this, std::move(facts));
  }
  Selection get_attn_backend_cls(const std::optional<BackendMember>& selected, const AttentionSelectorConfig& config,
                                 std::optional<int> num_heads, CacheDType run_cache_dtype) const override;
  std::vector<BackendMember> backend_priorities(const AttentionSelectorConfig& config,
                                                std::optional<int> num_heads) const override;
};

/// The CPU (vllm/platforms/cpu.py): fixed routing, no priority list.
class CpuPlatform final : public Platform {
 public:
  using Platform::Platform;
  std::shared_ptr<Platform> with_facts(RuntimeFacts facts) const override {
    return copy_with_facts(*this, std::move(facts));
  }
  Selection get_attn_backend_cls(const std::optional<BackendMember>& selected, const AttentionSelectorConfig& config,
                                 std::optional<int> num_heads, CacheDType run_cache_dtype) const override;
  std::optional<int> default_block_size() const override { return 128; }
};

/// Intel GPUs (vllm/platforms/xpu.py): routing rules, each route validated.
class XpuPlatform final : public Platform {
 public:
  using Platform::Platform;
  std::shared_ptr<Platform> with_facts(RuntimeFacts facts) const override {
    return copy_with_facts(*this, std::move(facts));
  }
  Selection get_attn_backend_cls(const std::optional<BackendMember>& selected, const AttentionSelectorConfig& config,
                                 std::optional<int> num_heads, CacheDType run_cache_dtype) const override;
};

/// An out-of-tree platform that does not override get_attn_backend_cls (vLLM's base
/// Platform): every selection fails with "Invalid attention backend for <device>".
class OtherPlatform final : public Platform {
 public:
  using Platform::Platform;
  std::shared_ptr<Platform> with_facts(RuntimeFacts facts) const override {
    return copy_with_facts(*this, std::move(facts));
  }
  Selection get_attn_backend_cls(const std::optional<BackendMember>& selected, const AttentionSelectorConfig& config,
                                 std::optional<int> num_heads, CacheDType run_cache_dtype) const override;
};

}  // namespace attnsel::platforms
