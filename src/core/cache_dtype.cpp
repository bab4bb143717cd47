#include "attnsel/cache_dtype.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <string>

#include "attnsel/errors.hpp"

namespace attnsel {

namespace {
// vLLM's CacheDType literal, in its declaration order (the newest main's superset); the
// enum lists the same values in the same order.
constexpr std::array<std::string_view, 18> kCacheDTypeNames = {
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc",
    "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
    "ultraquant_4bit"};

constexpr std::array<CacheDType, kCacheDTypeNames.size()> make_all() {
  std::array<CacheDType, kCacheDTypeNames.size()> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<CacheDType>(i);
  return out;
}
constexpr std::array<CacheDType, kCacheDTypeNames.size()> kAll = make_all();
static_assert(static_cast<std::size_t>(CacheDType::ultraquant_4bit) + 1 == kCacheDTypeNames.size());
}  // namespace

std::string_view cache_dtype_name(CacheDType d) { return kCacheDTypeNames.at(static_cast<std::size_t>(d)); }

std::span<const CacheDType> all_cache_dtypes() { return kAll; }

std::optional<CacheDType> parse_cache_dtype(std::string_view s) {
  for (std::size_t i = 0; i < kCacheDTypeNames.size(); ++i)
    if (kCacheDTypeNames[i] == s) return static_cast<CacheDType>(i);
  return std::nullopt;
}

CacheDType cache_dtype_from(std::string_view s, std::string_view what) {
  if (const std::optional<CacheDType> d = parse_cache_dtype(s)) return *d;
  // Escaped as JSON escapes it, so a value with control bytes or a NUL reads as what it is.
  std::string shown;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == '\'') shown += fmt::format("\\{}", c);
    else if (u < 0x20 || u >= 0x7f) shown += fmt::format("\\x{:02x}", u);
    else shown += c;
  }
  throw ValueError(fmt::format("{} '{}' is not a cache dtype; valid values are: {}", what, shown,
                               fmt::join(kCacheDTypeNames, ", ")));
}

bool is_quantized_kv_cache(CacheDType d) {
  const std::string_view s = cache_dtype_name(d);
  return s.starts_with("fp8") || s.starts_with("nvfp4") || s.starts_with("turboquant_") ||
         s.starts_with("ultraquant_") || s.ends_with("_per_token_head");
}

}  // namespace attnsel
