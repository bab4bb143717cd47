// The absorbed MLA decode on Hopper, 64 query rows per CTA (DecodeForm::rows64): the
// compute-bound form, for many heads or several query tokens per request.
//
// The schedule is FlashMLA's "seesaw" (docs/20250422-new-kernel-deep-dive.md; the kernel in
// csrc/sm90/decode/dense/splitkv_mla.cuh), written here with attnsel's own helpers. A CTA
// holds 64 query rows (request r's rows = its query tokens × heads, packed) of 576 columns
// in shared memory, and two key tiles K0, K1 of 64 × 576 (the latent rows; V is their
// first 512 columns), each loaded by TMA as nine 64-column pieces with a barrier each, so a
// product starts as soon as its piece lands. The output (64 × 512 fp32) is too large for one
// warpgroup's registers: warpgroup 0 holds its left half O_L, warpgroup 1 the right half
// O_R. Per pair of key tiles:
//   warpgroup 0: S0 = Q·K0ᵀ (computed ahead), softmax against the running maximum m
//                (shared in shared memory), O_L = O_L·c0 + P0·V0_L;
//   warpgroup 1: S1 = Q·K1ᵀ, softmax against m (after warpgroup 0's update), O_R =
//                O_R·c0·c1 + P1·V1_R + (P0·c1)·V0_R;
//   warpgroup 0: O_L = O_L·c1 + P1·V1_L;
// where c0, c1 rescale to each new maximum. Each warpgroup's P goes to the other through
// shared memory; while one warpgroup runs its softmax the other's products keep the tensor
// cores busy, and each piece of K0 and K1 is refilled for the next pair as soon as its last
// reader is done. The last 64 columns of the queries move to registers once loaded, so
// their shared memory can hold P1.
//
// Rows past a request's (a tile's padding) are computed and not stored; keys past a row's
// causal border (L - s_q + token) are masked; the rows of the last tile past the request's
// keys (stale or poisoned cache slots) are zeroed before V is read.
#include <cuda.h>

#include <atomic>

#include "kernels/device/cuda/cuda_check.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"
#include "kernels/device/cuda/wgmma_ops.cuh"
#include "kernels/device/cuda/wgmma_sync.cuh"
#include "kernels/mla/cuda/decode_common.cuh"
#include "kernels/mla/cuda/tma_maps.hpp"

