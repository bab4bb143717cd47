#include "attnsel/selector_config.hpp"

#include <fmt/format.h>

namespace attnsel {

namespace {
std::string_view py_bool(bool b) { return b ? "True" : "False"; }

inline void mix(std::size_t& h, std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }

}  // namespace

std::size_t AttentionSelectorConfig::hash() const noexcept {
  // Pack the small fields into one word, then mix in the optional values.
  // Written out rather than read from the table of checks: this is the selector's cached hot
  // path (a few nanoseconds). A test checks that every flag of the table changes the hash.
  std::size_t flags = 0;
  const bool bits[] = {use_mla, has_sink, use_sparse, use_mm_prefix, use_per_head_quant_scales, has_sliding_window,
                       use_non_causal, use_batch_invariant, use_kv_connector, use_pcp, use_adaptive_verification,
                       use_dcp, use_rswa, kv_cache_dtype.has_value(), block_size.has_value()};
  for (bool b : bits) flags = (flags << 1) | static_cast<std::size_t>(b);
  std::size_t h = static_cast<std::size_t>(head_size);
  mix(h, flags | (static_cast<std::size_t>(dtype) << 20) | (static_cast<std::size_t>(attn_type) << 24));
  if (block_size) mix(h, static_cast<std::size_t>(*block_size));
  if (kv_cache_dtype) mix(h, static_cast<std::size_t>(*kv_cache_dtype));
  return h;
}

// vLLM's dataclass field order, which is not its validation order (the table's).
std::string AttentionSelectorConfig::repr() const {
  const std::string_view kv = kv_cache_dtype ? cache_dtype_name(*kv_cache_dtype) : "None";
  std::string bs = block_size ? std::to_string(*block_size) : "None";
  std::string out = fmt::format(
      "AttentionSelectorConfig(head_size={}, dtype={}, kv_cache_dtype={}, block_size={}, use_mla={}, has_sink={}, "
      "use_sparse={}, use_mm_prefix={}, use_per_head_quant_scales={}, attn_type={}, has_sliding_window={}, "
      "use_non_causal={}, use_batch_invariant={}, use_kv_connector={}, use_adaptive_verification={}, use_pcp={}, "
      "use_dcp={}",
      head_size, dtype_repr(dtype), kv, bs, py_bool(use_mla), py_bool(has_sink), py_bool(use_sparse),
      py_bool(use_mm_prefix), py_bool(use_per_head_quant_scales), attn_type_name(attn_type),
      py_bool(has_sliding_window), py_bool(use_non_causal), py_bool(use_batch_invariant), py_bool(use_kv_connector),
      py_bool(use_adaptive_verification), py_bool(use_pcp), py_bool(use_dcp));
  if (use_rswa) out += ", use_rswa=True";
  out += ")";
  return out;
}

}  // namespace attnsel
