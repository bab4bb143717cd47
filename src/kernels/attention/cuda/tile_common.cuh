// Internal: pieces shared by the mma.sync kernels (decode and sm80 prefill): loading query
// rows and paged key/value tiles into padded shared memory, and the per-warp attention of
// 16 packed rows against 16 keys (scores, mask, online softmax, P·V).
#pragma once

#include <type_traits>

#include "kernels/attention/cuda/device_common.cuh"
#include "kernels/device/cuda/fp8_convert.cuh"

namespace attnsel::kernel::cuda {

/// Shared-memory rows are padded by 16 bytes so ldmatrix's eight row reads hit eight
/// different bank groups without a swizzle.
template <int DP> inline constexpr int kRowStride = DP + 8;

/// The online softmaxes that rescale lazily keep a row's maximum while a tile's exceeds it
/// by at most 2^kLazyRescaleLog2: 16-bit probabilities then stay ≤ 256, O and l (fp32) need
/// no rescale, and the final normalisation cancels the factor.
inline constexpr int kLazyRescaleLog2 = 8;

/// Where ldmatrix finds 16-byte unit `unit` of row `row` of a key/value tile, in bytes from
/// the tile's (or a warp's 16-row slice's) start. Two layouts:
/// PaddedRows: rows of DP elements padded as above (cp.async and per-row bulk copies).
template <int DP>
struct PaddedRows {
  static __device__ __forceinline__ std::uint32_t offset(int row, int unit) {
    return std::uint32_t(row * kRowStride<DP> + unit * 8) * 2;
  }
};
/// Swizzled128: what TMA writes with 128-byte swizzling — 64-column (128-byte) chunks of
/// ROWS rows each, one after another; within a chunk, unit u of row r sits at position
/// u ^ (r % 8). The slice start must be 1024-byte aligned (8 rows × 128 bytes).
template <int ROWS>
struct Swizzled128 {
  static __device__ __forceinline__ std::uint32_t offset(int row, int unit) {
    return std::uint32_t((unit / 8) * ROWS * 128 + row * 128 + (((unit % 8) ^ (row % 8)) << 4));
  }
};

/// Query rows are packed: row r of a sequence is query token r / group of query head
/// kv_head * group + r % group, so the heads sharing a KV head read K and V once.
struct PackedRows {
  int q_begin;   ///< first query token of the sequence (global index)
  int q_len;
  int ctx;       ///< seq_len - q_len: position of the first query token
  int rows;      ///< q_len * group
};

template <class T, int DP, int NROWS, int NTHREADS>
__device__ __forceinline__ void load_q_rows(const AttnParams& p, const PackedRows& pr, int kv_head, int row0,
                                            T* qs) {
  constexpr int CH = DP / 8;
  const T* q = static_cast<const T*>(p.q);
  for (int idx = threadIdx.x; idx < NROWS * CH; idx += NTHREADS) {
    const int r = idx / CH, c = idx % CH;
    const int row = row0 + r;
    const bool valid = row < pr.rows && c * 8 < p.head_size;
    const T* src = q;
    if (valid) {
      const int tok = pr.q_begin + row / p.group;
      const int head = kv_head * p.group + row % p.group;
      src = q + tok * p.q_stride_tok + head * p.q_stride_head + c * 8;
    }
    cp_async16(smem_addr(qs + r * kRowStride<DP> + c * 8), src, valid);
  }
}

/// Loads keys [t0, t0 + NKEYS) of one KV head from the paged cache; keys at or past
/// kv_end (and head-dimension padding) are zero-filled without reading memory.
template <class T, int DP, int NKEYS, int NTHREADS>
__device__ __forceinline__ void load_kv_tile(const AttnParams& p, const std::int32_t* block_row, int kv_head,
                                             int t0, int kv_end, T* ks, T* vs) {
  constexpr int CH = DP / 8;
  const T* kb = static_cast<const T*>(p.k) + kv_head * p.k_stride_head;
  const T* vb = static_cast<const T*>(p.v) + kv_head * p.v_stride_head;
  for (int idx = threadIdx.x; idx < NKEYS * CH; idx += NTHREADS) {
    const int r = idx / CH, c = idx % CH;
    const int key = t0 + r;
    const bool valid = key < kv_end && c * 8 < p.head_size;
    const T* ksrc = kb;
    const T* vsrc = vb;
    if (valid) {
      const std::int64_t page = block_row[key / p.block_size];
      const int off = key % p.block_size;
      ksrc = kb + page * p.k_stride_block + off * p.k_stride_tok + c * 8;
      vsrc = vb + page * p.v_stride_block + off * p.v_stride_tok + c * 8;
    }
    cp_async16(smem_addr(ks + r * kRowStride<DP> + c * 8), ksrc, valid);
    cp_async16(smem_addr(vs + r * kRowStride<DP> + c * 8), vsrc, valid);
  }
}

/// load_kv_tile for an e4m3 cache, first half: cp.async the raw bytes of keys
/// [t0, t0 + NKEYS) into staging tiles of NKEYS rows × DP bytes, ROW_BYTES apart (8 bytes per
/// copy: head sizes are multiples of 8, not 16); keys at or past kv_end and the padding are
/// zero-filled.
template <int DP, int NKEYS, int NTHREADS, int ROW_BYTES = DP>
__device__ __forceinline__ void load_kv_tile_e4m3_raw(const AttnParams& p, const std::int32_t* block_row, int kv_head,
                                                      int t0, int kv_end, std::uint8_t* ks, std::uint8_t* vs) {
  constexpr int CH = DP / 8;
  const auto* kb = static_cast<const std::uint8_t*>(p.k) + kv_head * p.k_stride_head;
  const auto* vb = static_cast<const std::uint8_t*>(p.v) + kv_head * p.v_stride_head;
  for (int idx = threadIdx.x; idx < NKEYS * CH; idx += NTHREADS) {
    const int r = idx / CH, c = idx % CH;
    const int key = t0 + r;
    const bool valid = key < kv_end && c * 8 < p.head_size;
    const std::uint8_t* ksrc = kb;
    const std::uint8_t* vsrc = vb;
    if (valid) {
      const std::int64_t page = block_row[key / p.block_size];
      const int off = key % p.block_size;
      ksrc = kb + page * p.k_stride_block + off * p.k_stride_tok + c * 8;
      vsrc = vb + page * p.v_stride_block + off * p.v_stride_tok + c * 8;
    }
    cp_async8(smem_addr(ks + r * ROW_BYTES + c * 8), ksrc, valid);
    cp_async8(smem_addr(vs + r * ROW_BYTES + c * 8), vsrc, valid);
  }
}

/// Second half: widens a landed staging tile (NKEYS × DP e4m3 bytes) into the padded T
/// layout the mma.sync code reads (exact; the scales are applied later, in fp32).
/// NTHREADS threads take part; `thread` is this one's index among them.
template <class T, int DP, int NKEYS, int NTHREADS>
__device__ __forceinline__ void widen_e4m3_tile(const std::uint8_t* raw, T* wide, int thread) {
  constexpr int CH = DP / 8;
  for (int idx = thread; idx < NKEYS * CH; idx += NTHREADS) {
    const int r = idx / CH, c = idx % CH;
    const uint2 b = *reinterpret_cast<const uint2*>(raw + r * DP + c * 8);
    *reinterpret_cast<uint4*>(wide + r * kRowStride<DP> + c * 8) = e4m3x8_to<T>(b);
  }
}

/// The shared-memory pipeline of the mma.sync kernels, after the query rows: per stage a K
/// and a V tile (16-bit elements), or for an fp8 cache their raw e4m3 bytes, then one
/// widened K/V tile pair the warps compute on. C supplies kTileElems, kStageBytes,
/// kRawTileBytes and kWideOffset.
template <class T, class C>
struct StagedTiles {
  T* pipe;
  __device__ __forceinline__ T* k(int s) const { return pipe + (2 * s) * C::kTileElems; }
  __device__ __forceinline__ T* v(int s) const { return pipe + (2 * s + 1) * C::kTileElems; }
  __device__ __forceinline__ std::uint8_t* bytes() const { return reinterpret_cast<std::uint8_t*>(pipe); }
  __device__ __forceinline__ std::uint8_t* raw_k(int s) const { return bytes() + s * C::kStageBytes; }
  __device__ __forceinline__ std::uint8_t* raw_v(int s) const { return raw_k(s) + C::kRawTileBytes; }
  __device__ __forceinline__ T* wide_k() const { return reinterpret_cast<T*>(bytes() + C::kWideOffset); }
  __device__ __forceinline__ T* wide_v() const { return wide_k() + C::kTileElems; }
};

/// Online-softmax state of one warp's 16 rows: each thread holds rows lane/4 and lane/4+8.
template <int DP>
struct WarpState {
  float m[2];
  float l[2];  ///< per-thread partial sums; reduced across the quad at the end
  float o[DP / 8][4];
  __device__ __forceinline__ void init() {
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.0f;
#pragma unroll
    for (int j = 0; j < DP / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  }
};

/// A-fragments of 16 query rows × DP (from padded shared memory).
template <int DP>
__device__ __forceinline__ void load_q_frags(std::uint32_t (&qf)[DP / 16][4], const void* qs_warp) {
  const int lane = threadIdx.x % 32;
  const std::uint32_t base = smem_addr(qs_warp);
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk) {
    const int row = (lane % 8) + ((lane / 8) % 2) * 8;
    const int chunk = 2 * kk + lane / 16;
    ldmatrix_x4(qf[kk], base + (row * kRowStride<DP> + chunk * 8) * 2);
  }
}

/// Scores of 16 rows against 8*NT keys (NT n8 tiles, NT even), raw q·k.
template <class T, int DP, int NT, class Layout = PaddedRows<DP>>
__device__ __forceinline__ void qk_tile(float (&s)[NT][4], const std::uint32_t (&qf)[DP / 16][4], const T* ks) {
  const int lane = threadIdx.x % 32;
  const std::uint32_t base = smem_addr(ks);
#pragma unroll
  for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk) {
    const int chunk = 2 * kk + (lane / 8) % 2;
#pragma unroll
    for (int n2 = 0; n2 < NT / 2; ++n2) {
      const int key = n2 * 16 + (lane % 8) + (lane / 16) * 8;
      std::uint32_t kf[4];
      ldmatrix_x4(kf, base + Layout::offset(key, chunk));
      mma16816<T>(s[2 * n2], qf[kk], kf[0], kf[1]);
      mma16816<T>(s[2 * n2 + 1], qf[kk], kf[2], kf[3]);
    }
  }
}

