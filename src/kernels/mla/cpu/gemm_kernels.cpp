// The CPU MLA matrix products (gemm.hpp), compiled once per Highway target (run-time
// dispatch picks the best the machine runs) for the fp32 kernel, and on AVX-512 once more
// with AVX-512-BF16 dot products for bf16-pair matrices.
//
// Both kernels hold an MR × NR block of C in registers (NR vectors of columns) and walk k:
// each step loads NR vectors of packed B and broadcasts MR elements of A (the bf16 kernel:
// MR pairs, one 32-bit word of an A row each), so A needs no packing and B is read once per
// row block.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/mla/cpu/gemm_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "attnsel/errors.hpp"
#include "hwy/highway.h"
#include "kernels/half.hpp"
#include "kernels/mla/cpu/gemm.hpp"

#ifndef ATTNSEL_MLA_GEMM_ONCE
#define ATTNSEL_MLA_GEMM_ONCE
namespace attnsel::kernel::mla::cpu::gemm_detail {

inline float load_element(const void* base, ScalarType t, std::int64_t i) {
  switch (t) {
    case ScalarType::f32: return static_cast<const float*>(base)[i];
    case ScalarType::bf16: return bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
    default: return half_to_float(static_cast<const std::uint16_t*>(base)[i]);
  }
}

// Row `row` of C (n elements from column `col`) from fp32 sums.
inline void store_row(const GemmArgs& g, int row, int col, const float* sums, int n) {
  const std::int64_t at = static_cast<std::int64_t>(row) * g.c_stride + col;
  switch (g.c_type) {
    case ScalarType::f32: {
      float* c = static_cast<float*>(g.c) + at;
      for (int j = 0; j < n; ++j) c[j] = sums[j] * g.alpha;
      break;
    }
    case ScalarType::bf16: {
      auto* c = static_cast<std::uint16_t*>(g.c) + at;
      for (int j = 0; j < n; ++j) c[j] = float_to_bf16(sums[j] * g.alpha);
      break;
    }
    default: {
      auto* c = static_cast<std::uint16_t*>(g.c) + at;
      for (int j = 0; j < n; ++j) c[j] = float_to_half(sums[j] * g.alpha);
      break;
    }
  }
}

}  // namespace attnsel::kernel::mla::cpu::gemm_detail
#endif

#if HWY_TARGET == HWY_AVX3
#include <immintrin.h>

HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512bf16")
namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE::bf16 {

// C[MR][NR·16] of one block: row i of A at a + i · a_stride (bf16 elements; its pair p is the
// 32-bit word at element 2p), b the block's first column in the packed [k/2][n] words.
template <int MR, int NR>
HWY_INLINE void BlockBf16(const std::uint16_t* a, std::int64_t a_stride, const std::uint32_t* b, int n, int pairs,
                          float* out /* [MR][NR * 16] */) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int p = 0; p < pairs; ++p) {
    __m512bh bv[NR];
    for (int j = 0; j < NR; ++j)
      bv[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + static_cast<std::size_t>(p) * n + 16 * j));
    for (int i = 0; i < MR; ++i) {
      std::int32_t word;
      std::memcpy(&word, a + i * a_stride + 2 * p, 4);
      const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_epi32(word));
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av, bv[j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) _mm512_storeu_ps(out + i * NR * 16 + 16 * j, acc[i][j]);
}

