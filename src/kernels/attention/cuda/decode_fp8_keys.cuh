// Internal: the fp8 decode's per-warp attention with the keys in the mma's M dimension.
//
// A decode CTA has 16 packed query rows, and at one query token a GQA group fills 4 of
// them: with the rows as the m16 dimension three quarters of every product would be
// padding. Here the products are transposed, S^T = K·Q^T and
// O^T = V^T·P^T (m16n8k16, f16 operands, f32 accumulators):
//  * K is the A operand. Each A register is two consecutive head dims of one key, i.e. two
//    consecutive cache bytes, widened by one cvt (exact: every e4m3/e5m2 value is a half).
//    The sum over the head dims does not depend on their order, so each thread of a quad
//    takes a contiguous run of each key row (32 bytes per 128 dims: two 16-byte loads, no
//    bank conflicts under the 128-byte swizzle or the 16-byte row padding) and the query
//    fragments are built in the same order.
//  * The queries are the B operand: one n8 tile per 8 packed rows, the second skipped when
//    the CTA has 8 rows or fewer (every decode step of GQA ≤ 8).
//  * P^T comes from S^T's accumulators with one movmatrix (8×8 transpose of halves) per
//    16 keys and n8 tile; V^T's A registers come from one transposing ldmatrix per 16 keys
//    and 32 dims (pairs of bytes as its 16-bit elements), whose two keys of two dims one
//    byte permute regroups by dim.
// Per 16 keys and n8 tile at d=128: 8 + 8 mma (16 + 16 with the rows as m16), the same
// 64 conversions, 2 movmatrix.
#pragma once

#include "kernels/attention/cuda/tile_common.cuh"

namespace attnsel::kernel::cuda {

/// How a thread's share of a key row is laid out for Q·Kᵀ: thread t of a quad takes bytes
/// [kRun·t, kRun·t + kRun) of every kGroup-dim group; k16 step j of a group uses its bytes
/// 4j..4j+3 (dims +0,+1 in A's first k-pair, +2,+3 in the second).
template <int DP>
struct Fp8KeyRun {
  static constexpr int kRun = DP % 128 == 0 ? 32 : DP % 64 == 0 ? 16 : 8;
  static constexpr int kGroup = 4 * kRun;
  static constexpr int kGroups = DP / kGroup;
  static constexpr int kSteps = kRun / 4;  // k16 steps per group
  static_assert(DP % kGroup == 0 && DP / 16 == kGroups * kSteps);
};

/// 8×8 transpose of 16-bit elements held in the mma fragment layout (sm_75+).
__device__ __forceinline__ std::uint32_t movmatrix_trans(std::uint32_t x) {
  std::uint32_t y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

/// One warp's online-softmax state for up to 16 rows as two n8 tiles; thread (g, t) holds
/// rows 8n + 2t and 8n + 2t + 1. o[n][j] holds O^T for dims keys_out_dim(j, g, 0) (M row g)
/// and keys_out_dim(j, g, 1) (M row g + 8) of those two rows.
template <int DP>
struct KeysWarpState {
  float m[2][2];
  float l[2][2];  ///< per-thread partial sums over the thread's keys; reduced across g at the end
  float o[2][DP / 16][4];
  __device__ __forceinline__ void init() {
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      m[n][0] = m[n][1] = -INFINITY;
      l[n][0] = l[n][1] = 0.0f;
#pragma unroll
      for (int j = 0; j < DP / 16; ++j) o[n][j][0] = o[n][j][1] = o[n][j][2] = o[n][j][3] = 0.0f;
    }
  }
};

/// Loads `kRun` bytes of raw row `row` from byte column `col` (a multiple of kRun).
template <int RUN, class Raw>
__device__ __forceinline__ void load_key_run(std::uint32_t (&w)[RUN / 4], const std::uint8_t* raw, int row,
                                             int col) {
  if constexpr (RUN >= 16) {
#pragma unroll
    for (int u = 0; u < RUN / 16; ++u) {
      const uint4 v = *reinterpret_cast<const uint4*>(raw + Raw::offset(row, col + 16 * u));
      w[4 * u] = v.x;
      w[4 * u + 1] = v.y;
      w[4 * u + 2] = v.z;
      w[4 * u + 3] = v.w;
    }
  } else {
    const uint2 v = *reinterpret_cast<const uint2*>(raw + Raw::offset(row, col));
    w[0] = v.x;
    w[1] = v.y;
  }
}

/// Query B-fragments (as halves) of the CTA's 16 padded rows qs (kRowStride<DP>), in the dim
/// order of Fp8KeyRun: qf[n][kk] for n8 tile n and k16 step kk. A bf16 row is scaled by a
/// power of two that puts its largest magnitude in [2^14, 2^15) (exact, far from the half's
/// overflow); undo[n][e] takes the scores of row 8n + 2t + e back.
template <class T, int DP>
__device__ __forceinline__ void load_q_frags_keys(std::uint32_t (&qf)[2][DP / 16][2], const T* qs,
                                                  float (&undo)[2][2]) {
  using R = Fp8KeyRun<DP>;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const T* row = qs + (8 * n + g) * kRowStride<DP>;
    float f = 1.0f, u = 1.0f;
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      std::uint32_t amax = 0;  // |x| of bf16 pairs compared as integers: monotonic for finite values
#pragma unroll
      for (int G = 0; G < R::kGroups; ++G)
#pragma unroll
        for (int i = 0; i < R::kRun / 2; ++i) {
          const std::uint32_t w = *reinterpret_cast<const std::uint32_t*>(row + G * R::kGroup + R::kRun * t + 2 * i);
          amax = max(amax, max(w & 0x7FFFu, (w >> 16) & 0x7FFFu));
        }
      amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
      amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
      const int e = int(amax >> 7);  // biased exponent of the largest magnitude
      if (amax != 0 && e < 255) {
        const int s = min(14 - (e - 127), 126);  // in [-113, 126]: 2^s and 2^-s are normal floats
        f = __int_as_float((127 + s) << 23);
        u = __int_as_float((127 - s) << 23);
      }
    }
#pragma unroll
    for (int G = 0; G < R::kGroups; ++G)
#pragma unroll
      for (int j = 0; j < R::kSteps; ++j) {
        const T* d = row + G * R::kGroup + R::kRun * t + 4 * j;
        const std::uint32_t w0 = *reinterpret_cast<const std::uint32_t*>(d);
        const std::uint32_t w1 = *reinterpret_cast<const std::uint32_t*>(d + 2);
        std::uint32_t h0 = w0, h1 = w1;
        if constexpr (std::is_same_v<T, __nv_bfloat16>) {
          h0 = pack2<__half>(__uint_as_float(w0 << 16) * f, __uint_as_float(w0 & 0xFFFF0000u) * f);
          h1 = pack2<__half>(__uint_as_float(w1 << 16) * f, __uint_as_float(w1 & 0xFFFF0000u) * f);
        }
        qf[n][G * R::kSteps + j][0] = h0;
        qf[n][G * R::kSteps + j][1] = h1;
      }
    // The scores' rows are 8n + 2t + e: their factors live in the threads with g = 2t + e.
    undo[n][0] = __shfl_sync(0xffffffffu, u, 4 * (2 * t));
    undo[n][1] = __shfl_sync(0xffffffffu, u, 4 * (2 * t + 1));
  }
}

