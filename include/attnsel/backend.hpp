// The backend capability interface (vLLM's AttentionBackend classmethods).
//
// A backend "class" is one immutable object registered in the class table under its
// qualified name. Capabilities are data; validate_configuration runs every check and
// returns all reasons, in vLLM's order and with vLLM's strings.
//
// Thread-safety: backend objects are immutable after registration; every const method
// may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnsel/export.hpp"
#include "attnsel/facts.hpp"
#include "attnsel/kv_cache_layout.hpp"
#include "attnsel/selector_config.hpp"
#include "attnsel/types.hpp"

namespace attnsel {

namespace kernel {
class AttentionImpl;
struct LayerParams;
struct KernelInfo;
enum class ScalarType : std::uint8_t;
}  // namespace kernel

/// Common root of attention and Mamba backend classes (what the class table holds).
class ATTNSEL_API BackendClass {
 public:
  virtual ~BackendClass() = default;
  /// The backend's name, e.g. "FLASH_ATTN" (vLLM's get_name()).
  virtual std::string get_name() const = 0;
  /// The class's qualified name, e.g. "attnsel::backends::FlashAttentionBackend"
  /// (vLLM's full_cls_name()).
  virtual std::string qualname() const = 0;
  virtual bool is_ssm() const { return false; }
};

/// A Mamba-like layer's backend (vLLM's MambaAttentionBackendEnum classes).
class ATTNSEL_API MambaBackend : public BackendClass {
 public:
  bool is_ssm() const override { return true; }
  virtual bool supports_batch_invariance() const { return false; }
};

class ATTNSEL_API AttentionBackend : public BackendClass {
 public:
  // --- kernel (vLLM's get_impl_cls) -------------------------------------------------
  /// True when this build contains a kernel for the backend on this machine.
  virtual bool has_kernel() const { return false; }
  /// Why there is no kernel here (used as the ImportError text in runnable mode).
  virtual std::string missing_kernel_reason() const;
  /// Configurations the backend declares but its kernel does not yet compute: each
  /// returned string is a rejection reason in runnable mode. Empty = fully covered.
  virtual std::vector<std::string> kernel_gaps(const AttentionSelectorConfig& config, const RuntimeEnv& env) const;
  /// Builds the kernel implementation; throws NotImplementedError when there is none.
  virtual std::unique_ptr<kernel::AttentionImpl> make_impl(const kernel::LayerParams& params) const;
  /// What the kernel needs and offers (device, ISA, graph support, layout) for layers of
  /// `dtype` with `kv_cache_dtype`: callers ask this instead of matching backend names.
  /// The default: available when has_kernel(), host memory, no graphs, no preference.
  virtual kernel::KernelInfo kernel_info(kernel::ScalarType dtype, const std::string& kv_cache_dtype) const;

  // --- capabilities, with vLLM's defaults -------------------------------------------
  virtual std::vector<DType> supported_dtypes(const RuntimeEnv& env) const;
  virtual std::vector<std::string> supported_kv_cache_dtypes(const RuntimeEnv& env) const;
  virtual bool forward_includes_kv_cache_update() const { return true; }
  virtual std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv& env) const;
  virtual std::vector<int> get_supported_head_sizes(const RuntimeEnv&) const { return {}; }

  bool supports_dtype(DType d, const RuntimeEnv& env) const;
  virtual bool supports_kv_cache_dtype(const std::optional<std::string>& d, const RuntimeEnv& env) const;
  virtual bool supports_block_size(std::optional<int> block_size, const RuntimeEnv& env) const;
  virtual int get_preferred_block_size(int default_block_size, const RuntimeEnv& env) const;
  virtual bool supports_head_size(int head_size, const RuntimeEnv& env) const;

  virtual bool is_mla() const { return false; }
  virtual bool is_sparse() const { return false; }
  virtual bool supports_sink(const RuntimeEnv&) const { return false; }
  virtual bool supports_alibi_sqrt() const { return false; }
  virtual bool supports_mm_prefix(const RuntimeEnv&) const { return false; }
  virtual bool supports_per_head_quant_scales(const RuntimeEnv&) const { return false; }
  virtual bool supports_sliding_window(const RuntimeEnv&) const { return false; }
  virtual bool supports_non_causal(const RuntimeEnv&) const { return false; }
  virtual bool supports_batch_invariance(const RuntimeEnv&) const { return false; }
  virtual bool supports_kv_connector(const RuntimeEnv&) const { return true; }
  virtual bool supports_device_cpu_query_lens_mismatch() const { return !is_ssm(); }
  /// vLLM derives PCP/DCP from the impl class; MLA impls opt into PCP. DCP is opt-in
  /// (see docs/DECISIONS.md).
  virtual bool supports_pcp() const { return is_mla(); }
  virtual bool supports_dcp() const { return false; }
  virtual bool supports_non_causal_dcp() const { return false; }
  /// R-SWA (Reference Sliding Window Attention), decided by the base class: no backend
  /// declares it yet, so a layer that needs it finds no backend.
  virtual bool supports_rswa(const RuntimeEnv&) const { return false; }
  virtual bool supports_attn_type(AttentionType t) const { return t == AttentionType::decoder; }
  virtual bool supports_compute_capability(const std::optional<DeviceCapability>& cap, const RuntimeEnv& env) const;
  /// A backend-specific joint rule: a reason string, or nullopt when the combination works.
  virtual std::optional<std::string> supports_combination(const CombinationArgs& args, const RuntimeEnv& env) const;
  /// Most preferred first; nullopt = any layout, no preference.
  virtual std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv& env) const;

  /// Every failing check, in vLLM's order. Empty = valid.
  virtual std::vector<std::string> validate_configuration(const AttentionSelectorConfig& config,
                                                          const RuntimeEnv& env) const;
};

}  // namespace attnsel