namespace attnsel::kernel::cuda::mla {
namespace {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNSEL_MLA_SM90A 1
#endif

constexpr int kThreads = 256;
constexpr int kRows = 64;
constexpr int kPieces = kLatentDim / 64;  // 64-column pieces of a row
constexpr std::uint32_t kPieceBytes = 64 * 128;
constexpr std::uint32_t kTileBytes = kPieces * kPieceBytes;
// Shared memory, from a 1024-byte aligned base (the 128-byte swizzle's period).
constexpr std::uint32_t kQ = 0;
constexpr std::uint32_t kK0 = kTileBytes;
constexpr std::uint32_t kK1 = 2 * kTileBytes;
constexpr std::uint32_t kP0 = 3 * kTileBytes;
constexpr std::uint32_t kP1 = kQ + 8 * kPieceBytes;  // the queries' last piece, in registers meanwhile
constexpr std::uint32_t kM = kP0 + kPieceBytes;      // 64 floats: the rows' running maxima (log2 domain)
constexpr std::uint32_t kScale0 = kM + 256;          // c0 of each row
constexpr std::uint32_t kScale1 = kScale0 + 256;     // c1 of each row
constexpr std::uint32_t kL = kScale1 + 256;          // 2 × 64 floats: each warpgroup's row sums
constexpr std::uint32_t kBars = kL + 512;            // Q, then K0's nine pieces, then K1's
// The piece being computed and the next (written by thread 0, which walks the part's run),
// and each warpgroup issuer's page ids of the two tiles it loads next.
constexpr std::uint32_t kPieceSlots = kBars + 8 * (1 + 2 * kPieces);
constexpr std::uint32_t kPages = kPieceSlots + 2 * 48;
constexpr std::uint32_t kEnd = kPages + 2 * 2 * kMaxBoxesPerTile * 4;
constexpr std::size_t kSmemBytes = kEnd + 1024;
static_assert(kSmemBytes <= 232448, "more shared memory than a Hopper CTA may have");

// Named barriers between the two warpgroups (256 threads: one arrives, the other syncs)
// and within one (128).
enum : int { kScale0Ready = 1, kScale1Ready = 2, kP0Ready = 3, kP1Issued = 4, kWarpgroup0 = 5 };

struct Thread {
  int wg;    ///< warpgroup (uniform in the warp)
  int tid;   ///< index in the warpgroup
  int g, t;  ///< the lane's quad row and column
  int row0, row1;  ///< the tile rows whose accumulators it holds
};

__device__ __forceinline__ float* smem_f(std::uint8_t* base, std::uint32_t off) {
  return reinterpret_cast<float*>(base + off);
}

/// The queries' last 64 columns as wgmma A fragments (k16 step kk), from the swizzled piece.
__device__ __forceinline__ void load_q_last_piece(std::uint32_t (&rq)[4][4], std::uint32_t q_piece, const Thread& th) {
  const int lane = th.tid % 32, warp = th.tid / 32;
  const int row = 16 * warp + lane % 8 + 8 * ((lane / 8) % 2);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const int chunk = 2 * kk + lane / 16;
    ldmatrix_x4(rq[kk], q_piece + row * 128 + ((chunk ^ (row % 8)) << 4));
  }
}

/// S += Q·Kᵀ over pieces [FIRST, LAST) of a key tile, each after its barrier; ZERO: the
/// first product overwrites S.
template <class T, int FIRST, int LAST, bool ZERO>
__device__ __forceinline__ void qk_pieces(float (&s)[8][4], const std::uint32_t (&rq)[4][4], std::uint32_t q_tile,
                                          std::uint32_t k_tile, std::uint32_t bars, std::uint32_t phase) {
#pragma unroll
  for (int c = FIRST; c < LAST; ++c) {
    mbar_wait_in_asm(bars + 8 * c, phase);
    wgmma_fence();
    const std::uint64_t kd = sw128_desc(k_tile + c * kPieceBytes, 16, 1024);
    if (c < kPieces - 1) {
      const std::uint64_t qd = sw128_desc(q_tile + c * kPieceBytes, 16, 1024);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        WgmmaSS<T, 64>::run(s, desc_plus(qd, kk * 32), desc_plus(kd, kk * 32), ZERO && c == FIRST && kk == 0 ? 0 : 1);
    } else {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) WgmmaRSK<T, 64>::run(s, rq[kk], desc_plus(kd, kk * 32), 1);
    }
    wgmma_commit();
  }
}

/// O += P·V (one 256-column half `half` of key tile `k_tile`), P from registers.
template <class T>
__device__ __forceinline__ void pv_local(float (&o)[32][4], std::uint32_t (&pa)[4][4], std::uint32_t k_tile, int half) {
  const std::uint64_t vd = sw128_desc(k_tile + 4 * half * kPieceBytes, kPieceBytes, 1024);
  fence_operand(pa);
  wgmma_fence();
#pragma unroll
  for (int kb = 0; kb < 4; ++kb) WgmmaRS<T, 256>::run(o, pa[kb], desc_plus(vd, kb * 2048), 1);
  wgmma_commit();
}

/// O += P·V with P from shared memory (64 rows × 64 keys, swizzled).
template <class T>
__device__ __forceinline__ void pv_shared(float (&o)[32][4], std::uint32_t p_tile, std::uint32_t k_tile, int half) {
  const std::uint64_t vd = sw128_desc(k_tile + 4 * half * kPieceBytes, kPieceBytes, 1024);
  const std::uint64_t pd = sw128_desc(p_tile, 16, 1024);
  wgmma_fence();
#pragma unroll
  for (int kb = 0; kb < 4; ++kb) WgmmaSSMN<T, 256>::run(o, desc_plus(pd, kb * 32), desc_plus(vd, kb * 2048), 1);
  wgmma_commit();
}