/// S^T for NKB blocks of 16 keys (rows row0 + 16kb .. of the raw tile) against the CTA's
/// rows: s[kb][n] = {key g: rows 2t, 2t+1; key g + 8: rows 2t, 2t+1} of n8 tile n, raw q·k
/// in the query's scaled units. two: whether the second n8 tile has rows.
template <int DP, int NKB, class Raw, bool E5M2>
__device__ __forceinline__ void qk_tile_fp8_keys(float (&s)[NKB][2][4], const std::uint32_t (&qf)[2][DP / 16][2],
                                                 const std::uint8_t* kraw, int row0, bool two) {
  using R = Fp8KeyRun<DP>;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // With one block of 16 keys, two accumulators per n8 tile halve the chain of dependent mma.
  constexpr int kChains = NKB == 1 ? 2 : 1;
  float acc[NKB][2][kChains][4];
#pragma unroll
  for (int kb = 0; kb < NKB; ++kb)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int c = 0; c < kChains; ++c) acc[kb][n][c][0] = acc[kb][n][c][1] = acc[kb][n][c][2] = acc[kb][n][c][3] = 0.0f;
#pragma unroll
  for (int G = 0; G < R::kGroups; ++G)
#pragma unroll
    for (int kb = 0; kb < NKB; ++kb) {
      std::uint32_t lo[R::kRun / 4], hi[R::kRun / 4];
      load_key_run<R::kRun, Raw>(lo, kraw, row0 + 16 * kb + g, G * R::kGroup + R::kRun * t);
      load_key_run<R::kRun, Raw>(hi, kraw, row0 + 16 * kb + g + 8, G * R::kGroup + R::kRun * t);
#pragma unroll
      for (int j = 0; j < R::kSteps; ++j) {
        std::uint32_t a[4];
        fp8x4_to_f16x2x2<E5M2>(lo[j], a[0], a[2]);
        fp8x4_to_f16x2x2<E5M2>(hi[j], a[1], a[3]);
        const int kk = G * R::kSteps + j;
        mma16816<__half>(acc[kb][0][kk % kChains], a, qf[0][kk][0], qf[0][kk][1]);
        if (two) mma16816<__half>(acc[kb][1][kk % kChains], a, qf[1][kk][0], qf[1][kk][1]);
      }
    }
