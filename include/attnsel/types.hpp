// Layer: core (src/layers.txt)
// Value types shared by selection and kernels: dtypes, cache dtypes, attention types,
// device capabilities and block-size rules. All are plain values: thread-safe to copy.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/export.hpp"

namespace attnsel {

/// Model (activation) dtype, printed as PyTorch prints it ("torch.bfloat16").
enum class DType : std::uint8_t { float16, bfloat16, float32 };

ATTNSEL_API std::string_view dtype_name(DType d);        ///< "float16"
ATTNSEL_API std::string dtype_repr(DType d);             ///< "torch.float16"
/// Parses "float16"/"fp16"/"half"/"torch.float16" etc.; nullopt when unknown.
ATTNSEL_API std::optional<DType> parse_dtype(std::string_view s);
/// The canonical names, for error messages.
ATTNSEL_API std::span<const std::string_view> dtype_names();

/// vLLM's AttentionType string enum.
enum class AttentionType : std::uint8_t { decoder, encoder, encoder_only, encoder_decoder };
ATTNSEL_API std::string_view attn_type_name(AttentionType t);  ///< "decoder", ...
ATTNSEL_API std::optional<AttentionType> parse_attn_type(std::string_view s);
ATTNSEL_API std::span<const std::string_view> attn_type_names();

/// CUDA-style compute capability; ROCm and XPU have none (nullopt where used).
struct ATTNSEL_API DeviceCapability {
  int major = 0;
  int minor = 0;
  int as_int() const { return major * 10 + minor; }
  auto operator<=>(const DeviceCapability&) const = default;
  std::string str() const;  ///< "9.0"
};

/// A kernel block size rule: any multiple of `base`.
struct ATTNSEL_API MultipleOf {
  int base = 1;
  bool operator==(const MultipleOf&) const = default;
};
/// An element of get_supported_kernel_block_sizes(): an exact size or MultipleOf.
using KernelBlockSize = std::variant<int, MultipleOf>;
ATTNSEL_API int block_base(const KernelBlockSize& s);
ATTNSEL_API std::string to_string(const KernelBlockSize& s);  ///< "16" or "MultipleOf(16)"

/// KV-cache group kinds (vLLM's KVCacheSpecKind values).
enum class KVCacheSpecKind : std::uint8_t {
  full_attention, mla_attention, sliding_window, sliding_window_mla, mamba,
  chunked_local_attention, sink_full_attention, encoder_only_attention, cross_attention, unknown
};
ATTNSEL_API std::string_view kind_value(KVCacheSpecKind k);  ///< "full_attention", ...
ATTNSEL_API std::optional<KVCacheSpecKind> parse_kind(std::string_view s);
ATTNSEL_API std::span<const KVCacheSpecKind> all_kinds();

/// vLLM's get_attn_spec_kind (vllm/v1/attention/selector.py).
ATTNSEL_API KVCacheSpecKind get_attn_spec_kind(bool use_mla, bool has_sliding_window, AttentionType attn_type);

/// Upper-cases ASCII (names are case-insensitive on input, canonical upper-case on output).
ATTNSEL_API std::string to_upper(std::string_view s);
ATTNSEL_API std::string to_lower(std::string_view s);

}  // namespace attnsel