template <int MR>
HWY_INLINE void RowsBf16(const GemmArgs& g, int i0) {
  const PackedMatrix& B = *g.b;
  const auto* a = static_cast<const std::uint16_t*>(g.a) + i0 * g.a_stride;
  HWY_ALIGN float out[MR * 64];
  for (int j0 = g.n_begin; j0 < g.n_end; j0 += 64) {
    const int nr = std::min(4, (g.n_end - j0) / 16);
    const std::uint32_t* b = B.pairs.data() + j0;
    // The block's output lines, fetched for writing while it computes: C is usually a large
    // workspace that is not in cache, and its stores would otherwise wait for those reads.
    const std::size_t c_bytes = element_size(g.c_type);
    for (int i = 0; i < MR; ++i) {
      const auto* row = static_cast<const std::uint8_t*>(g.c) +
                        (static_cast<std::size_t>(i0 + i) * g.c_stride + static_cast<std::size_t>(j0 - g.n_begin)) * c_bytes;
      for (std::size_t at = 0; at < static_cast<std::size_t>(nr) * 16 * c_bytes; at += 64) __builtin_prefetch(row + at, 1, 3);
    }
    switch (nr) {
      case 4: BlockBf16<MR, 4>(a, g.a_stride, b, B.n, B.k / 2, out); break;
      case 3: BlockBf16<MR, 3>(a, g.a_stride, b, B.n, B.k / 2, out); break;
      case 2: BlockBf16<MR, 2>(a, g.a_stride, b, B.n, B.k / 2, out); break;
      default: BlockBf16<MR, 1>(a, g.a_stride, b, B.n, B.k / 2, out); break;
    }
    for (int i = 0; i < MR; ++i) gemm_detail::store_row(g, i0 + i, j0 - g.n_begin, out + i * nr * 16, nr * 16);
  }
}

void GemmBf16(const GemmArgs& g) {
  constexpr int kMR = 6;  // 6 × 4 accumulators, 4 B vectors and a broadcast: 29 of 32 registers
  int i = 0;
  for (; i + kMR <= g.m; i += kMR) RowsBf16<kMR>(g, i);
  switch (g.m - i) {
    case 5: RowsBf16<5>(g, i); break;
    case 4: RowsBf16<4>(g, i); break;
    case 3: RowsBf16<3>(g, i); break;
    case 2: RowsBf16<2>(g, i); break;
    case 1: RowsBf16<1>(g, i); break;
    default: break;
  }
}

}  // namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE::bf16
HWY_POP_ATTRIBUTES
#endif

HWY_BEFORE_NAMESPACE();
namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Row l of B, columns [j, j + lanes), as fp32: from f32 rows, or widened (exactly) from the
// bf16 pairs when a bf16 layer's weights meet a target without AVX-512-BF16.
HWY_INLINE VF LoadB(const PackedMatrix& B, std::size_t l, std::size_t j) {
  const DF df;
  if (!B.bf16_pairs) return hn::LoadU(df, B.f32.data() + l * static_cast<std::size_t>(B.n) + j);
  const hn::RebindToUnsigned<DF> du;
  const auto words = hn::LoadU(du, B.pairs.data() + l / 2 * static_cast<std::size_t>(B.n) + j);
  return hn::BitCast(df, l % 2 == 0 ? hn::ShiftLeft<16>(words) : hn::And(words, hn::Set(du, 0xFFFF0000u)));
}

