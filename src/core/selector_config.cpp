#include "attnsel/selector_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "attnsel/capability_checks.hpp"

namespace attnsel {

namespace {

// vLLM's AttentionSelectorConfig fields, in its declaration order. A selector flag that vLLM
// has is named here at vLLM's place; one it does not have is printed after these, when true.
constexpr std::string_view kVllmFields[] = {"head_size",
                                            "dtype",
                                            "kv_cache_dtype",
                                            "block_size",
                                            "use_mla",
                                            "has_sink",
                                            "use_sparse",
                                            "use_mm_prefix",
                                            "use_per_head_quant_scales",
                                            "attn_type",
                                            "has_sliding_window",
                                            "use_non_causal",
                                            "use_batch_invariant",
                                            "use_kv_connector",
                                            "use_adaptive_verification",
                                            "use_pcp",
                                            "use_dcp"};

bool is_vllm_field(std::string_view name) { return std::ranges::find(kVllmFields, name) != std::end(kVllmFields); }

std::string_view py_bool(bool b) { return b ? "True" : "False"; }

bool flag_value(const AttentionSelectorConfig& c, std::string_view flag) {
  return c.*selector_flags()[selector_flag_index(flag)]->requested;
}

// A field's value as vLLM prints it.
std::string field_text(const AttentionSelectorConfig& c, std::string_view field) {
  if (field == "head_size") return std::to_string(c.head_size);
  if (field == "dtype") return dtype_repr(c.dtype);
  if (field == "kv_cache_dtype") return c.kv_cache_dtype ? std::string(cache_dtype_name(*c.kv_cache_dtype)) : "None";
  if (field == "block_size") return c.block_size ? std::to_string(*c.block_size) : "None";
  if (field == "attn_type") return std::string(attn_type_name(c.attn_type));
  return std::string(py_bool(flag_value(c, field)));
}

inline void mix(std::size_t& h, std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }

}  // namespace

std::size_t AttentionSelectorConfig::hash() const noexcept {
  // Pack the flags (read through the table's member pointers, listed once) and the presence
  // of the optional values into one word, then mix in the rest.
  std::size_t bits = (static_cast<std::size_t>(kv_cache_dtype.has_value()) << 1) | block_size.has_value();
  for (const CapabilityCheck* flag : selector_flags()) bits = (bits << 1) | static_cast<std::size_t>(this->*flag->requested);
  std::size_t h = static_cast<std::size_t>(head_size);
  mix(h, bits);
  mix(h, static_cast<std::size_t>(dtype) | (static_cast<std::size_t>(attn_type) << 8));
  if (block_size) mix(h, static_cast<std::size_t>(*block_size));
  if (kv_cache_dtype) mix(h, static_cast<std::size_t>(*kv_cache_dtype));
  return h;
}

std::string AttentionSelectorConfig::repr() const {
  std::vector<std::string> fields;
  for (std::string_view name : kVllmFields) fields.push_back(fmt::format("{}={}", name, field_text(*this, name)));
  for (const CapabilityCheck* flag : selector_flags())
    if (!is_vllm_field(flag->flag) && this->*flag->requested) fields.push_back(fmt::format("{}=True", flag->flag));
  return fmt::format("AttentionSelectorConfig({})", fmt::join(fields, ", "));
}

std::vector<std::string_view> selector_config_fields() {
  std::vector<std::string_view> out(std::begin(kVllmFields), std::end(kVllmFields));
  for (const CapabilityCheck* flag : selector_flags())
    if (!is_vllm_field(flag->flag)) out.push_back(flag->flag);
  return out;
}

}  // namespace attnsel
