// Element types: names, sizes, and the conversions with model dtypes.
#include "attnsel/scalar_type.hpp"

namespace attnsel::kernel {

std::string_view to_string(ScalarType t) {
  switch (t) {
    case ScalarType::f32: return "f32";
    case ScalarType::f16: return "f16";
    case ScalarType::bf16: return "bf16";
    case ScalarType::fp8_e4m3: return "fp8_e4m3";
    case ScalarType::fp8_e5m2: return "fp8_e5m2";
    case ScalarType::u8: return "u8";
    case ScalarType::i32: return "i32";
    case ScalarType::i64: return "i64";
  }
  return "?";
}

std::size_t element_size(ScalarType t) {
  switch (t) {
    case ScalarType::f32:
    case ScalarType::i32: return 4;
    case ScalarType::f16:
    case ScalarType::bf16: return 2;
    case ScalarType::fp8_e4m3:
    case ScalarType::fp8_e5m2:
    case ScalarType::u8: return 1;
    case ScalarType::i64: return 8;
  }
  return 0;
}

ScalarType scalar_type(DType d) {
  switch (d) {
    case DType::float16: return ScalarType::f16;
    case DType::bfloat16: return ScalarType::bf16;
    case DType::float32: return ScalarType::f32;
  }
  return ScalarType::f32;
}

std::optional<DType> model_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::f16: return DType::float16;
    case ScalarType::bf16: return DType::bfloat16;
    case ScalarType::f32: return DType::float32;
    default: return std::nullopt;
  }
}

}  // namespace attnsel::kernel
