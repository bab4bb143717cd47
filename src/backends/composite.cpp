// Composite backends (vllm/v1/attention/backends/composite.py): one backend made of a general
// child and a causal child; triton_flashinfer.cpp and triton_flash_attn.cpp are vLLM's two.
#include "backends/composite.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <numeric>

#include "attnsel/errors.hpp"
#include "backends/common.hpp"

namespace attnsel::backends {

std::vector<KernelBlockSize> intersect_kernel_block_sizes(const std::vector<KernelBlockSize>& first,
                                                          const std::vector<KernelBlockSize>& second) {
  std::vector<KernelBlockSize> result;
  for (const KernelBlockSize& lhs : first) {
    for (const KernelBlockSize& rhs : second) {
      std::optional<KernelBlockSize> candidate;
      const auto* lm = std::get_if<MultipleOf>(&lhs);
      const auto* rm = std::get_if<MultipleOf>(&rhs);
      if (lm && rm) {
        candidate = MultipleOf{std::lcm(lm->base, rm->base)};
      } else if (lm) {
        const int r = std::get<int>(rhs);
        if (lm->base > 0 && r % lm->base == 0) candidate = r;
      } else if (rm) {
        const int l = std::get<int>(lhs);
        if (rm->base > 0 && l % rm->base == 0) candidate = l;
      } else if (std::get<int>(lhs) == std::get<int>(rhs)) {
        candidate = lhs;
      }
      if (candidate && std::find(result.begin(), result.end(), *candidate) == result.end())
        result.push_back(*candidate);
    }
  }
  return result;
}

std::vector<KVCacheLayout> get_supported_kv_cache_layouts(const std::vector<const AttentionBackend*>& backends,
                                                          const RuntimeEnv& env) {
  std::vector<std::optional<std::vector<KVCacheLayout>>> declared;
  for (const AttentionBackend* b : backends) declared.push_back(b->supported_kv_cache_layouts(env));
  return common_kv_cache_layouts(declared);
}

std::vector<KVCacheLayout> common_kv_cache_layouts(const std::vector<std::optional<std::vector<KVCacheLayout>>>& declared) {
  std::vector<std::vector<KVCacheLayout>> lists;
  for (const auto& d : declared)
    if (d) lists.push_back(*d);
  if (lists.empty()) return default_layout_preference();
  if (std::all_of(lists.begin(), lists.end(), [&](const auto& l) { return l == lists.front(); })) return lists.front();

  std::map<KVCacheLayout, int> first_count;
  for (const auto& l : lists)
    if (!l.empty()) ++first_count[l.front()];
  std::vector<KVCacheLayout> common;
  for (KVCacheLayout layout : all_layouts()) {  // enum declaration order, then stable by count
    const bool everywhere = std::all_of(lists.begin(), lists.end(), [&](const auto& l) { return contains(l, layout); });
    if (everywhere) common.push_back(layout);
  }
  std::stable_sort(common.begin(), common.end(),
                   [&](KVCacheLayout a, KVCacheLayout b) { return first_count[a] > first_count[b]; });
  if (common.empty()) {
    std::vector<std::string> sets;
    for (const auto& l : lists) {
      std::vector<std::string> names;
      for (KVCacheLayout layout : l) names.push_back(fmt::format("'{}'", layout_name(layout)));
      sets.push_back(fmt::format("[{}]", fmt::join(names, ", ")));
    }
    throw ValueError(fmt::format("No KV cache layout satisfies every supported set: [{}].", fmt::join(sets, ", ")));
  }
  return common;
}

CompositeAttentionBackend::CompositeAttentionBackend(std::shared_ptr<const AttentionBackend> general,
                                                     std::shared_ptr<const AttentionBackend> causal,
                                                     CompositeOptions options)
    : general_(std::move(general)), causal_(std::move(causal)), options_(std::move(options)) {}

std::shared_ptr<const AttentionBackend> CompositeAttentionBackend::create(std::shared_ptr<const AttentionBackend> general,
                                                                          std::shared_ptr<const AttentionBackend> causal,
                                                                          CompositeOptions options) {
  if (general->qualname() == causal->qualname()) return general;
  // Whether forward writes the cache does not depend on the environment.
  const DeviceDescription any_device;
  const RuntimeEnv env{any_device, RuntimeFacts(any_device)};
  if (general->capabilities(env).forward_includes_kv_cache_update || causal->capabilities(env).forward_includes_kv_cache_update)
    throw ValueError("Composite backends require separate KV cache updates");
  return std::make_shared<const CompositeAttentionBackend>(std::move(general), std::move(causal), std::move(options));
}

namespace {
// The base rule for a block size over a non-empty list: a multiple of one of its sizes.
bool fits_kernel_sizes(const std::vector<KernelBlockSize>& sizes, std::optional<int> block_size) {
  if (sizes.empty()) return false;  // no common kernel page means no block size works, not "any"
  if (!block_size) return true;
  return std::any_of(sizes.begin(), sizes.end(), [&](const KernelBlockSize& s) {
    const int base = block_base(s);
    return base > 0 && *block_size % base == 0;
  });
}
}  // namespace

BackendCapabilities CompositeAttentionBackend::capabilities(const RuntimeEnv& env) const {
  using Record = std::shared_ptr<const BackendCapabilities>;
  const Record general = std::make_shared<const BackendCapabilities>(general_->capabilities(env));
  const Record causal = std::make_shared<const BackendCapabilities>(causal_->capabilities(env));
  BackendCapabilities c;
  c.forward_includes_kv_cache_update = false;
  c.dtypes.clear();
  for (DType d : general->dtypes)
    if (contains(causal->dtypes, d)) c.dtypes.push_back(d);
  c.kv_cache_dtype_rule = [general, causal](std::optional<CacheDType> d) {
    return general->supports_kv_cache_dtype(d) && causal->supports_kv_cache_dtype(d);
  };
  c.kv_cache_dtypes.clear();
  for (const CacheDType d : general->kv_cache_dtypes)
    if (c.kv_cache_dtype_rule(d)) c.kv_cache_dtypes.push_back(d);

  c.kernel_block_sizes.clear();
  if (!options_.kernel_block_sizes.empty()) {
    for (int size : options_.kernel_block_sizes)
      if (general->supports_block_size(size) && causal->supports_block_size(size)) c.kernel_block_sizes.push_back(size);
  } else {
    c.kernel_block_sizes = intersect_kernel_block_sizes(general->kernel_block_sizes, causal->kernel_block_sizes);
  }
  c.block_size_rule = [sizes = c.kernel_block_sizes](std::optional<int> block_size) {
    return fits_kernel_sizes(sizes, block_size);
  };

  c.head_sizes = options_.head_sizes;
  c.head_size_rule = [listed = options_.head_sizes, general, causal](int head_size) {
    return (listed.empty() || contains(listed, head_size)) && general->supports_head_size(head_size) &&
           causal->supports_head_size(head_size);
  };
  c.compute_capability_rule = [major = options_.device_major, general,
                               causal](const std::optional<DeviceCapability>& cap) {
    const bool major_ok = !major || (cap && cap->major == *major);
    return major_ok && general->supports_compute_capability(cap) && causal->supports_compute_capability(cap);
  };
  c.mm_prefix = (!variant_uses_mm_prefix(0) || general->mm_prefix) && (!variant_uses_mm_prefix(1) || causal->mm_prefix);
  c.sliding_window = general->sliding_window && causal->sliding_window;
  c.rswa = general->rswa && causal->rswa;
  c.pcp = false;
  c.dcp = false;
  c.device_cpu_query_lens_mismatch = false;
  c.combination_rule = [general, causal, names = std::array<std::string, 2>{general_->get_name(), causal_->get_name()}](
                           const CombinationArgs& args) -> std::optional<std::string> {
    const Record children[] = {general, causal};
    for (int variant = 0; variant < 2; ++variant) {
      CombinationArgs child_args = args;
      child_args.use_mm_prefix = args.use_mm_prefix && variant_uses_mm_prefix(variant);
      if (auto reason = children[variant]->check_combination(child_args); reason && !reason->empty())
        return fmt::format("{}: {}", names[variant], *reason);
    }
    return std::nullopt;
  };
  c.kv_cache_layouts = common_kv_cache_layouts({general->kv_cache_layouts, causal->kv_cache_layouts});
  return c;
}

}  // namespace attnsel::backends