/// Masks S (raw q·k) where a key lies past its row's border, and returns the rows' maxima.
__device__ __forceinline__ void mask_and_max(float (&s)[8][4], float (&mx)[2], const Thread& th, int key0,
                                             const int (&border)[2], bool masked) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (masked && key0 + 8 * j + 2 * th.t + e >= border[h]) s[j][2 * h + e] = -INFINITY;
        m = fmaxf(m, s[j][2 * h + e]);
      }
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    mx[h] = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
  }
}

/// P = exp2(S·scale − ref) in place; returns each row's sum over this thread's columns.
__device__ __forceinline__ void exponentiate(float (&s)[8][4], const float (&ref)[2], float scale_log2, float (&sum)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float a = 0.0f, b = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      s[j][2 * h] = fast_exp2(fmaf(s[j][2 * h], scale_log2, -ref[h]));
      s[j][2 * h + 1] = fast_exp2(fmaf(s[j][2 * h + 1], scale_log2, -ref[h]));
      (j % 2 ? b : a) += s[j][2 * h] + s[j][2 * h + 1];
    }
    sum[h] = a + b;
  }
}

/// A row's running maximum after a tile whose raw maximum is `tile_max` (`m_new`, in the
/// log2 domain), and `ref`, what the tile's exponents subtract (0 while the row has seen no
/// key). Returns the factor that takes what was summed against `m_old` to `ref`.
__device__ __forceinline__ float raise_max(float m_old, float tile_max, float scale_log2, float& m_new, float& ref) {
  m_new = fmaxf(m_old, tile_max * scale_log2);
  ref = m_new == -INFINITY ? 0.0f : m_new;
  return fast_exp2(m_old - ref);
}

/// Rescales this thread's accumulator rows (row0 by f[0], row1 by f[1]).
__device__ __forceinline__ void scale_rows(float (&o)[32][4], const float (&f)[2]) {
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    o[j][0] *= f[0];
    o[j][1] *= f[0];
    o[j][2] *= f[1];
    o[j][3] *= f[1];
  }
}

template <class T>
__device__ __forceinline__ void pack_p(std::uint32_t (&pa)[4][4], const float (&s)[8][4], const float (&f)[2]) {
#pragma unroll
  for (int kb = 0; kb < 4; ++kb) {
    pa[kb][0] = pack2<T>(s[2 * kb][0] * f[0], s[2 * kb][1] * f[0]);
    pa[kb][1] = pack2<T>(s[2 * kb][2] * f[1], s[2 * kb][3] * f[1]);
    pa[kb][2] = pack2<T>(s[2 * kb + 1][0] * f[0], s[2 * kb + 1][1] * f[0]);
    pa[kb][3] = pack2<T>(s[2 * kb + 1][2] * f[1], s[2 * kb + 1][3] * f[1]);
  }
}

/// Stores P (A fragments) to a 64 × 64 swizzled tile, which the other warpgroup reads.
__device__ __forceinline__ void store_p(std::uint8_t* p_tile, const std::uint32_t (&pa)[4][4], const Thread& th) {
#pragma unroll
  for (int kb = 0; kb < 4; ++kb)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = i % 2 ? th.row1 : th.row0;
      const int chunk = 2 * kb + i / 2;  // 8 keys a 16-byte chunk
      *reinterpret_cast<std::uint32_t*>(p_tile + row * 128 + ((chunk ^ (row % 8)) << 4) + 4 * th.t) = pa[kb][i];
    }
}