/// O += P·V for 16 rows and 8*NT keys; s holds the (already exponentiated) probabilities.
template <class T, int DP, int NT, class Layout = PaddedRows<DP>>
__device__ __forceinline__ void pv_tile(WarpState<DP>& st, const float (&s)[NT][4], const T* vs) {
  const int lane = threadIdx.x % 32;
  const std::uint32_t base = smem_addr(vs);
#pragma unroll
  for (int kb = 0; kb < NT / 2; ++kb) {
    std::uint32_t a[4];
    a[0] = pack2<T>(s[2 * kb][0], s[2 * kb][1]);
    a[1] = pack2<T>(s[2 * kb][2], s[2 * kb][3]);
    a[2] = pack2<T>(s[2 * kb + 1][0], s[2 * kb + 1][1]);
    a[3] = pack2<T>(s[2 * kb + 1][2], s[2 * kb + 1][3]);
    const int key = kb * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
    for (int j = 0; j < DP / 16; ++j) {
      std::uint32_t vf[4];
      const int chunk = 2 * j + lane / 16;
      ldmatrix_x4_trans(vf, base + Layout::offset(key, chunk));
      mma16816<T>(st.o[2 * j], a, vf[0], vf[1]);
      mma16816<T>(st.o[2 * j + 1], a, vf[2], vf[3]);
    }
  }
}

