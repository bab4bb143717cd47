// Composite backends (vllm/v1/attention/backends/composite.py) and the two vLLM instances:
// TRITON_FLASHINFER (triton_flashinfer.py) and TRITON_FLASH_ATTN (triton_flash_attn.py).
#include "backends/composite.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <numeric>

#include "attnsel/errors.hpp"
#include "backends/common.hpp"
#include "backends/families.hpp"
#include "backends/flash_attn.hpp"
#include "backends/flashinfer.hpp"
#include "backends/runtime_facts.hpp"
#include "backends/triton_attn.hpp"

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
  std::vector<std::vector<KVCacheLayout>> lists;
  for (const AttentionBackend* b : backends)
    if (auto declared = b->supported_kv_cache_layouts(env)) lists.push_back(std::move(*declared));
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
  if (general->forward_includes_kv_cache_update() || causal->forward_includes_kv_cache_update())
    throw ValueError("Composite backends require separate KV cache updates");
  return std::make_shared<const CompositeAttentionBackend>(std::move(general), std::move(causal), std::move(options));
}

std::vector<DType> CompositeAttentionBackend::supported_dtypes(const RuntimeEnv& env) const {
  std::vector<DType> out;
  const auto other = causal_->supported_dtypes(env);
  for (DType d : general_->supported_dtypes(env))
    if (contains(other, d)) out.push_back(d);
  return out;
}

std::vector<std::string> CompositeAttentionBackend::supported_kv_cache_dtypes(const RuntimeEnv& env) const {
  std::vector<std::string> out;
  for (const std::string& d : general_->supported_kv_cache_dtypes(env))
    if (supports_kv_cache_dtype(d, env)) out.push_back(d);
  return out;
}

bool CompositeAttentionBackend::supports_kv_cache_dtype(const std::optional<std::string>& d,
                                                        const RuntimeEnv& env) const {
  return general_->supports_kv_cache_dtype(d, env) && causal_->supports_kv_cache_dtype(d, env);
}

std::vector<KernelBlockSize> CompositeAttentionBackend::get_supported_kernel_block_sizes(const RuntimeEnv& env) const {
  if (!options_.kernel_block_sizes.empty()) {
    std::vector<KernelBlockSize> out;
    for (int size : options_.kernel_block_sizes)
      if (general_->supports_block_size(size, env) && causal_->supports_block_size(size, env)) out.push_back(size);
    return out;
  }
  return intersect_kernel_block_sizes(general_->get_supported_kernel_block_sizes(env),
                                      causal_->get_supported_kernel_block_sizes(env));
}

bool CompositeAttentionBackend::supports_block_size(std::optional<int> block_size, const RuntimeEnv& env) const {
  // No common kernel page means no block size works, not "any" (the base rule for an empty list).
  return !get_supported_kernel_block_sizes(env).empty() && AttentionBackend::supports_block_size(block_size, env);
}

std::vector<int> CompositeAttentionBackend::get_supported_head_sizes(const RuntimeEnv&) const {
  return options_.head_sizes;
}

bool CompositeAttentionBackend::supports_head_size(int head_size, const RuntimeEnv& env) const {
  return (options_.head_sizes.empty() || contains(options_.head_sizes, head_size)) &&
         general_->supports_head_size(head_size, env) && causal_->supports_head_size(head_size, env);
}

bool CompositeAttentionBackend::supports_compute_capability(const std::optional<DeviceCapability>& cap,
                                                            const RuntimeEnv& env) const {
  const bool major_ok = !options_.device_major || (cap && cap->major == *options_.device_major);
  return major_ok && general_->supports_compute_capability(cap, env) && causal_->supports_compute_capability(cap, env);
}

bool CompositeAttentionBackend::supports_mm_prefix(const RuntimeEnv& env) const {
  return (!variant_uses_mm_prefix(0) || general_->supports_mm_prefix(env)) &&
         (!variant_uses_mm_prefix(1) || causal_->supports_mm_prefix(env));
}

bool CompositeAttentionBackend::supports_sliding_window(const RuntimeEnv& env) const {
  return general_->supports_sliding_window(env) && causal_->supports_sliding_window(env);
}

bool CompositeAttentionBackend::supports_rswa(const RuntimeEnv& env) const {
  return general_->supports_rswa(env) && causal_->supports_rswa(env);
}

std::optional<std::string> CompositeAttentionBackend::supports_combination(const CombinationArgs& args,
                                                                           const RuntimeEnv& env) const {
  const AttentionBackend* children[] = {general_.get(), causal_.get()};
  for (int variant = 0; variant < 2; ++variant) {
    CombinationArgs child_args = args;
    child_args.use_mm_prefix = args.use_mm_prefix && variant_uses_mm_prefix(variant);
    if (auto reason = children[variant]->supports_combination(child_args, env); reason && !reason->empty())
      return fmt::format("{}: {}", children[variant]->get_name(), *reason);
  }
  return std::nullopt;
}

std::optional<std::vector<KVCacheLayout>> CompositeAttentionBackend::supported_kv_cache_layouts(
    const RuntimeEnv& env) const {
  return get_supported_kv_cache_layouts({general_.get(), causal_.get()}, env);
}

namespace {
/// TRITON_FLASH_ATTN's causal child (vLLM's _FABackend): FLASH_ATTN that must resolve to FA3 or FA4.
class TritonFlashAttentionCausalChild : public FlashAttentionBackend {
 public:
  std::string qualname() const override { return "attnsel::backends::TritonFlashAttentionBackend::_FABackend"; }
  std::optional<std::string> supports_combination(const CombinationArgs& a, const RuntimeEnv& env) const override {
    if (auto reason = FlashAttentionBackend::supports_combination(a, env)) return reason;
    FaVersionQuery q;
    q.head_size = a.head_size;
    q.has_sinks = a.has_sink;
    q.kv_cache_block_size = a.block_size;
    q.supports_fa4_hd256 = true;
    const std::optional<int> v = get_flash_attn_version(env, q);
    if (v != 3 && v != 4) return "causal route requires FlashAttention v3 or v4";
    return std::nullopt;
  }
};
}  // namespace

void append_composite_classes(ClassList& out) {
  auto triton = std::make_shared<const TritonAttentionBackend>();
  out.push_back(CompositeAttentionBackend::create(triton, std::make_shared<const FlashInferBackend>(),
                                                  {.backend_name = "TRITON_FLASHINFER",
                                                   .qualname = "attnsel::backends::TritonFlashInferBackend",
                                                   .head_sizes = {256, 512},
                                                   .kernel_block_sizes = {64},
                                                   .device_major = 10}));
  out.push_back(CompositeAttentionBackend::create(triton, std::make_shared<const TritonFlashAttentionCausalChild>(),
                                                  {.backend_name = "TRITON_FLASH_ATTN",
                                                   .qualname = "attnsel::backends::TritonFlashAttentionBackend",
                                                   .head_sizes = {256, 512},
                                                   .kernel_block_sizes = {},
                                                   .device_major = 9}));
}

}  // namespace attnsel::backends
