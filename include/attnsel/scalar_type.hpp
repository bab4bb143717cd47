// Layer: core (src/layers.txt)
// The two dtype enums of attnsel and how they convert.
//
//   * attnsel::DType (types.hpp) is a model's activation dtype as vLLM's selector sees it
//     (torch.float16, torch.bfloat16, torch.float32): what backends declare and validate.
//   * kernel::ScalarType (here) is what a buffer stores, element by element: activations,
//     KV caches (16-bit, f32 or fp8 bytes) and the integer arrays of a batch description.
//
// Conversions: scalar_type(DType) is the element type of a model dtype's tensors;
// model_dtype(ScalarType) goes back where one exists (fp8 and integer types have none).
// A cache's element type also depends on kv_cache_dtype ("auto" stores the model dtype,
// "fp8"/"fp8_e4m3" e4m3 bytes, "fp8_e5m2" e5m2 bytes): the kernels' cache_encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "attnsel/export.hpp"
#include "attnsel/types.hpp"

namespace attnsel::kernel {

/// Element types a tensor view can hold.
enum class ScalarType : std::uint8_t { f32, f16, bf16, fp8_e4m3, fp8_e5m2, u8, i32, i64 };

ATTNSEL_API std::string_view to_string(ScalarType t);  ///< "bf16", "fp8_e4m3", ...
ATTNSEL_API std::size_t element_size(ScalarType t);    ///< bytes per element

/// The element type of a model dtype's tensors (float16 → f16, bfloat16 → bf16, float32 → f32).
ATTNSEL_API ScalarType scalar_type(DType d);
/// The model dtype whose tensors hold `t`; nullopt for fp8 and integer types.
ATTNSEL_API std::optional<DType> model_dtype(ScalarType t);

/// True for the two 8-bit float formats (OCP E4M3FN and E5M2).
constexpr bool is_fp8(ScalarType t) { return t == ScalarType::fp8_e4m3 || t == ScalarType::fp8_e5m2; }

}  // namespace attnsel::kernel
