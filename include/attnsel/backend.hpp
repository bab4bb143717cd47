// Layer: core (src/layers.txt)
// The backend capability interface (vLLM's AttentionBackend classmethods).
//
// A backend "class" is one immutable object registered in the class table under its
// qualified name. Capabilities are data (attnsel/capabilities.hpp); validate_configuration
// runs every check of one table (attnsel/capability_checks.hpp) and returns all reasons,
// in vLLM's order and with vLLM's strings.
//
// Thread-safety: backend objects are immutable after registration; every const method
// may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnsel/capabilities.hpp"
#include "attnsel/export.hpp"
#include "attnsel/facts.hpp"
#include "attnsel/kv_cache_layout.hpp"
#include "attnsel/selector_config.hpp"
#include "attnsel/types.hpp"

namespace attnsel {

namespace kernel {
class AttentionImpl;
class MlaImpl;
class SparseMlaImpl;
class IndexerImpl;
struct LayerParams;
struct MlaLayerParams;
struct SparseMlaLayerParams;
struct IndexerLayerParams;
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

/// An attention backend class: a name, a capability record per runtime environment, and
/// optionally a kernel. Everything a selection checks is in the record (capabilities());
/// the table of checks (attnsel/capability_checks.hpp) decides what it means.
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
  /// Builds an MLA backend's kernel implementation for one layer (attnsel/mla.hpp); throws
  /// NotImplementedError when there is none.
  virtual std::unique_ptr<kernel::MlaImpl> make_mla_impl(const kernel::MlaLayerParams& params) const;
  /// Builds a sparse MLA backend's attention kernel for one layer (attnsel/sparse_mla.hpp);
  /// throws NotImplementedError when there is none.
  virtual std::unique_ptr<kernel::SparseMlaImpl> make_sparse_mla_impl(const kernel::SparseMlaLayerParams& params) const;
  /// Builds an indexer backend's kernel (DeepSeek-V3.2's lightning indexer, attnsel/sparse_mla.hpp)
  /// for one layer; throws NotImplementedError when there is none.
  virtual std::unique_ptr<kernel::IndexerImpl> make_indexer_impl(const kernel::IndexerLayerParams& params) const;
  /// What the kernel needs and offers (device, ISA, graph support, layout) for layers of
  /// `dtype` with `kv_cache_dtype`: callers ask this instead of matching backend names.
  /// The default: available when has_kernel(), host memory, no graphs, no preference.
  virtual kernel::KernelInfo kernel_info(kernel::ScalarType dtype, CacheDType kv_cache_dtype) const;

  // --- capabilities -----------------------------------------------------------------
  /// The capability record on `env`: vLLM's class attributes and classmethods, evaluated.
  /// The default is vLLM's AttentionBackend base class. The record may refer to `env`.
  virtual BackendCapabilities capabilities(const RuntimeEnv& env) const;

  /// Every failing check of the table, in vLLM's order. Empty = valid.
  std::vector<std::string> validate_configuration(const AttentionSelectorConfig& config, const RuntimeEnv& env) const;

  // vLLM's classmethods that whole-model planning asks, answered from capabilities(env).
  std::vector<KernelBlockSize> get_supported_kernel_block_sizes(const RuntimeEnv& env) const;
  bool supports_block_size(std::optional<int> block_size, const RuntimeEnv& env) const;
  int get_preferred_block_size(int default_block_size, const RuntimeEnv& env) const;
  /// Most preferred first; nullopt = any layout, no preference.
  std::optional<std::vector<KVCacheLayout>> supported_kv_cache_layouts(const RuntimeEnv& env) const;
};

}  // namespace attnsel
