// Internal: a plugin backend's declaration, read from its C struct into owned C++ values
// and checked for self-contradictions before anything is registered.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnsel/kv_cache_layout.hpp"
#include "attnsel/plugin.h"
#include "attnsel/types.hpp"
#include "plugin/abi.hpp"

namespace attnsel::plugin {

/// Everything a plugin declares about one backend, copied out of the plugin's memory
/// (except the callbacks and user_data, which stay the plugin's).
struct BackendDeclaration {
  std::string name;
  std::vector<std::string> register_as;
  std::vector<DType> dtypes;
  std::vector<CacheDType> kv_cache_dtypes;
  std::vector<KernelBlockSize> block_sizes;
  std::vector<int> head_sizes;
  std::optional<std::vector<KVCacheLayout>> kv_cache_layouts;
  std::vector<AttentionType> attn_types;
  std::uint64_t features = 0;
  std::optional<std::pair<DeviceCapability, DeviceCapability>> compute_capability_range;
  void* user_data = nullptr;
  attnsel_check_combination_fn check_combination = nullptr;
  attnsel_score_fn score = nullptr;
  const attnsel_kernel_ops* kernel = nullptr;

  bool has(std::uint64_t feature) const { return (features & feature) != 0; }
};

/// Reads one backend description. Every problem found is listed (all of them, not only
/// the first); the declaration is usable only when `problems` is empty.
struct DeclarationRead {
  BackendDeclaration declaration;
  std::vector<std::string> problems;
};
DeclarationRead read_backend_declaration(const attnsel_backend& backend, const AbiLayout& layout);

/// True for an identifier of A-Z, 0-9 and '_' that does not start with a digit.
bool is_backend_identifier(std::string_view name);

}  // namespace attnsel::plugin
