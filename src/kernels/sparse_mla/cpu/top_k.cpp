#include "kernels/sparse_mla/cpu/top_k.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>

namespace attnsel::kernel::sparse_mla::cpu {

namespace {

// A score's order as an unsigned integer (larger score, larger key): -0 is +0, NaN lowest.
std::uint32_t order_of(float score) {
  if (std::isnan(score)) return 0;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(score + 0.0f);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

}  // namespace

void top_k_row(const float* scores, std::int64_t n, int k, std::int32_t* out, std::uint64_t* keys) {
  // One 64-bit key per position: the score's order above, the position's complement below, so
  // that sorting keys in decreasing order ranks by score, then by the lower position.
  for (std::int64_t p = 0; p < n; ++p)
    keys[p] = static_cast<std::uint64_t>(order_of(scores[p])) << 32 | (0xFFFFFFFFu - static_cast<std::uint32_t>(p));
  const std::int64_t take = std::min<std::int64_t>(n, k);
  if (take < n) std::nth_element(keys, keys + take, keys + n, std::greater<>());
  std::sort(keys, keys + take, std::greater<>());
  for (std::int64_t i = 0; i < take; ++i) out[i] = static_cast<std::int32_t>(0xFFFFFFFFu - static_cast<std::uint32_t>(keys[i]));
  std::fill(out + take, out + k, -1);
}

}  // namespace attnsel::kernel::sparse_mla::cpu