// ---- fp8 cache: raw tiles and their conversion ------------------------------------------
// The fp8 decode never widens a tile in shared memory: each thread reads the raw bytes its
// mma fragments need and converts them in registers (decode_fp8_keys.cuh), exact (every
// fp8 value is a half).

/// Where a raw fp8 tile's byte `col` of row `row` lives. RawPadded: rows of DP bytes padded
/// to DP + 16 (cp.async copies; the pad spreads a quad's rows over the banks).
template <int DP>
struct RawPadded {
  static constexpr int kRowBytes = DP + 16;
  static __device__ __forceinline__ std::uint32_t offset(int row, int col) {
    return std::uint32_t(row * kRowBytes + col);
  }
};
/// RawSwizzled128: what TMA writes for 128-column boxes of bytes with 128-byte swizzling
/// (chunks of ROWS rows × 128 bytes; unit u of row r at u ^ (r % 8)).
template <int ROWS>
struct RawSwizzled128 {
  static __device__ __forceinline__ std::uint32_t offset(int row, int col) {
    return std::uint32_t((col / 128) * ROWS * 128 + row * 128 + ((((col / 16) % 8) ^ (row % 8)) << 4) + col % 16);
  }
};

/// Two fp8 bytes (low byte first) -> two halves, exact: one cvt on sm_89+.
template <bool E5M2>
__device__ __forceinline__ std::uint32_t fp8x2_to_f16x2(std::uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xFFFFu),
                                                   E5M2 ? __NV_E5M2 : __NV_E4M3);
  return std::uint32_t(h.x) | (std::uint32_t(h.y) << 16);
}