#pragma unroll
  for (int kb = 0; kb < NKB; ++kb)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[kb][n][e] = acc[kb][n][0][e];
        if constexpr (kChains == 2) s[kb][n][e] += acc[kb][n][1][e];
      }
}

/// The rows' facts a masked or ALiBi score tile needs, for rows 8n + 2t + e.
struct KeysRowInfo {
  KeyRange vis[2][2];
  int pos[2][2];
  float alibi[2][2];  ///< slope × log2(e), 0 without ALiBi
};

__device__ __forceinline__ KeysRowInfo keys_row_info(const AttnParams& p, const PackedRows& pr, int kv_head,
                                                     int row0, int seq_len, int kv_begin, int kv_end) {
  const int t = threadIdx.x % 4;
  KeysRowInfo ri;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int row = min(row0 + 8 * n + 2 * t + e, pr.rows - 1);
      ri.pos[n][e] = pr.ctx + row / p.group;
      const KeyRange v = visible_keys(p, ri.pos[n][e], seq_len);
      ri.vis[n][e] = {max(v.lo, kv_begin), min(v.hi, kv_end)};
      ri.alibi[n][e] = p.alibi_slopes ? p.alibi_slopes[kv_head * p.group + row % p.group] * kLog2e : 0.0f;
    }
  return ri;
}

/// Scale, soft-cap, ALiBi and the key mask on S^T tiles, in place, into the log2 domain.
/// undo: the query rows' scaling (1 for f16 queries); key0: the first key of block 0.
template <int NKB>
__device__ __forceinline__ void score_tile_keys(const AttnParams& p, const ScoreScale& sc, float (&s)[NKB][2][4],
                                                int key0, const float (&undo)[2][2], const KeysRowInfo& ri,
                                                bool masked) {
  const int g = (threadIdx.x % 32) / 4;
  const bool has_alibi = p.alibi_slopes != nullptr;
  if (!masked && !has_alibi && sc.softcap_inv == 0.0f) {  // the common case: scale only
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const float f0 = undo[n][0] * sc.scale_log2, f1 = undo[n][1] * sc.scale_log2;
#pragma unroll
      for (int kb = 0; kb < NKB; ++kb) {
        s[kb][n][0] *= f0;
        s[kb][n][1] *= f1;
        s[kb][n][2] *= f0;
        s[kb][n][3] *= f1;
      }
    }
    return;
  }
#pragma unroll
  for (int kb = 0; kb < NKB; ++kb)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = i & 1;
        const int key = key0 + 16 * kb + g + 8 * (i / 2);
        float v = score_to_log2(p, sc, s[kb][n][i] * undo[n][e]);
        if (has_alibi) v += ri.alibi[n][e] * static_cast<float>(key - ri.pos[n][e]);
        if (masked && (key < ri.vis[n][e].lo || key >= ri.vis[n][e].hi)) v = -INFINITY;
        s[kb][n][i] = v;
      }
}

/// Online softmax over S^T tiles (in place: s becomes probabilities). The row maxima are
/// reduced across the 8 key lanes of each row (lanes with the same t). A row keeps its
/// maximum while the tiles' maximum exceeds it by at most 2^kLazyRescaleLog2, so most tiles
/// skip O's rescale; the warp votes, so the rescale is a branch it takes together.
template <int DP, int NKB>
__device__ __forceinline__ void softmax_tile_keys(KeysWarpState<DP>& st, float (&s)[NKB][2][4], bool two) {
  float m_new[2][2];
  bool grow = false;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float mx = -INFINITY;
      if (n == 0 || two) {
#pragma unroll
        for (int kb = 0; kb < NKB; ++kb) mx = fmaxf(mx, fmaxf(s[kb][n][e], s[kb][n][2 + e]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      }
      m_new[n][e] = fmaxf(st.m[n][e], mx);
      // A first finite maximum always grows (-inf + 8).
      grow |= m_new[n][e] > st.m[n][e] + float(kLazyRescaleLog2);
    }
  if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      if (n == 1 && !two) break;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        // A row with nothing visible yet keeps m = -inf; use 0 as the reference to avoid NaN.
        const float ref = m_new[n][e] == -INFINITY ? 0.0f : m_new[n][e];
        const float corr = fast_exp2(st.m[n][e] - ref);
        st.m[n][e] = m_new[n][e];
        st.l[n][e] *= corr;
#pragma unroll
        for (int j = 0; j < DP / 16; ++j) {
          st.o[n][j][e] *= corr;
          st.o[n][j][2 + e] *= corr;
        }
      }
    }
  }
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    if (n == 1 && !two) break;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float ref = st.m[n][e] == -INFINITY ? 0.0f : st.m[n][e];
      float sum = 0.0f;
