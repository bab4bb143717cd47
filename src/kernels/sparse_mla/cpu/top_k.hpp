// The indexer's top-k of one row of scores (vLLM's top_k_per_row kernels leave the order
// and ties open; attnsel emits the positions highest score first, equal scores by the lower
// position, and pads with -1).
// Thread-safety: pure function (the caller owns the scratch).
#pragma once

#include <cstdint>

namespace attnsel::kernel::sparse_mla::cpu {

/// out[0, k): the positions of the min(k, n) highest of scores[0, n) as above, then -1. NaN
/// ranks below every number, -0 as +0. `keys` is scratch of n entries.
void top_k_row(const float* scores, std::int64_t n, int k, std::int32_t* out, std::uint64_t* keys);

}  // namespace attnsel::kernel::sparse_mla::cpu
