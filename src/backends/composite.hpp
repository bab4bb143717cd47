// Internal: vLLM's create_composite_attention_backend (vllm/v1/attention/backends/composite.py):
// one backend made of a general child (variant 0, serves image masks) and a causal child
// (variant 1), sharing one KV cache, routed per batch by MMPrefixAttentionRouting.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnsel/backend.hpp"

namespace attnsel::backends {

struct CompositeOptions {
  std::string backend_name;         ///< get_name(), e.g. "TRITON_FLASHINFER"
  std::string qualname;             ///< the class's qualified name
  std::vector<int> head_sizes = {};  ///< empty = the children decide
  std::vector<int> kernel_block_sizes = {};  ///< empty = the intersection of the children's
  std::optional<int> device_major = std::nullopt;  ///< nullopt = any major the children accept
};

/// Thread-safety: immutable after construction.
class CompositeAttentionBackend : public AttentionBackend {
 public:
  /// Returns `general` itself when both children are the same class; throws ValueError
  /// "Composite backends require separate KV cache updates" when either child writes the
  /// KV cache inside its forward.
  static std::shared_ptr<const AttentionBackend> create(std::shared_ptr<const AttentionBackend> general,
                                                        std::shared_ptr<const AttentionBackend> causal,
                                                        CompositeOptions options);

  const AttentionBackend& general() const { return *general_; }
  const AttentionBackend& causal() const { return *causal_; }

  std::string get_name() const override { return options_.backend_name; }
  std::string qualname() const override { return options_.qualname; }
  bool forward_includes_kv_cache_update() const override { return false; }
  std::vector<DType> supported_dtypes(const RuntimeEnv& env) const override;
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv& env) const override;
  bool supports_kv_cache_dtype(const std::optional<std::string>& d, const RuntimeEnv& env) const override;
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv& env) const override;
  bool supports_block_size(std::optional<int> block_size, const RuntimeEnv& env) const override;
  std::vector<int> get_supported_head_sizes(const RuntimeEnv& env) const override;
  bool supports_head_size(int head_size, const RuntimeEnv& env) const override;
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv& env) const override;
  bool supports_mm_prefix(const RuntimeEnv& env) const override;
  bool supports_sliding_window(const RuntimeEnv& env) const override;
  bool supports_rswa(const RuntimeEnv& env) const override;
  bool supports_pcp() const override { return false; }
  bool supports_dcp() const override { return false; }
  bool supports_device_cpu_query_lens_mismatch() const override { return false; }
  std::optional<std::string> supports_combination(const CombinationArgs& args, const RuntimeEnv& env) const override;
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv& env) const override;

  CompositeAttentionBackend(std::shared_ptr<const AttentionBackend> general,
                            std::shared_ptr<const AttentionBackend> causal, CompositeOptions options);

 private:
  /// MMPrefixAttentionRouting.variant_uses_mm_prefix: image masks go to variant 0.
  static bool variant_uses_mm_prefix(int variant) { return variant == 0; }

  std::shared_ptr<const AttentionBackend> general_;
  std::shared_ptr<const AttentionBackend> causal_;
  CompositeOptions options_;
};

/// vLLM's _intersect_kernel_block_sizes: MultipleOf∩MultipleOf = MultipleOf(lcm),
/// int∩MultipleOf = the int if divisible, int∩int = equal ints; first occurrence order.
std::vector<KernelBlockSize> intersect_kernel_block_sizes(const std::vector<KernelBlockSize>& first,
                                                          const std::vector<KernelBlockSize>& second);

/// vLLM's get_supported_kv_cache_layouts(backends) (vllm/v1/attention/backends/utils.py). Throws ValueError
/// "No KV cache layout satisfies every supported set: [...]." when the sets are disjoint.
std::vector<KVCacheLayout> get_supported_kv_cache_layouts(const std::vector<const AttentionBackend*>& backends,
                                                          const RuntimeEnv& env);

}  // namespace attnsel::backends
