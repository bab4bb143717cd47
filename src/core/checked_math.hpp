// Internal: 64-bit integer arithmetic that says when a result does not fit, for sizes
// computed from user input (model configs, engine options): an overflow is refused, never
// wrapped into a negative or small size. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

namespace attnsel::checked {

/// a * b, or nullopt when it does not fit in 64 bits.
inline std::optional<std::int64_t> mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

/// a + b, or nullopt when it does not fit in 64 bits.
inline std::optional<std::int64_t> add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

}  // namespace attnsel::checked