template <int MR, int NR>
HWY_INLINE void BlockF32(const float* a /* [MR][k] */, const PackedMatrix& B, int j0, float* out) {
  const DF df;
  const std::size_t L = hn::Lanes(df);
  const int k = B.k;
  VF acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = hn::Zero(df);
  for (int l = 0; l < k; ++l) {
    VF bv[NR];
    for (int j = 0; j < NR; ++j) bv[j] = LoadB(B, static_cast<std::size_t>(l), static_cast<std::size_t>(j0) + j * L);
    for (int i = 0; i < MR; ++i) {
      const VF av = hn::Set(df, a[static_cast<std::size_t>(i) * k + l]);
      for (int j = 0; j < NR; ++j) acc[i][j] = hn::MulAdd(av, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) hn::StoreU(acc[i][j], df, out + (static_cast<std::size_t>(i) * NR + j) * L);
}

template <int MR>
HWY_INLINE void RowsF32(const GemmArgs& g, int i0, float* a_rows /* [MR][k] */) {
  const DF df;
  const int L = static_cast<int>(hn::Lanes(df));
  const PackedMatrix& B = *g.b;
  for (int i = 0; i < MR; ++i)
    for (int l = 0; l < B.k; ++l)
      a_rows[i * B.k + l] = gemm_detail::load_element(g.a, g.a_type, static_cast<std::int64_t>(i0 + i) * g.a_stride + l);
  HWY_ALIGN float out[MR * 4 * (HWY_MAX_BYTES / sizeof(float))];
  for (int j0 = g.n_begin; j0 < g.n_end; j0 += 4 * L) {
    const int nr = std::min(4, (g.n_end - j0) / L);
    switch (nr) {
      case 4: BlockF32<MR, 4>(a_rows, B, j0, out); break;
      case 3: BlockF32<MR, 3>(a_rows, B, j0, out); break;
      case 2: BlockF32<MR, 2>(a_rows, B, j0, out); break;
      default: BlockF32<MR, 1>(a_rows, B, j0, out); break;
    }
    for (int i = 0; i < MR; ++i) gemm_detail::store_row(g, i0 + i, j0 - g.n_begin, out + i * nr * L, nr * L);
  }
}

void Gemm(const GemmArgs& g) {
#if HWY_TARGET == HWY_AVX3
  if (g.b->bf16_pairs) return bf16::GemmBf16(g);
#endif
  constexpr int kMR = 4;
  HWY_ALIGN float a_rows[kMR * kMaxGemmDepth];  // the row block's A, widened to fp32
  int i = 0;
  for (; i + kMR <= g.m; i += kMR) RowsF32<kMR>(g, i, a_rows);
  switch (g.m - i) {
    case 3: RowsF32<3>(g, i, a_rows); break;
    case 2: RowsF32<2>(g, i, a_rows); break;
    case 1: RowsF32<1>(g, i, a_rows); break;
    default: break;
  }
}

}  // namespace attnsel::kernel::mla::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnsel::kernel::mla::cpu {

HWY_EXPORT(Gemm);

PackedMatrix pack_matrix(const void* src, ScalarType type, int k, int n, std::int64_t stride_k,
                         std::int64_t stride_n, bool bf16_pairs) {
  if (k < 1 || k > kMaxGemmDepth || n < 1 || (bf16_pairs && (k % 2 != 0 || type != ScalarType::bf16)))
    throw ValueError(fmt::format("pack_matrix: a [{} x {}] {} matrix{} is outside what the MLA products take (depth 1 "
                                 "to {}; bf16 pairs need bf16 and an even depth)",
                                 k, n, to_string(type), bf16_pairs ? " as bf16 pairs" : "", kMaxGemmDepth));
  PackedMatrix m;
  m.k = k;
  m.n = n;
  m.bf16_pairs = bf16_pairs;
  auto at = [&](int i, int j) { return static_cast<std::int64_t>(i) * stride_k + static_cast<std::int64_t>(j) * stride_n; };
  if (bf16_pairs) {
    const auto* s = static_cast<const std::uint16_t*>(src);
    m.pairs.resize(static_cast<std::size_t>(k / 2) * static_cast<std::size_t>(n));
    for (int p = 0; p < k / 2; ++p)
      for (int j = 0; j < n; ++j)
        m.pairs[static_cast<std::size_t>(p) * n + j] =
            static_cast<std::uint32_t>(s[at(2 * p, j)]) | (static_cast<std::uint32_t>(s[at(2 * p + 1, j)]) << 16);
  } else {
    m.f32.resize(static_cast<std::size_t>(k) * static_cast<std::size_t>(n));
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < n; ++j) m.f32[static_cast<std::size_t>(i) * n + j] = gemm_detail::load_element(src, type, at(i, j));
  }
  return m;
}

void gemm(const GemmArgs& g) {
  if (g.m <= 0 || g.n_end <= g.n_begin) return;
  HWY_DYNAMIC_DISPATCH(Gemm)(g);
}

}  // namespace attnsel::kernel::mla::cpu
#endif
