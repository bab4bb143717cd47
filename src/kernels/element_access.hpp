// Host access to tensor elements for the code around the SIMD kernels (cache writers,
// gathers, split-KV merges, the products' operands): addresses of elements and of paged
// cache rows, and scalar loads and stores of activation elements (f32, f16, bf16) as float,
// stores rounding to nearest even (half.hpp).
#pragma once

#include <cstdint>

#include "attnsel/kernel.hpp"
#include "kernels/half.hpp"

namespace attnsel::kernel {

/// Element i of `base`, an array of `t` (f32, bf16; any other type is read as f16).
inline float load_activation(ScalarType t, const void* base, std::int64_t i) {
  switch (t) {
    case ScalarType::f32: return static_cast<const float*>(base)[i];
    case ScalarType::bf16: return bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
    default: return half_to_float(static_cast<const std::uint16_t*>(base)[i]);
  }
}

/// Element i of `base`, an array of `t` (f32, bf16; any other type is written as f16), = v.
inline void store_activation(ScalarType t, void* base, std::int64_t i, float v) {
  switch (t) {
    case ScalarType::f32: static_cast<float*>(base)[i] = v; break;
    case ScalarType::bf16: static_cast<std::uint16_t*>(base)[i] = float_to_bf16(v); break;
    default: static_cast<std::uint16_t*>(base)[i] = float_to_half(v); break;
  }
}

/// The address of element [i, j, k] of `t` (the indices past its dimensions are ignored).
inline std::uint8_t* element_at(const TensorView& t, std::int64_t i, std::int64_t j = 0, std::int64_t k = 0) {
  std::int64_t offset = i * t.stride[0];
  if (t.ndim > 1) offset += j * t.stride[1];
  if (t.ndim > 2) offset += k * t.stride[2];
  return static_cast<std::uint8_t*>(t.data) + offset * static_cast<std::int64_t>(element_size(t.dtype));
}

/// The row of `slot` in a paged cache [num_blocks, block_size, ...]: block slot / block_size,
/// offset slot % block_size.
inline std::uint8_t* paged_row(const TensorView& cache, std::int64_t block_size, std::int64_t slot) {
  return element_at(cache, slot / block_size, slot % block_size);
}

}  // namespace attnsel::kernel
