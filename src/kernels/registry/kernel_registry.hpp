// The kernel registry: every kernel of this build, by name, with how to ask whether it runs
// here and how to make one layer's implementation. A backend names the kernel it runs and
// reaches it only through here; nothing above the kernels layer includes a family's headers.
// Thread-safety: the table is immutable; every function may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/facts.hpp"
#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"
#include "attnsel/selector_config.hpp"
#include "attnsel/sparse_mla.hpp"

namespace attnsel::kernel {

/// The attention families the kernels tree has a folder for (sparse_mla holds two kinds of
/// kernel: the sparse attention and DeepSeek-V3.2's lightning indexer).
enum class KernelFamily : std::uint8_t { attention, mla, sparse_mla };

/// One kernel of the build.
struct KernelEntry {
  std::string_view name;  ///< e.g. "cpu_attention", "flash_attn_cuda", "cpu_mla", "cpu_sparse_mla"
  KernelFamily family = KernelFamily::attention;
  DeviceKind device = DeviceKind::cpu;
  /// "" when it can run on this host; else why not ("attnsel was built without CUDA ...").
  std::string (*unavailable_reason)() = nullptr;
  /// What it needs and offers for layers of `dtype` with this cache dtype (available is
  /// unavailable_reason().empty()).
  KernelInfo (*info)(ScalarType dtype, CacheDType kv_cache_dtype) = nullptr;
  /// What the backend running it declares but it does not compute, one reason each.
  std::vector<std::string> (*gaps)(const AttentionSelectorConfig& config, const RuntimeEnv& env) = nullptr;
  /// The attention family: one layer's implementation (ValueError for what it does not compute).
  std::unique_ptr<AttentionImpl> (*make_attention)(const LayerParams& params) = nullptr;
  /// The MLA family: likewise.
  std::unique_ptr<MlaImpl> (*make_mla)(const MlaLayerParams& params) = nullptr;
  /// The sparse MLA family's attention: likewise.
  std::unique_ptr<SparseMlaImpl> (*make_sparse_mla)(const SparseMlaLayerParams& params) = nullptr;
  /// The sparse MLA family's indexer: likewise.
  std::unique_ptr<IndexerImpl> (*make_indexer)(const IndexerLayerParams& params) = nullptr;
};

/// Every kernel of this build (with or without CUDA: a CUDA kernel of a build without CUDA
/// is listed and says why it cannot run).
std::span<const KernelEntry> kernel_entries();
/// The kernel called `name`; ValueError naming it and listing the kernels there are.
const KernelEntry& find_kernel(std::string_view name);

}  // namespace attnsel::kernel
