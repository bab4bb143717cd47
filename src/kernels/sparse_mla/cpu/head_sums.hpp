// The last step of the indexer's scores: each key's products with the query heads ReLU'd,
// weighted and summed over the heads, times the key's scale. SIMD (Highway, run-time
// dispatch); each sum is in a fixed order on a given target, whatever the rows around it.
// Thread-safety: pure function.
#pragma once

namespace attnsel::kernel::sparse_mla::cpu {

/// out[i] = scale[i] · Σ_h max(products[i · heads + h], 0) · weights[h] for i < rows; `heads`
/// is a multiple of 16.
void relu_weighted_head_sums(const float* products, int rows, int heads, const float* weights, const float* scale,
                             float* out);

}  // namespace attnsel::kernel::sparse_mla::cpu
