// Internal: a backend declared by a plugin, as an AttentionBackend the registry can hold
// (the adapter between the C declaration and the C++ capability interface).
#pragma once

#include <memory>
#include <string>

#include "attnsel/backend.hpp"
#include "plugin/declaration.hpp"
#include "plugin/library.hpp"

namespace attnsel::plugin {

/// Thread-safety: immutable; every method may be called from any thread (the plugin's
/// callbacks must allow that, as plugin.h states).
class PluginBackend final : public AttentionBackend {
 public:
  /// `library` keeps the plugin's code loaded for as long as this object (or any kernel
  /// instance it makes) lives.
  PluginBackend(std::shared_ptr<const SharedLibrary> library, std::string qualname, BackendDeclaration declaration);

  std::string get_name() const override { return decl_.name; }
  std::string qualname() const override { return qualname_; }
  const BackendDeclaration& declaration() const { return decl_; }

  bool has_kernel() const override { return decl_.kernel != nullptr; }
  std::string missing_kernel_reason() const override;
  std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const override;

  std::vector<DType> supported_dtypes(const RuntimeEnv&) const override { return decl_.dtypes; }
  std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv&) const override { return decl_.kv_cache_dtypes; }
  bool forward_includes_kv_cache_update() const override { return decl_.has(ATTNSEL_FEATURE_FORWARD_UPDATES_KV); }
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv&) const override {
    return decl_.block_sizes;
  }
  std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const override { return decl_.head_sizes; }

  bool is_mla() const override { return decl_.has(ATTNSEL_FEATURE_MLA); }
  bool is_sparse() const override { return decl_.has(ATTNSEL_FEATURE_SPARSE); }
  bool supports_sink(const RuntimeEnv&) const override { return decl_.has(ATTNSEL_FEATURE_SINK); }
  bool supports_alibi_sqrt() const override { return decl_.has(ATTNSEL_FEATURE_ALIBI_SQRT); }
  bool supports_mm_prefix(const RuntimeEnv&) const override { return decl_.has(ATTNSEL_FEATURE_MM_PREFIX); }
  bool supports_per_head_quant_scales(const RuntimeEnv&) const override {
    return decl_.has(ATTNSEL_FEATURE_PER_HEAD_QUANT_SCALES);
  }
  bool supports_sliding_window(const RuntimeEnv&) const override { return decl_.has(ATTNSEL_FEATURE_SLIDING_WINDOW); }
  bool supports_non_causal(const RuntimeEnv&) const override { return decl_.has(ATTNSEL_FEATURE_NON_CAUSAL); }
  bool supports_batch_invariance(const RuntimeEnv&) const override {
    return decl_.has(ATTNSEL_FEATURE_BATCH_INVARIANT);
  }
  bool supports_kv_connector(const RuntimeEnv&) const override { return decl_.has(ATTNSEL_FEATURE_KV_CONNECTOR); }
  bool supports_device_cpu_query_lens_mismatch() const override {
    return decl_.has(ATTNSEL_FEATURE_QUERY_LENS_MISMATCH);
  }
  bool supports_pcp() const override { return decl_.has(ATTNSEL_FEATURE_PCP); }
  bool supports_dcp() const override { return decl_.has(ATTNSEL_FEATURE_DCP); }
  bool supports_non_causal_dcp() const override { return decl_.has(ATTNSEL_FEATURE_NON_CAUSAL_DCP); }
  bool supports_rswa(const RuntimeEnv&) const override { return decl_.has(ATTNSEL_FEATURE_RSWA); }
  bool supports_attn_type(AttentionType t) const override;
  bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv& env) const override;
  std::optional<std::string> supports_combination(const CombinationArgs& args, const RuntimeEnv& env) const override;
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv&) const override {
    return decl_.kv_cache_layouts;
  }

 private:
  std::shared_ptr<const SharedLibrary> library_;
  std::string qualname_;
  BackendDeclaration decl_;
};

}  // namespace attnsel::plugin
