// The matrix products of the CPU MLA kernel: the query's absorption (q_nope · W_UK), the
// de-absorption (latent output · W_UV) and the up-projection of latents into per-head keys
// and values (kv_c · kv_b_projᵀ). The right-hand matrices are a layer's weights, packed
// once when its implementation is made; the products run on the calling thread (callers
// spread heads and row blocks over their team). Debian 12's OpenBLAS is built without
// bfloat16 (no cblas_sbgemm), so the kernel is ours: a register-blocked AVX-512-BF16
// dot-product micro-kernel, and an fp32 one (Highway, any target) for f16 / f32 layers and
// CPUs without AVX-512-BF16. Every output element is one sum in a fixed order, whatever
// the rows around it: a row's result does not depend on the batch.
// Thread-safety: a PackedMatrix is immutable; gemm() may run concurrently on distinct outputs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attnsel/kernel.hpp"

namespace attnsel::kernel::mla::cpu {

/// A [k × n] right-hand matrix packed for gemm(): bf16 pairs along k (word [i/2][j] holds
/// B[i][j] in its low half, B[i+1][j] in its high half) for the AVX-512-BF16 kernel, else
/// f32 rows [k][n].
struct PackedMatrix {
  int k = 0, n = 0;
  bool bf16_pairs = false;
  std::vector<std::uint32_t> pairs;
  std::vector<float> f32;
  std::size_t bytes() const { return pairs.size() * 4 + f32.size() * 4; }
};

/// The deepest product gemm() computes (k).
inline constexpr int kMaxGemmDepth = 1024;

/// Packs B[i][j] = src[i · stride_k + j · stride_n] (elements of `type`: f32, f16 or bf16;
/// k <= kMaxGemmDepth; bf16_pairs needs bf16 and an even k).
PackedMatrix pack_matrix(const void* src, ScalarType type, int k, int n, std::int64_t stride_k,
                         std::int64_t stride_n, bool bf16_pairs);

/// C[i][j] = alpha · Σ_l A[i][l] · B[l][n_begin + j] for i < m, j < n_end - n_begin, rounded
/// to c_type. A: rows of b.k elements of a_type (bf16 for a bf16-pair matrix) with unit
/// stride, row i at a + i · a_stride elements; C: row i at c + i · c_stride elements.
/// n_begin and n_end are multiples of 16.
struct GemmArgs {
  const void* a = nullptr;
  ScalarType a_type = ScalarType::bf16;
  std::int64_t a_stride = 0;
  int m = 0;
  const PackedMatrix* b = nullptr;
  int n_begin = 0, n_end = 0;
  void* c = nullptr;
  ScalarType c_type = ScalarType::bf16;
  std::int64_t c_stride = 0;
  float alpha = 1.0f;
};
void gemm(const GemmArgs& g);

/// Rows one gemm() call should take for good cache use (a block of A stays in L2 while
/// every column block of B passes over it); callers split larger products into such calls.
inline constexpr int kGemmRowBlock = 64;

/// Runs task(head, first row, rows) for every head < heads and block of at most
/// kGemmRowBlock of `rows` rows, spread over `team` threads of the caller's OpenMP team.
template <class Task>
void for_head_row_blocks(int heads, std::int64_t rows, int team, Task task) {
  const std::int64_t blocks = (rows + kGemmRowBlock - 1) / kGemmRowBlock;
  const std::int64_t tasks = heads * blocks;
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (tasks > 1)
  for (std::int64_t t = 0; t < tasks; ++t) {
    const std::int64_t r0 = t % blocks * kGemmRowBlock;
    task(static_cast<int>(t / blocks), r0, static_cast<int>(std::min<std::int64_t>(kGemmRowBlock, rows - r0)));
  }
}

}  // namespace attnsel::kernel::mla::cpu
