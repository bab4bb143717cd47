// The capability record's queries, with vLLM's AttentionBackend defaults
// (vllm/v1/attention/backend.py: supports_kv_cache_dtype, supports_block_size, ...).
#include "attnsel/capabilities.hpp"

#include <algorithm>

namespace attnsel {

namespace {
template <class T, class U>
bool contains(const std::vector<T>& list, const U& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}
}  // namespace

bool BackendCapabilities::supports_dtype(DType d) const { return contains(dtypes, d); }

bool BackendCapabilities::supports_kv_cache_dtype(std::optional<CacheDType> d) const {
  if (kv_cache_dtype_rule) return kv_cache_dtype_rule(d);
  if (!d) return true;
  return kv_cache_dtypes.empty() || contains(kv_cache_dtypes, *d);
}

bool BackendCapabilities::supports_block_size(std::optional<int> block_size) const {
  if (block_size_rule) return block_size_rule(block_size);
  if (!block_size || kernel_block_sizes.empty()) return true;
  return std::any_of(kernel_block_sizes.begin(), kernel_block_sizes.end(), [&](const KernelBlockSize& s) {
    const int base = block_base(s);
    return base > 0 && *block_size % base == 0;
  });
}

bool BackendCapabilities::supports_head_size(int head_size) const {
  if (head_size_rule) return head_size_rule(head_size);
  return head_sizes.empty() || contains(head_sizes, head_size);
}

bool BackendCapabilities::supports_attn_type(AttentionType t) const { return contains(attn_types, t); }

bool BackendCapabilities::supports_compute_capability(const std::optional<DeviceCapability>& capability) const {
  return !compute_capability_rule || compute_capability_rule(capability);
}

int BackendCapabilities::preferred_block_size(int default_block_size) const {
  if (preferred_block_size_rule)
    if (const std::optional<int> preferred = preferred_block_size_rule(default_block_size)) return *preferred;
  if (kernel_block_sizes.empty() || supports_block_size(default_block_size)) return default_block_size;
  int best = block_base(kernel_block_sizes.front());
  for (const KernelBlockSize& s : kernel_block_sizes) best = std::min(best, block_base(s));
  return best;
}

std::optional<std::string> BackendCapabilities::check_combination(const CombinationArgs& args) const {
  if (!combination_rule) return std::nullopt;
  return combination_rule(args);
}

}  // namespace attnsel
