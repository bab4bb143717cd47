#include "attnsel/types.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>


namespace attnsel {

namespace {
constexpr std::array<std::string_view, 3> kDTypeNames = {"float16", "bfloat16", "float32"};

constexpr std::array<std::string_view, 4> kAttnTypes = {"decoder", "encoder", "encoder_only", "encoder_decoder"};

constexpr std::array<std::string_view, 10> kKindValues = {
    "full_attention", "mla_attention", "sliding_window", "sliding_window_mla", "mamba",
    "chunked_local_attention", "sink_full_attention", "encoder_only_attention", "cross_attention", "unknown"};
constexpr std::array<KVCacheSpecKind, 10> kKinds = {
    KVCacheSpecKind::full_attention, KVCacheSpecKind::mla_attention, KVCacheSpecKind::sliding_window,
    KVCacheSpecKind::sliding_window_mla, KVCacheSpecKind::mamba, KVCacheSpecKind::chunked_local_attention,
    KVCacheSpecKind::sink_full_attention, KVCacheSpecKind::encoder_only_attention, KVCacheSpecKind::cross_attention,
    KVCacheSpecKind::unknown};
}  // namespace

std::string_view dtype_name(DType d) { return kDTypeNames[static_cast<std::size_t>(d)]; }
std::string dtype_repr(DType d) { return fmt::format("torch.{}", dtype_name(d)); }
std::span<const std::string_view> dtype_names() { return kDTypeNames; }

std::optional<DType> parse_dtype(std::string_view s) {
  std::string t = to_lower(s);
  if (t.starts_with("torch.")) t = t.substr(6);
  if (t == "float16" || t == "fp16" || t == "half" || t == "f16") return DType::float16;
  if (t == "bfloat16" || t == "bf16") return DType::bfloat16;
  if (t == "float32" || t == "fp32" || t == "float" || t == "f32") return DType::float32;
  return std::nullopt;
}

std::string_view attn_type_name(AttentionType t) { return kAttnTypes[static_cast<std::size_t>(t)]; }
std::span<const std::string_view> attn_type_names() { return kAttnTypes; }
std::optional<AttentionType> parse_attn_type(std::string_view s) {
  std::string t = to_lower(s);
  for (std::size_t i = 0; i < kAttnTypes.size(); ++i)
    if (t == kAttnTypes[i]) return static_cast<AttentionType>(i);
  return std::nullopt;
}

std::string DeviceCapability::str() const { return fmt::format("{}.{}", major, minor); }

int block_base(const KernelBlockSize& s) {
  return std::holds_alternative<int>(s) ? std::get<int>(s) : std::get<MultipleOf>(s).base;
}
std::string to_string(const KernelBlockSize& s) {
  return std::holds_alternative<int>(s) ? std::to_string(std::get<int>(s))
                                        : fmt::format("MultipleOf({})", std::get<MultipleOf>(s).base);
}

std::string_view kind_value(KVCacheSpecKind k) { return kKindValues[static_cast<std::size_t>(k)]; }
std::span<const KVCacheSpecKind> all_kinds() { return kKinds; }
std::optional<KVCacheSpecKind> parse_kind(std::string_view s) {
  for (std::size_t i = 0; i < kKindValues.size(); ++i)
    if (s == kKindValues[i]) return kKinds[i];
  return std::nullopt;
}

KVCacheSpecKind get_attn_spec_kind(bool use_mla, bool has_sliding_window, AttentionType attn_type) {
  if (attn_type == AttentionType::encoder_only) return KVCacheSpecKind::encoder_only_attention;
  if (attn_type == AttentionType::encoder_decoder) return KVCacheSpecKind::cross_attention;
  if (use_mla) return has_sliding_window ? KVCacheSpecKind::sliding_window_mla : KVCacheSpecKind::mla_attention;
  if (has_sliding_window) return KVCacheSpecKind::sliding_window;
  return KVCacheSpecKind::full_attention;
}

std::string to_upper(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return r;
}
std::string to_lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

}  // namespace attnsel