#pragma unroll
      for (int kb = 0; kb < NKB; ++kb) {
        s[kb][n][e] = fast_exp2(s[kb][n][e] - ref);
        s[kb][n][2 + e] = fast_exp2(s[kb][n][2 + e] - ref);
        sum += s[kb][n][e] + s[kb][n][2 + e];
      }
      st.l[n][e] += sum;
    }
  }
}

/// O^T += V^T·P^T for NKB blocks of 16 keys (rows row0 + 16kb .. of the raw V tile). One
/// transposing ldmatrix per 16 keys and 32 dims: of its four 8×8 matrices of 16-bit pairs
/// (keys 0-7 / 8-15 × bytes 0-15 / 16-31 of the dims), thread (g, t) receives keys 2t and
/// 2t + 1 of dims 2g and 2g + 1; one byte permute pairs the keys per dim, so O^T tile 2c
/// (2c + 1) has dims 32c + 2g (+16) in M row g and 32c + 2g + 1 (+16) in M row g + 8.
template <int DP, int NKB, class Raw, bool E5M2>
__device__ __forceinline__ void pv_tile_fp8_keys(KeysWarpState<DP>& st, const float (&s)[NKB][2][4],
                                                 const std::uint8_t* vraw, int row0, bool two) {
  const int lane = threadIdx.x % 32;
  const std::uint32_t base = smem_addr(vraw);
  // This lane's row address for the ldmatrix: matrix lane / 8, row lane % 8 of it.
  const int mat = lane / 8, key_in_block = 8 * (mat / 2) + lane % 8, byte_in_32 = 16 * (mat % 2);
#pragma unroll
  for (int kb = 0; kb < NKB; ++kb) {
    // P^T's B fragments: (keys 2t, 2t+1 | 2t+8, 2t+9; row g) from S^T's (key g; rows 2t, 2t+1).
    std::uint32_t b[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      b[n][0] = movmatrix_trans(pack2<__half>(s[kb][n][0], s[kb][n][1]));
      b[n][1] = movmatrix_trans(pack2<__half>(s[kb][n][2], s[kb][n][3]));
    }
    const int key = row0 + 16 * kb + key_in_block;
#pragma unroll
    for (int c = 0; c < DP / 32; ++c) {
      std::uint32_t v[4];  // keys 0-7 bytes 0-15, keys 0-7 bytes 16-31, keys 8-15 bytes 0-15, keys 8-15 bytes 16-31
      ldmatrix_x4_trans(v, base + Raw::offset(key, 32 * c + byte_in_32));
      std::uint32_t a[2][4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // (key 2t dim 2g, dim 2g+1, key 2t+1 dim 2g, dim 2g+1) -> (dim 2g: keys 2t, 2t+1 | dim 2g+1: ...)
        const std::uint32_t lo = __byte_perm(v[h], 0, 0x3120), hi = __byte_perm(v[2 + h], 0, 0x3120);
        fp8x4_to_f16x2x2<E5M2>(lo, a[h][0], a[h][1]);
        fp8x4_to_f16x2x2<E5M2>(hi, a[h][2], a[h][3]);
      }
      mma16816<__half>(st.o[0][2 * c], a[0], b[0][0], b[0][1]);
      mma16816<__half>(st.o[0][2 * c + 1], a[1], b[0][0], b[0][1]);
      if (two) {
        mma16816<__half>(st.o[1][2 * c], a[0], b[1][0], b[1][1]);
        mma16816<__half>(st.o[1][2 * c + 1], a[1], b[1][0], b[1][1]);
      }
    }
  }
}

/// The dim of O^T tile j's M row g (e = 0) or g + 8 (e = 1) for the thread in quad row g.
__device__ __forceinline__ int keys_out_dim(int j, int g, int e) { return 32 * (j / 2) + 16 * (j % 2) + 2 * g + e; }

}  // namespace attnsel::kernel::cuda