/// Zeroes V's rows [valid, 64) of half `half` of a key tile (cache rows past the keys: stale
/// or never-written slots, whose NaN would survive a zero probability), then publishes the
/// zeros to the tensor cores of the warpgroup (`wg_barrier`).
__device__ __forceinline__ void zero_tail_rows(std::uint8_t* k_tile, int half, int valid, int tid, int wg_barrier) {
  const int units = (kRows - valid) * 4 * 8;  // 16-byte units: rows × pieces × 8
  for (int u = tid; u < units; u += 128) {
    const int row = valid + u / 32, piece = 4 * half + (u / 8) % 4, chunk = u % 8;
    *reinterpret_cast<uint4*>(k_tile + piece * kPieceBytes + row * 128 + chunk * 16) = make_uint4(0, 0, 0, 0);
  }
  fence_async_smem();
  named_sync(wg_barrier, 128);
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1)
    decode_rows64_kernel(const __grid_constant__ DecodeParams p, const __grid_constant__ DecodeMaps maps) {
#ifdef ATTNSEL_MLA_SM90A
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  const std::uint32_t raw_addr = smem_addr(smem_raw);
  std::uint8_t* smem = smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
  const std::uint32_t base = smem_addr(smem);
  const CUtensorMap* cache_map = reinterpret_cast<const CUtensorMap*>(maps.bytes.data());
  const CUtensorMap* q_map = reinterpret_cast<const CUtensorMap*>(maps.bytes.data() + 128);

  Thread th;
  th.wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  th.tid = static_cast<int>(threadIdx.x) % 128;
  const int lane = th.tid % 32;
  th.g = lane / 4;
  th.t = lane % 4;
  th.row0 = 16 * (th.tid / 32) + th.g;
  th.row1 = th.row0 + 8;
  const bool issuer = threadIdx.x % 128 == 0;  // thread 0 of each warpgroup issues its copies

  const std::uint32_t bar_q = base + kBars;
  const std::uint32_t bars_k[2] = {base + kBars + 8, base + kBars + 8 + 8 * kPieces};
  const std::uint32_t k_tile[2] = {base + kK0, base + kK1};
  float* s_m = smem_f(smem, kM);
  float* s_scale0 = smem_f(smem, kScale0);
  float* s_scale1 = smem_f(smem, kScale1);
  float* s_l = smem_f(smem, kL);
  if (threadIdx.x == 0) {
    mbar_init(bar_q, 1);
    for (int c = 0; c < 2 * kPieces; ++c) mbar_init(bars_k[0] + 8 * c, 1);
    mbar_fence_init();
  }
  __syncthreads();
  wait_for_prior_grids();  // the queries, the cache and the plan come from work before this kernel

  const int row_tile = static_cast<int>(blockIdx.x);
  // The part's run: thread 0 walks it, the CTA reads each piece from shared memory (so no
  // register of every thread holds the walk's state through the products).
  struct PieceSlot {
    DecodePiece piece;
    int valid;
    int pad[2];
  };
  static_assert(sizeof(PieceSlot) == 48);
  PieceSlot* slots = reinterpret_cast<PieceSlot*>(smem + kPieceSlots);
  int* my_pages = reinterpret_cast<int*>(smem + kPages) + th.wg * 2 * kMaxBoxesPerTile;
  // A piece's queries and first two key tiles (issued for the next piece while this one's
  // rows are written).
  auto issue_piece_start = [&](const DecodePiece& n) {
    const int first_row = n.q_begin * p.num_heads + row_tile * kRows;
    mbar_arrive_expect_tx(bar_q, kTileBytes);
    for (int c = 0; c < kPieces; ++c) tma_load_2d(base + kQ + c * kPieceBytes, q_map, bar_q, 64 * c, first_row);
    tile_pages(p, n.req, n.seq_len, n.tile_begin, my_pages);
    issue_tile_pieces<64, kPieceBytes>(p, cache_map, k_tile[0], bars_k[0], my_pages, n.tile_begin, 0, kPieces);
    if (n.tile_begin + 1 < n.tile_end) {
      tile_pages(p, n.req, n.seq_len, n.tile_begin + 1, my_pages);
      issue_tile_pieces<64, kPieceBytes>(p, cache_map, k_tile[1], bars_k[1], my_pages, n.tile_begin + 1, 0, kPieces);
    }
  };
  if (threadIdx.x == 0) {
    DecodePiece first;
    slots[0].valid = next_piece(p, -1, row_tile, kRows, first);
    slots[0].piece = first;
    if (slots[0].valid) issue_piece_start(first);
  }
  __syncthreads();

  std::uint32_t phase_q = 0, phase_k0 = 0, phase_k1 = 0;
  for (int cur = 0; slots[cur].valid; cur ^= 1) {
    // ---- one request's rows against its tiles [tb, te) ----
    const DecodePiece& pc = slots[cur].piece;
    const int tb = pc.tile_begin, te = pc.tile_end, seq_len = pc.seq_len, req = pc.req, min_border = pc.min_border;
    if (th.wg == 0 && th.tid < kRows) s_m[th.tid] = -INFINITY;
    int border[2];
    border[0] = row_border(pc, p.num_heads, row_tile * kRows + th.row0);
    border[1] = row_border(pc, p.num_heads, row_tile * kRows + th.row1);
    __syncthreads();

    float o[32][4];
#pragma unroll
    for (int j = 0; j < 32; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float l[2] = {0.0f, 0.0f};
    float s[8][4];
    std::uint32_t rq[4][4];
    mbar_wait_in_asm(bar_q, phase_q);
    phase_q ^= 1;
    load_q_last_piece(rq, base + kQ + 8 * kPieceBytes, th);

    const float sl = p.scale_log2;
    if (th.wg == 0) {
      qk_pieces<T, 0, kPieces, true>(s, rq, base + kQ, k_tile[0], bars_k[0], phase_k0);
      phase_k0 ^= 1;
      wgmma_wait<0>();
      fence_operand(s);
    } else if (tb + 1 < te) {
      qk_pieces<T, 0, kPieces, true>(s, rq, base + kQ, k_tile[1], bars_k[1], phase_k1);
      phase_k1 ^= 1;
      wgmma_wait<0>();
      fence_operand(s);
    }

    for (int b = tb; b < te; b += 2) {
      const bool has1 = b + 1 < te, has2 = b + 2 < te, has3 = b + 3 < te;
      const int key0 = b * kKeyTile;
      // A tile needs the mask where some row's border falls inside or before it.
      const bool masked0 = key0 + kKeyTile > min_border;
      const bool masked1 = key0 + 2 * kKeyTile > min_border;
      if (issuer) {  // the page ids of tiles b+2 and b+3, loaded well before they are needed
        if (has2) tile_pages(p, req, seq_len, b + 2, my_pages);
        if (has3) tile_pages(p, req, seq_len, b + 3, my_pages + kMaxBoxesPerTile);
      }
      if (th.wg == 0) {
        // -- warpgroup 0: softmax of tile b against the running maximum --
        float mx[2], ref[2], c0[2], sum[2];
        mask_and_max(s, mx, th, key0, border, masked0);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = h ? th.row1 : th.row0;
          float m_new;
          c0[h] = raise_max(s_m[row], mx[h], sl, m_new, ref[h]);
          __syncwarp();
          if (th.t == 0) {
            s_scale0[row] = c0[h];
            s_m[row] = m_new;
          }
        }
        exponentiate(s, ref, sl, sum);
        scale_rows(o, c0);
        l[0] = l[0] * c0[0] + sum[0];
        l[1] = l[1] * c0[1] + sum[1];
        named_arrive(kScale0Ready, 256);
        std::uint32_t pa[4][4];
        const float one[2] = {1.0f, 1.0f};
        pack_p<T>(pa, s, one);
        if (seq_len - key0 < kKeyTile) zero_tail_rows(smem + kK0, 0, max(seq_len - key0, 0), th.tid, kWarpgroup0);
        pv_local<T>(o, pa, k_tile[0], 0);
        wgmma_wait<0>();
        fence_operand(o);
        // -- after warpgroup 1's softmax: P0 rescaled to the new maximum, for V0_R --
        named_sync(kScale1Ready, 256);
        if (issuer && has2) issue_tile_pieces<64, kPieceBytes>(p, cache_map, k_tile[0], bars_k[0], my_pages, b + 2, 0, 4);
        const float c1[2] = {s_scale1[th.row0], s_scale1[th.row1]};
        pack_p<T>(pa, s, c1);
        store_p(smem + kP0, pa, th);
        fence_async_smem();
        named_arrive(kP0Ready, 256);
        if (has1) {
          if (seq_len - key0 - kKeyTile < kKeyTile)
            zero_tail_rows(smem + kK1, 0, max(seq_len - key0 - kKeyTile, 0), th.tid, kWarpgroup0);
          named_sync(kP1Issued, 256);
          scale_rows(o, c1);
          l[0] *= c1[0];
          l[1] *= c1[1];
          pv_shared<T>(o, base + kP1, k_tile[1], 0);
        }
        if (has2) qk_pieces<T, 0, 4, true>(s, rq, base + kQ, k_tile[0], bars_k[0], phase_k0);
        if (has3) {
          wgmma_wait<4>();  // P1·V1_L done: K1's left half is free
          if (issuer)
            issue_tile_pieces<64, kPieceBytes>(p, cache_map, k_tile[1], bars_k[1], my_pages + kMaxBoxesPerTile, b + 3,
                                               0, 4);
        }
        if (has2) {
          qk_pieces<T, 4, kPieces, false>(s, rq, base + kQ, k_tile[0], bars_k[0], phase_k0);
          phase_k0 ^= 1;
        }
        wgmma_wait<0>();
        fence_operand(o);
        fence_operand(s);
      } else {
        // -- warpgroup 1: softmax of tile b+1 after warpgroup 0's --
        named_sync(kScale0Ready, 256);
        float c01[2];
        std::uint32_t pa[4][4];
        if (has1) {
          float mx[2], ref[2], sum[2];
          mask_and_max(s, mx, th, key0 + kKeyTile, border, masked1);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = h ? th.row1 : th.row0;
            float m_new;
            const float c1 = raise_max(s_m[row], mx[h], sl, m_new, ref[h]);
            c01[h] = s_scale0[row] * c1;
            __syncwarp();
            if (th.t == 0) {
              s_m[row] = m_new;
              s_scale1[row] = c1;
            }
          }
          exponentiate(s, ref, sl, sum);
          l[0] = l[0] * c01[0] + sum[0];
          l[1] = l[1] * c01[1] + sum[1];
        } else {
          c01[0] = s_scale0[th.row0];
          c01[1] = s_scale0[th.row1];
          if (th.t == 0) {
            s_scale1[th.row0] = 1.0f;
            s_scale1[th.row1] = 1.0f;
          }
          l[0] *= c01[0];
          l[1] *= c01[1];
        }
        scale_rows(o, c01);
        named_arrive(kScale1Ready, 256);
        if (has1) {
          const float one[2] = {1.0f, 1.0f};
          pack_p<T>(pa, s, one);
          store_p(smem + kP1, pa, th);
          if (seq_len - key0 - kKeyTile < kKeyTile)
            zero_tail_rows(smem + kK1, 1, max(seq_len - key0 - kKeyTile, 0), th.tid, kWarpgroup0 + 1);
          fence_async_smem();
          pv_local<T>(o, pa, k_tile[1], 1);
        }
        named_sync(kP0Ready, 256);
        if (seq_len - key0 < kKeyTile)
          zero_tail_rows(smem + kK0, 1, max(seq_len - key0, 0), th.tid, kWarpgroup0 + 1);
        pv_shared<T>(o, base + kP0, k_tile[0], 1);
        if (has1) named_arrive(kP1Issued, 256);
        if (has3) {
          wgmma_wait<1>();  // P1·V1_R done: K1's right half and last piece are free
          if (issuer)
            issue_tile_pieces<64, kPieceBytes>(p, cache_map, k_tile[1], bars_k[1], my_pages + kMaxBoxesPerTile, b + 3,
                                               4, kPieces);
        }
        // P0·V0_R done: K0's right half is free. (An unconditional wait: behind a condition,
        // ptxas serialises the products that follow, C7515.)
        wgmma_wait<0>();
        fence_operand(o);
        if (issuer && has2)
          issue_tile_pieces<64, kPieceBytes>(p, cache_map, k_tile[0], bars_k[0], my_pages, b + 2, 4, kPieces);
        if (has3) {
          qk_pieces<T, 4, kPieces, true>(s, rq, base + kQ, k_tile[1], bars_k[1], phase_k1);
          qk_pieces<T, 0, 4, false>(s, rq, base + kQ, k_tile[1], bars_k[1], phase_k1);
          phase_k1 ^= 1;
        }
        wgmma_wait<0>();
        fence_operand(o);
        fence_operand(s);
      }
    }

    // ---- the request's rows are done: prefetch the next piece, then write these ----
    __syncthreads();  // every product has read the queries and both key tiles
    if (threadIdx.x == 0) {
      DecodePiece next;
      slots[cur ^ 1].valid = next_piece(p, pc.req, row_tile, kRows, next);
      slots[cur ^ 1].piece = next;
      if (slots[cur ^ 1].valid) issue_piece_start(next);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    if (th.t == 0) {
      s_l[th.wg * kRows + th.row0] = l[0];
      s_l[th.wg * kRows + th.row1] = l[1];
    }
    __syncthreads();
    const std::int64_t row_base = std::int64_t(pc.q_begin) * p.num_heads + row_tile * kRows;
    const int rows = pc.rows, slot = pc.slot;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = h ? th.row1 : th.row0;
      if (row >= rows) continue;
      const float lt = s_l[row] + s_l[kRows + row];
      const float m = s_m[row];
      const float inv = lt > 0.0f ? 1.0f / lt : 0.0f;
      const int request_row = row_tile * kRows + row;
      if (slot < 0) {
        T* out = static_cast<T*>(p.out) + (row_base + row) * p.out_row_stride + 256 * th.wg + 2 * th.t;
#pragma unroll
        for (int j = 0; j < 32; ++j)
          *reinterpret_cast<std::uint32_t*>(out + 8 * j) = pack2<T>(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
        if (p.lse && th.wg == 0 && th.t == 0) p.lse[row_base + row] = row_lse_log2(m, lt) * kLn2;
      } else {
        float* out = p.part_o + (std::int64_t(slot) * p.max_rows + request_row) * kValueDim + 256 * th.wg + 2 * th.t;
#pragma unroll
        for (int j = 0; j < 32; ++j)
          *reinterpret_cast<float2*>(out + 8 * j) = make_float2(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
        if (th.wg == 0 && th.t == 0) p.part_lse[std::int64_t(slot) * p.max_rows + request_row] = row_lse_log2(m, lt);
      }
    }
    __syncthreads();  // the rows' maxima and sums are read before the next piece resets them
  }
  // Every CTA lets the combine kernel launch once it has written its last rows.
  allow_dependent_grids();
#endif
}

std::atomic<std::uint64_t> g_smem_set[2];

}  // namespace

void launch_decode_rows64(const DecodeParams& p, ScalarType e, int row_tiles, const void* maps, bool programmatic,
                          void* stream) {
  const dim3 grid(row_tiles, 1, p.num_parts), block(kThreads);
  const DecodeMaps& m = *static_cast<const DecodeMaps*>(maps);
  auto run = [&](auto kernel, std::atomic<std::uint64_t>& done) {
    auto cfg = [&] { return cfg_string("rows64 decode: {} row tiles x {} parts", row_tiles, p.num_parts); };
    set_max_smem_once(done, kernel, static_cast<int>(kSmemBytes), "cudaFuncSetAttribute (MLA rows64 decode)", cfg);
    check_cuda(launch_kernel(kernel, grid, block, kSmemBytes, static_cast<cudaStream_t>(stream), programmatic, p, m),
               "MLA rows64 decode", cfg());
  };
  if (e == ScalarType::bf16) run(decode_rows64_kernel<__nv_bfloat16>, g_smem_set[0]);
  else run(decode_rows64_kernel<__half>, g_smem_set[1]);
}

}  // namespace attnsel::kernel::cuda::mla