/// Four fp8 bytes -> bytes 0-1 and bytes 2-3 as two halves each, exact. The word's 16-bit
/// halves are handed to the cvt as registers of their own, so the upper pair is read in place
/// instead of shifted down first (one instruction a pair, not one and a half).
template <bool E5M2>
__device__ __forceinline__ void fp8x4_to_f16x2x2(std::uint32_t four, std::uint32_t& lo, std::uint32_t& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (E5M2)
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e5m2x2 %0, l;\ncvt.rn.f16x2.e5m2x2 %1, h;\n}"
        : "=r"(lo), "=r"(hi)
        : "r"(four));
  else
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}"
        : "=r"(lo), "=r"(hi)
        : "r"(four));
#else
  lo = fp8x2_to_f16x2<E5M2>(four);
  hi = fp8x2_to_f16x2<E5M2>(four >> 16);
#endif
}

/// Applies scale/soft-cap/ALiBi and the key mask to a score tile, in place, in the log2
/// domain. sc is the CTA's KV head's score_scale; key0 is the absolute index of the tile's
/// first key; pos[h] and vis[h] belong to this thread's two rows; masked=false skips the
/// mask (tile fully visible to every row).
template <int NT>
__device__ __forceinline__ void score_tile(const AttnParams& p, const ScoreScale& sc, float (&s)[NT][4], int key0,
                                           const int (&pos)[2], const KeyRange (&vis)[2], const float (&alibi)[2],
                                           bool masked) {
  const int lane = threadIdx.x % 32;
  const bool has_alibi = p.alibi_slopes != nullptr;
  if (!masked && !has_alibi && sc.softcap_inv == 0.0f) {  // the common case: scale only
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] *= sc.scale_log2;
    return;
  }
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2;
      const int key = key0 + n * 8 + 2 * (lane % 4) + (e & 1);
      float v = score_to_log2(p, sc, s[n][e]);
      if (has_alibi) v += alibi[h] * static_cast<float>(key - pos[h]);
      if (masked && (key < vis[h].lo || key >= vis[h].hi)) v = -INFINITY;
      s[n][e] = v;
    }
}

/// Online softmax over a score tile (in place: s becomes probabilities); rescales O.
/// PROB_LOG2 > 0 computes the probabilities as 2^PROB_LOG2·exp2(s − m) (l and O carry the
/// same factor, which the final normalisation cancels): for fp8 products.
template <int DP, int NT, int PROB_LOG2 = 0>
__device__ __forceinline__ void softmax_tile(WarpState<DP>& st, float (&s)[NT][4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(st.m[h], mx);
    // A row with nothing visible yet keeps m = -inf; use 0 as the reference to avoid NaN.
    const float ref = (m_new == -INFINITY) ? 0.0f : m_new;
    const float corr = fast_exp2(st.m[h] - ref);
    st.m[h] = m_new;
    float sum = 0.0f;
    const float sub = ref - float(PROB_LOG2);
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      s[n][2 * h] = fast_exp2(s[n][2 * h] - sub);
      s[n][2 * h + 1] = fast_exp2(s[n][2 * h + 1] - sub);
      sum += s[n][2 * h] + s[n][2 * h + 1];
    }
    st.l[h] = st.l[h] * corr + sum;
#pragma unroll
    for (int j = 0; j < DP / 8; ++j) {
      st.o[j][2 * h] *= corr;
      st.o[j][2 * h + 1] *= corr;
    }
  }
}

/// Per-thread row bookkeeping for the two rows lane/4 and lane/4+8 of a warp's 16 rows.
struct RowInfo {
  int pos[2];
  KeyRange vis[2];
  float alibi[2];  ///< slope * log2(e), 0 without ALiBi
};

__device__ __forceinline__ RowInfo row_info(const AttnParams& p, const PackedRows& pr, int kv_head, int warp_row0,
                                            int seq_len) {
  const int lane = threadIdx.x % 32;
  RowInfo ri;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = min(warp_row0 + lane / 4 + 8 * h, pr.rows - 1);
    ri.pos[h] = pr.ctx + row / p.group;
    ri.vis[h] = visible_keys(p, ri.pos[h], seq_len);
    ri.alibi[h] = p.alibi_slopes ? p.alibi_slopes[kv_head * p.group + row % p.group] * kLog2e : 0.0f;
  }
  return ri;
}

}  // namespace attnsel::kernel::cuda
