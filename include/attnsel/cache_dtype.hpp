// Layer: core (src/layers.txt)
// The KV-cache dtype: vLLM's CacheDType literal (vllm/config/cache.py) as one enum. A value is
// parsed once where it enters attnsel (the command's flags, a config file, the C API, the
// Python package) and travels as the enum from there; every door refuses an unknown name
// with the same text (cache_dtype_from). Thread-safe: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "attnsel/export.hpp"

namespace attnsel {

/// vLLM's CacheDType values, in vLLM's declaration order. `auto_` is vLLM's "auto": the
/// cache stores the model dtype.
enum class CacheDType : std::uint8_t {
  auto_, float16, bfloat16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla,
  turboquant_k8v4, turboquant_4bit_nc, turboquant_k3v4_nc, turboquant_3bit_nc,
  int4_per_token_head, int8_per_token_head, fp8_per_token_head, nvfp4, nvfp4_4over6,
  ultraquant_4bit
};

/// vLLM's spelling: "auto", "fp8_e4m3", ...
ATTNSEL_API std::string_view cache_dtype_name(CacheDType d);
/// Every value, in vLLM's order.
ATTNSEL_API std::span<const CacheDType> all_cache_dtypes();
/// The value vLLM spells `s` (exactly, as vLLM's Literal compares); nullopt when none does.
ATTNSEL_API std::optional<CacheDType> parse_cache_dtype(std::string_view s);
/// parse_cache_dtype, or ValueError naming the argument (`what`), the value and every valid
/// spelling: the one text every door gives for an unknown cache dtype.
ATTNSEL_API CacheDType cache_dtype_from(std::string_view s, std::string_view what = "kv_cache_dtype");
/// vLLM's is_quantized_kv_cache: any fp8*, int/fp per-token-head, nvfp4*, turboquant_*, ultraquant_*.
ATTNSEL_API bool is_quantized_kv_cache(CacheDType d);

}  // namespace attnsel
