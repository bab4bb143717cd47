// Prefill over the paged cache on Hopper (sm_90a): TMA loads in a producer warpgroup,
// wgmma in two consumer warpgroups, mbarrier pipelines between them.
//
// One CTA = 128 query rows of one query head (64 per consumer warpgroup). The producer's
// first warp loads Q and K/V tiles into a two-stage ring, page by page through the
// block table (one TMA box per page slice and 128-byte column chunk, 128-byte swizzled; V
// at head sizes 128 and 256 on 16-key boxes one box per page slice holding all its chunks,
// HopperVariant::v_page_boxes, which P·V reads one box per 16-key step).
// Each consumer computes S = Q·Kᵀ with both operands in shared memory, applies the score
// modifiers and the online softmax in registers, and accumulates O += P·V with P taken
// straight from registers and V read transposed from shared memory. The softmax folds the
// score scale into exp2's FMA and rescales O only when a row maximum grows by more than
// 2^8 (2^3 for e4m3 products); its row maxima and sums run as four independent chains
// each, and the warpgroup index is warp-uniform to the compiler (shuffled from lane 0), so
// more of the wgmma descriptor arithmetic stays in uniform registers. Key tiles are 128
// keys (80 at d=256), 176 up to d=128 without a causal mask or window
// (HopperVariant::wide_keys: fewer per-tile fixed costs where no tile is masked).
//
// The two consumer warpgroups run their tiles independently (S, softmax, P·V, one after
// another): overlapping the next tile's S with this tile's softmax, and ping-pong turns of
// the two warpgroups, measured slower on the H200 (docs/KERNELS.md). The e4m3 products
// issue the next tile's S right behind this tile's P·V and wait for both together.
//
// A CTA runs one work item; the grid has one CTA per item (a persistent grid walking the
// items measured within 2 % without a causal mask and 3-7 % slower with one).
//
// fp8 (e4m3) cache, two ways (KvPath):
//  * e4m3 products (fp8 wgmma, m64nNk32; head sizes up to 128): K is the TMA tile as
//    stored (K-major, what fp8 wgmma takes); V lands raw in a staging ring and the
//    producer's other three warps transpose it into a K-major tile (d rows of keys),
//    writing zeros for keys past the sequence. Each consumer quantises its query rows to
//    e4m3 once, each row scaled so its largest magnitude becomes 448, the row's descale
//    folded into its score scale. P is computed as 32·exp2(s − m) against a row maximum
//    kept while the tile's exceeds it by at most 2^3 (so P ≤ 256 of e4m3's 448,
//    probabilities down to 2^-11 of the maximum stay normal; l carries the same factor)
//    and converted to e4m3 straight from the accumulators: the four bytes a thread packs
//    per A register are keys {2q, 2q+1, 2q+8, 2q+9} (+16 for the upper two), and the
//    transposing warps store V's keys in that same order, so no register moves across
//    lanes are needed.
//  * f16 products: TMA lands the raw bytes of K and V in a staging ring, the producer's
//    other three warps widen them (exact, e4m3 -> f16) into the swizzled f16 layout the
//    consumers read. Above d=128 the ring does not fit beside the f16 tiles: the raw bytes
//    land in the upper half of their own f16 stage and are widened in place (a row's raw
//    bytes and its f16 values share only that row, which one warp reads whole before it
//    writes it). Each consumer converts its bf16 query rows to f16 once, scaled per
//    row by a power of two (exact) that keeps them inside the half's range, and takes the
//    factor back in the score scale.
// Either way k_scale joins the score scale, v_scale the output (per KV head where given).
//
// Every head size up to 256 (an fp8 cache: those that are multiples of 16) takes this
// path, computed as 64, 96 (16-bit caches), 128 or 256 with the columns past the real size
// read as zeros by TMA (hopper_head_dim).
#include <cuda.h>

#include <type_traits>

#include "kernels/device/cuda/async_copy_sm90.cuh"
#include "kernels/attention/cuda/dispatch.cuh"
#include "kernels/device/cuda/fp8_convert.cuh"
#include "kernels/attention/cuda/fp8_wgmma_layout.hpp"
#include "kernels/attention/cuda/tile_common.cuh"
#include "kernels/device/cuda/wgmma_ops.cuh"
#include "kernels/device/cuda/wgmma_sync.cuh"

namespace attnsel::kernel::cuda {
namespace {

/// fp8: the producer's warps 1-3 widen or transpose the raw tiles.
constexpr int kWideners = 96;
/// e4m3 products compute the probabilities as 2^kE4m3ProbLog2·exp2(s − m) against a maximum
/// up to 2^kE4m3LazyLog2 stale (16-bit ones: kLazyRescaleLog2, tile_common.cuh): up to
/// 2^(5+3) = 256 of e4m3's 448.
constexpr int kE4m3ProbLog2 = 5;
constexpr int kE4m3LazyLog2 = 3;
static_assert((1 << (kE4m3ProbLog2 + kE4m3LazyLog2)) <= 448, "stale-maximum probabilities must stay finite in e4m3");

template <class T, int D, KvPath P, int KEYS = hopper_key_tile(D)>
struct HopperConfig {
  static constexpr bool kFp8 = P != KvPath::b16;
  static constexpr bool kWiden = P == KvPath::f16_widened;  // raw K and V widened to f16
  static constexpr bool kE4m3 = P == KvPath::e4m3;          // fp8 wgmma; raw V transposed
  static_assert(!kE4m3 || D <= 128, "e4m3 products: the transposed V and the e4m3 queries fit up to d=128");
  // f16 products above d=128: raw tiles land in their f16 stage's upper half (no ring).
  static constexpr bool kInPlace = kWiden && D > 128;
  // 128-byte raw boxes (fp8 columns) per key row; in place, box c lands on f16 chunk
  // kChunks/2 + c, the upper half of the chunks it widens into.
  static constexpr int kRawBoxes = (D + 127) / 128;
  static constexpr int kThreads = 384;  // producer warpgroup + two consumer warpgroups
  static constexpr int kRows = kHopperRows;
  static constexpr int kKeys = KEYS;
  static constexpr int kNT = kKeys / 8;
  static_assert(kKeys % 16 == 0, "P·V steps over 16 keys");
  static_assert(!kE4m3 || kKeys == 128, "e4m3: one 128-byte swizzle atom of keys per transposed V row");
  // e4m3 tiles are half the bytes: a third stage fits.
  static constexpr int kStages = kE4m3 ? 3 : 2;
  // Columns a tile row holds: D rounded up to whole 64-column (128-byte) swizzle atoms (at
  // D=96 the second atom's upper half holds TMA's zeros, never read by the products).
  static constexpr int kLayoutD = (D + 63) / 64 * 64;
  static_assert(!kFp8 || D == kLayoutD, "fp8 paths widen and transpose whole 64-column chunks");
  static constexpr int kChunks = kLayoutD / 64;  // swizzle atoms per row
  static constexpr std::uint32_t kQBytes = kRows * kLayoutD * 2;  // the 16-bit queries as loaded
  static constexpr std::uint32_t kQ8Bytes = kE4m3 ? kRows * 128 : 0;  // e4m3 queries
  // One stage of K and of V as the wgmma reads them: e4m3 K as stored (128 bytes a key),
  // e4m3 V transposed (D rows of 128 keys), or 16-bit tiles.
  static constexpr std::uint32_t kKBytes = kE4m3 ? kKeys * 128 : kKeys * kLayoutD * 2;
  static constexpr std::uint32_t kVBytes = kE4m3 ? D * kKeys : kKeys * kLayoutD * 2;
  static constexpr std::uint32_t kRawBytes = kFp8 && !kInPlace ? kKeys * 128 : 0;  // one 128-byte box column
  static constexpr std::uint32_t kKOffset = kQBytes + kQ8Bytes;
  static constexpr std::uint32_t kVOffset = kKOffset + kStages * kKBytes;
  static constexpr std::uint32_t kRawOffset = kVOffset + kStages * kVBytes;
  static constexpr std::uint32_t kRawVOffset = kRawOffset + (kWiden ? kStages * kRawBytes : 0);
  static constexpr std::uint32_t kBarOffset = kRawVOffset + kStages * kRawBytes;
  static constexpr std::uint32_t kNumBars = 1 + 4 * kStages + (kFp8 ? 4 * kStages : 0);
  static constexpr std::uint32_t kUndoOffset = kBarOffset + 8 * kNumBars;  // fp8: per-row query factors
  static constexpr std::size_t kSmemBytes = kUndoOffset + (kFp8 ? 4 * kRows : 0) + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 232448, "more shared memory than a Hopper CTA may have");
  static_assert(kQBytes % 1024 == 0 && kKOffset % 1024 == 0 && kVOffset % 1024 == 0 && kRawOffset % 1024 == 0 &&
                    kRawVOffset % 1024 == 0,
                "tiles start on the 128-byte swizzle's 1024-byte period");
  // Registers per thread after setmaxnreg (the producer widens or transposes fp8 tiles: it
  // needs more; a transposing lane holds 16 output words). setmaxnreg.inc only takes what
  // the producer's .dec gave back: the sum must stay within the CTA's launch allocation
  // (168 × 384 under __launch_bounds__(384, 1)), or the consumers wait for registers forever.
  // The ring's widening at fixed offsets keeps six addresses live: 56 measured 1.6 % faster
  // than 48 at d128; in place (d256) the consumers' O needs the 224.
  static constexpr int kProducerRegs = kE4m3 ? 64 : kInPlace ? 48 : kWiden ? 56 : 32;
  static constexpr int kConsumerRegs = kE4m3 || (kWiden && !kInPlace) ? 216 : kFp8 ? 224 : 232;
  static_assert(kProducerRegs * 128 + kConsumerRegs * 256 <= 168 * 384, "more registers than the CTA holds");
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTNSEL_SM90A 1
#endif

/// Reduces N partial values pairwise (a tree of depth log2 N, not a chain of N - 1).
template <int N, class Op> __device__ __forceinline__ float tree_reduce(float (&v)[N], Op op) {
#pragma unroll
  for (int width = 1; width < N; width *= 2)
#pragma unroll
    for (int i = 0; i + width < N; i += 2 * width) v[i] = op(v[i], v[i + width]);
  return v[0];
}
/// Online softmax of one S tile: row maxima of s as given, the per-row `scale` folded into
/// exp2's FMA (one FFMA and one exp2 an element; s already in the log2 domain: scale 1).
/// A row keeps its maximum while the tile's exceeds it by at most 2^LAZY_LOG2 (P ≤
/// 2^LAZY_LOG2, so O and l need no rescale; the final normalisation cancels the factor),
/// voted per warp so that the rescale is a branch the warp takes together.
/// PROB_LOG2 > 0 computes the probabilities as 2^PROB_LOG2·exp2(s − m) (for e4m3 products;
/// l and O carry the factor).
template <int DP, int NT, int PROB_LOG2, int LAZY_LOG2>
__device__ __forceinline__ void softmax_scaled(WarpState<DP>& st, float (&s)[NT][4], float scale0, float scale1) {
  static_assert(LAZY_LOG2 > 0, "every caller rescales lazily");
  const float scale[2] = {scale0, scale1};
  // Maxima and sums in kChains independent partial chains per row: one chain of NT
  // dependent FMNMX or FADD would leave the warp waiting out each one's latency.
  constexpr int kChains = NT < 4 ? NT : 4;
  float mx[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float part[kChains];
#pragma unroll
    for (int c = 0; c < kChains; ++c) part[c] = fmaxf(s[c][2 * h], s[c][2 * h + 1]);
#pragma unroll
    for (int n = kChains; n < NT; ++n)
      part[n % kChains] = fmaxf(part[n % kChains], fmaxf(s[n][2 * h], s[n][2 * h + 1]));
    mx[h] = tree_reduce<kChains>(part, [](float a, float b) { return fmaxf(a, b); });
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
#pragma unroll
  for (int h = 0; h < 2; ++h) mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
  float m_new[2];
  bool grow = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    m_new[h] = fmaxf(st.m[h], mx[h] * scale[h]);
    grow |= m_new[h] > st.m[h] + float(LAZY_LOG2);  // a first finite maximum always grows (-inf + x)
  }
  if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // A row with nothing visible yet keeps m = -inf; use 0 as the reference to avoid NaN.
      const float ref = (m_new[h] == -INFINITY) ? 0.0f : m_new[h];
      const float corr = fast_exp2(st.m[h] - ref);
      st.m[h] = m_new[h];
      st.l[h] *= corr;
#pragma unroll
      for (int j = 0; j < DP / 8; ++j) {
        st.o[j][2 * h] *= corr;
        st.o[j][2 * h + 1] *= corr;
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float neg = (st.m[h] == -INFINITY ? 0.0f : -st.m[h]) + float(PROB_LOG2);
    float part[kChains];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) s[n][2 * h + e] = fast_exp2(fmaf(s[n][2 * h + e], scale[h], neg));
      const float pair = s[n][2 * h] + s[n][2 * h + 1];
      part[n % kChains] = n < kChains ? pair : part[n % kChains] + pair;
    }
    st.l[h] += tree_reduce<kChains>(part, [](float a, float b) { return a + b; });
  }
}
/// Widens one raw e4m3 tile (kKeys rows × 128 swizzled bytes) into the swizzled f16 layout
/// (D/64 chunks of kKeys rows × 128 bytes); rows at or past `valid` become zeros (keys past
/// the sequence: unloaded or stale bytes, maybe NaN). `tid` in [0, kWideners).
template <class C, int D>
__device__ __forceinline__ void widen_e4m3(const unsigned char* raw, unsigned char* wide, int valid, int tid) {
  constexpr unsigned kUnits = D / 16;  // 16 raw bytes -> two 16-byte f16 units
  // A sequence's last tile: every unit checks its row. Unsigned index arithmetic: the
  // signed / and % cost four instructions each.
  auto widen_checked = [&] {
#pragma unroll 2
    for (unsigned idx = static_cast<unsigned>(tid); idx < C::kKeys * kUnits; idx += kWideners) {
      const unsigned r = idx / kUnits, u = idx % kUnits;
      uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
      if (int(r) < valid) {
        const uint4 b = *reinterpret_cast<const uint4*>(raw + r * 128 + ((u ^ (r % 8)) << 4));
        lo = e4m3x8_to<__half>(make_uint2(b.x, b.y));
        hi = e4m3x8_to<__half>(make_uint2(b.z, b.w));
      }
      unsigned char* row = wide + (u / 4) * C::kKeys * 128 + r * 128;
      const unsigned u0 = 2 * (u % 4);
      *reinterpret_cast<uint4*>(row + ((u0 ^ (r % 8)) << 4)) = lo;
      *reinterpret_cast<uint4*>(row + (((u0 + 1) ^ (r % 8)) << 4)) = hi;
    }
  };
  // Every other tile, no row checked and each thread's units at fixed offsets: with
  // kWideners a multiple of kUnits a thread keeps its unit u and steps kRowStep rows, so its
  // swizzle repeats every two steps and every address is one of six registers plus an
  // immediate (half the instructions of the indexed loop above are its address arithmetic).
  auto widen_full = [&] {
    constexpr unsigned kRowStep = kWideners / kUnits;
    constexpr int kSteps = (C::kKeys + kRowStep - 1) / kRowStep;
    static_assert(kWideners % kUnits == 0 && kRowStep % 4 == 0, "the swizzle repeats every two steps");
    const unsigned u = static_cast<unsigned>(tid) % kUnits, r0 = static_cast<unsigned>(tid) / kUnits;
    const unsigned u0 = 2 * (u % 4);
    const unsigned char* in[2];
    unsigned char *out_lo[2], *out_hi[2];
#pragma unroll
    for (int ph = 0; ph < 2; ++ph) {
      const unsigned r = r0 + ph * kRowStep, sw = r % 8;
      in[ph] = raw + r * 128 + ((u ^ sw) << 4);
      unsigned char* row = wide + (u / 4) * C::kKeys * 128 + r * 128;
      out_lo[ph] = row + ((u0 ^ sw) << 4);
      out_hi[ph] = row + (((u0 + 1) ^ sw) << 4);
    }
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      const int ph = k % 2;
      const unsigned off = (k - ph) * kRowStep * 128;
      if (k + 1 < kSteps || r0 + k * kRowStep < unsigned(C::kKeys)) {
        const uint4 b = *reinterpret_cast<const uint4*>(in[ph] + off);
        *reinterpret_cast<uint4*>(out_lo[ph] + off) = e4m3x8_to<__half>(make_uint2(b.x, b.y));
        *reinterpret_cast<uint4*>(out_hi[ph] + off) = e4m3x8_to<__half>(make_uint2(b.z, b.w));
      }
    }
  };
  if (valid >= C::kKeys)
    widen_full();
  else
    widen_checked();
}

/// Widens one f16 stage whose upper chunks hold the raw e4m3 tile (box c, 128 swizzled
/// bytes a key, on chunk kChunks/2 + c) into the whole stage, in place; rows at or past
/// `valid` become zeros. Row r's raw bytes lie only in row r of the chunks it overwrites,
/// and the kUnits threads of a row are one warp's: each step loads its units, syncs the
/// warp, then stores. `tid` in [0, kWideners).
template <class C, int D>
__device__ __forceinline__ void widen_e4m3_in_place(unsigned char* stage, int valid, int tid) {
  constexpr unsigned kUnits = D / 16;  // 16 raw bytes -> two 16-byte f16 units
  constexpr unsigned kTotal = C::kKeys * kUnits;
  constexpr int kSteps = (kTotal + kWideners - 1) / kWideners;
  static_assert(C::kInPlace && kWideners % kUnits == 0 && 32 % kUnits == 0,
                "a row's units are read by threads of one warp, in one step");
  const unsigned char* raw = stage + (C::kChunks / 2) * C::kKeys * 128;
  constexpr int kBatch = 2;  // rows in flight per thread: two loads before the first store
#pragma unroll 1
  for (int step = 0; step < kSteps; step += kBatch) {
    uint4 b[kBatch];
    unsigned r[kBatch], u[kBatch];
    bool live[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const unsigned idx = static_cast<unsigned>(tid) + unsigned(step + j) * kWideners;
      r[j] = idx / kUnits;
      u[j] = idx % kUnits;
      live[j] = step + j < kSteps && idx < kTotal;  // uniform across a row's threads
      b[j] = make_uint4(0, 0, 0, 0);
      if (live[j] && int(r[j]) < valid)
        b[j] = *reinterpret_cast<const uint4*>(raw + (u[j] / 8) * C::kKeys * 128 + r[j] * 128 +
                                               (((u[j] % 8) ^ (r[j] % 8)) << 4));
    }
    __syncwarp();  // the warp's rows are read whole before any of them is written
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (!live[j]) continue;
      uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
      if (int(r[j]) < valid) {
        lo = e4m3x8_to<__half>(make_uint2(b[j].x, b[j].y));
        hi = e4m3x8_to<__half>(make_uint2(b[j].z, b[j].w));
      }
      unsigned char* row = stage + (u[j] / 4) * C::kKeys * 128 + r[j] * 128;
      const unsigned u0 = 2 * (u[j] % 4);
      *reinterpret_cast<uint4*>(row + ((u0 ^ (r[j] % 8)) << 4)) = lo;
      *reinterpret_cast<uint4*>(row + (((u0 + 1) ^ (r[j] % 8)) << 4)) = hi;
    }
  }
}

/// e4m3: transposes one raw V tile (kKeys rows × 128 swizzled bytes, d along the row) into
/// the K-major B operand of P·V (fp8_layout::transpose_v_lane has the layout). `tid` in
/// [0, kWideners).
template <class C, int D>
__device__ __forceinline__ void transpose_v_e4m3(const unsigned char* raw, unsigned char* vt, int valid, int tid) {
  static_assert(C::kKeys == fp8_layout::kRowBytes, "a transposed row holds one tile's keys");
  fp8_layout::transpose_v_lane<D, kWideners>(
      tid, valid, [&](int off) { return *reinterpret_cast<const std::uint32_t*>(raw + off); },
      [&](int off, std::uint32_t w0, std::uint32_t w1, std::uint32_t w2, std::uint32_t w3) {
        *reinterpret_cast<uint4*>(vt + off) = make_uint4(w0, w1, w2, w3);
      });
}

/// Two 16-bit values (packed) -> two floats.
template <class T> __device__ __forceinline__ float2 unpack2(std::uint32_t v);
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(std::uint32_t v) {
  return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xFFFF0000u));
}
template <> __device__ __forceinline__ float2 unpack2<__half>(std::uint32_t v) {
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}

/// e4m3: quantises a consumer's 64 16-bit query rows (swizzled) into the e4m3 query tile
/// (128 bytes a row, 128-byte swizzle), each row scaled so that its largest magnitude
/// becomes 448 (e4m3's largest finite value); undo[r] is row r's descale. Two threads per row.
template <class T, int D, int ROWS>
__device__ __forceinline__ void queries_to_e4m3(const unsigned char* q, unsigned char* q8, int row0, int ctid,
                                                float* undo) {
  const int r = row0 + ctid / 2, half = ctid % 2;
  constexpr int kUnits = D / 16;  // 16-byte (8-element) units per thread: half of the row
  uint4 v[kUnits];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const int unit = half * kUnits + i;  // logical unit of the row
    v[i] = *reinterpret_cast<const uint4*>(q + (unit / 8) * ROWS * 128 + r * 128 + (((unit % 8) ^ (r % 8)) << 4));
    const std::uint32_t w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = unpack2<T>(w[k]);
      amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
    }
  }
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  // Zero, non-finite or (as a scale) overflowing rows keep the factor 1.
  const float sc = amax > 0.0f && amax < INFINITY ? fminf(448.0f / amax, 0x1p126f) : 1.0f;
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const int unit = half * kUnits + i;
    const std::uint32_t w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
    std::uint32_t b[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const float2 f0 = unpack2<T>(w[2 * k]), f1 = unpack2<T>(w[2 * k + 1]);
      b[k] = std::uint32_t(float2_to_e4m3x2(f0.x * sc, f0.y * sc)) |
             (std::uint32_t(float2_to_e4m3x2(f1.x * sc, f1.y * sc)) << 16);
    }
    const int d = 8 * unit;
    *reinterpret_cast<uint2*>(q8 + r * 128 + (((d / 16) ^ (r % 8)) << 4) + d % 16) = make_uint2(b[0], b[1]);
  }
  if (half == 0) undo[r] = 1.0f / sc;
}

/// Four floats -> four e4m3 bytes (round to nearest even, saturating), a first.
__device__ __forceinline__ std::uint32_t e4m3x4(float a, float b, float c, float d) {
  return std::uint32_t(float2_to_e4m3x2(a, b)) | (std::uint32_t(float2_to_e4m3x2(c, d)) << 16);
}

/// Converts a consumer's 64 bf16 query rows (swizzled, in place) to f16, each row scaled by
/// a power of two that puts its largest magnitude in [2^14, 2^15): exact, far from the
/// half's overflow, and bf16's 8 bits stay within the half's 11 down to 2^-15 of the row's
/// maximum. undo[r] takes row r's scores back. Two threads per row.
template <int D, int ROWS>
__device__ __forceinline__ void queries_to_f16(unsigned char* q, int row0, int ctid, float* undo) {
  const int r = row0 + ctid / 2, half = ctid % 2;
  constexpr int kUnits = D / 16;  // 16-byte units per thread: half of the row
  uint4* u[kUnits];
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const int unit = half * kUnits + i;  // logical unit of the row
    u[i] = reinterpret_cast<uint4*>(q + (unit / 8) * ROWS * 128 + r * 128 + (((unit % 8) ^ (r % 8)) << 4));
  }
  std::uint32_t amax = 0;  // |x| of bf16 values compared as integers: monotonic for finite ones
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const uint4 v = *u[i];
    const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) amax = max(amax, max(w[k] & 0x7FFFu, (w[k] >> 16) & 0x7FFFu));
  }
  amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  const int e = int(amax >> 7);  // biased exponent of the largest magnitude
  float f = 1.0f, back = 1.0f;
  if (amax != 0 && e < 255) {
    const int s = min(14 - (e - 127), 126);  // 2^s and 2^-s are normal floats
    f = __int_as_float((127 + s) << 23);
    back = __int_as_float((127 - s) << 23);
  }
#pragma unroll
  for (int i = 0; i < kUnits; ++i) {
    const uint4 v = *u[i];
    const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
    std::uint32_t h[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      h[k] = pack2<__half>(__uint_as_float(w[k] << 16) * f, __uint_as_float(w[k] & 0xFFFF0000u) * f);
    *u[i] = make_uint4(h[0], h[1], h[2], h[3]);
  }
  if (half == 0) undo[r] = back;
}

template <class T, int D, KvPath KP, int V>
__global__ void __launch_bounds__(384, 1)
    prefill_sm90_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ CUtensorMap tm_q,
                        const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v,
                        const __grid_constant__ CUtensorMap tm_o, const int store_by_tma, const int box_rows) {
#ifdef ATTNSEL_SM90A
  constexpr bool kWide = (V & HopperVariant::wide_keys) != 0;
  // e4m3 products issue the next tile's S = Q·Kᵀ right behind this tile's P·V and wait for
  // both together: the tensor pipe gets a warpgroup's next product without the wake-up and
  // issue gap between them (S's accumulators are free once P is packed). On the H200 that is
  // 6 % faster with e4m3 products and −3 % to +4 % with 16-bit ones, which do not.
  constexpr bool kIssueAhead = KP == KvPath::e4m3;
  // Page-boxed V (HopperVariant::v_page_boxes): box b of a stage holds keys 16b..16b+15,
  // every 64-column chunk of them (kVBox bytes), which is exactly P·V's k-step b.
  constexpr bool kVPageBoxes = (V & HopperVariant::v_page_boxes) != 0;
  static_assert(!kWide || hopper_wide_keys_apply(D, KP), "wide key tiles: d ≤ 128, 16-bit cache");
  static_assert(!kVPageBoxes || hopper_v_page_boxes_apply(D, KP, 16), "page-boxed V: d 128 or 256, 16-bit cache");
  using C = HopperConfig<T, D, KP, hopper_key_tile(D, V)>;
  constexpr int kVBoxRows = 16;
  constexpr std::uint32_t kVBox = kVBoxRows * 128 * C::kChunks;
  constexpr bool FP8 = C::kFp8, kE4m3 = C::kE4m3;
  using M = std::conditional_t<FP8, __half, T>;  // the 16-bit products' element type
  // e4m3 P is 2^5·exp2(s − m): a maximum 2^3 stale keeps it under e4m3's 448.
  constexpr int kProbLog2 = kE4m3 ? kE4m3ProbLog2 : 0;
  constexpr int kLazy = kE4m3 ? kE4m3LazyLog2 : kLazyRescaleLog2;
  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  const std::uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* base_ptr = smem_raw + (base - raw);
  const std::uint32_t q_s = base;
  const std::uint32_t q8_s = base + C::kQBytes;  // e4m3 queries
  auto k_s = [&](int s) { return base + C::kKOffset + s * C::kKBytes; };
  auto v_s = [&](int s) { return base + C::kVOffset + s * C::kVBytes; };
  auto rk_s = [&](int s) { return base + C::kRawOffset + s * C::kRawBytes; };
  auto rv_s = [&](int s) { return base + C::kRawVOffset + s * C::kRawBytes; };
  auto ptr = [&](std::uint32_t a) { return base_ptr + (a - base); };
  const std::uint32_t bars = base + C::kBarOffset;
  const std::uint32_t q_full = bars;
  auto k_full = [&](int s) { return bars + 8 * (1 + s); };
  auto v_full = [&](int s) { return bars + 8 * (1 + C::kStages + s); };
  auto k_empty = [&](int s) { return bars + 8 * (1 + 2 * C::kStages + s); };
  auto v_empty = [&](int s) { return bars + 8 * (1 + 3 * C::kStages + s); };
  // fp8: the raw staging ring's barriers (TMA -> wideners, wideners -> TMA); e4m3 uses
  // the V ones only (K goes straight to the consumers).
  auto rk_full = [&](int s) { return bars + 8 * (1 + 4 * C::kStages + s); };
  auto rv_full = [&](int s) { return bars + 8 * (1 + 5 * C::kStages + s); };
  auto rk_empty = [&](int s) { return bars + 8 * (1 + 6 * C::kStages + s); };
  auto rv_empty = [&](int s) { return bars + 8 * (1 + 7 * C::kStages + s); };
  float* undo_s = reinterpret_cast<float*>(base_ptr + C::kUndoOffset);
  (void)undo_s;

  // The CTA's work item: a tile of query rows of one head of one sequence, and the key
  // tiles those rows see.
  struct Item {
    int seq, head, kvh, q_begin, seq_len, ctx, q0, rows_valid, kv_begin, ntiles;
  };
  const Item it = [&] {
    const PrefillWork w = static_cast<const PrefillWork*>(p.work)[blockIdx.x];
    Item it;
    it.seq = w.seq;
    it.head = w.head;
    it.kvh = w.head / p.group;
    it.q_begin = p.query_start_loc[w.seq];
    const int q_len = p.query_start_loc[w.seq + 1] - it.q_begin;
    it.seq_len = p.seq_lens[w.seq];
    it.ctx = it.seq_len - q_len;
    it.q0 = w.row_tile * C::kRows;
    it.rows_valid = min(C::kRows, q_len - it.q0);
    const KeyRange first = visible_keys(p, it.ctx + it.q0, it.seq_len);
    const KeyRange last = visible_keys(p, it.ctx + it.q0 + it.rows_valid - 1, it.seq_len);
    it.kv_begin = first.lo / C::kKeys * C::kKeys;
    it.ntiles = last.hi > it.kv_begin ? (last.hi - it.kv_begin + C::kKeys - 1) / C::kKeys : 0;
    return it;
  }();

  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < C::kStages; ++s) {
      mbar_init(k_full(s), C::kWiden ? 3 : 1);  // widened: one arrival per widening warp
      mbar_init(v_full(s), FP8 ? 3 : 1);
      mbar_init(k_empty(s), 8);  // one arrival per consumer warp
      mbar_init(v_empty(s), 8);
      if constexpr (FP8) {
        mbar_init(rk_full(s), 1);
        mbar_init(rv_full(s), 1);
        mbar_init(rk_empty(s), 3);
        mbar_init(rv_empty(s), 3);
      }
    }
    mbar_fence_init();
  }
  __syncthreads();

  // Warp-uniform by construction (a shuffle from lane 0): the compiler then keeps more of
  // the consumers' descriptor arithmetic in uniform registers (fewer R2UR moves per wgmma).
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0);
  if (wg == 0) {
    // ---------------- producer ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(C::kProducerRegs) : "memory");
    const int lane = threadIdx.x % 32;
    const int kv_begin = it.kv_begin, ntiles = it.ntiles, seq_len = it.seq_len;
    // Warp 0 loads: lane b fetches the page of box b (one coalesced load per tile, ahead
    // of the wait) and issues that box's copies, so no lane walks the block table serially.
    if (threadIdx.x < 32) {
      // Q, issued right after the first tile's K and V.
      auto load_q = [&] {
        if (lane == 0) {
          mbar_arrive_expect_tx(q_full, C::kQBytes);
          for (int c = 0; c < C::kChunks; ++c)
            tma_load_3d(q_s + c * C::kRows * 128, &tm_q, q_full, c * 64, it.head, it.q_begin + it.q0);
        }
      };
      if (ntiles == 0) load_q();
      const std::int32_t* block_row = p.block_table + std::int64_t(it.seq) * p.block_table_stride;
      const int boxes_per_tile = C::kKeys / box_rows;
      // Columns per box: 64 16-bit elements, or 128 fp8 bytes (a row's, up to d=128).
      constexpr int kBoxChunks = FP8 ? C::kRawBoxes : C::kChunks;
      constexpr int kBoxColumns = FP8 ? 128 : 64;
      // Where the boxes land: the stage itself (16-bit, e4m3 K), its upper half (widened
      // in place) or the raw ring; and the barrier the landing stage is free on.
      constexpr std::uint32_t kInPlaceAt = C::kInPlace ? (C::kChunks / 2) * C::kKeys * 128 : 0;
      constexpr bool kKRing = C::kWiden && !C::kInPlace, kVRing = FP8 && !C::kInPlace;
      for (int t = 0; t < ntiles; ++t) {
        const int s = t % C::kStages;
        const std::uint32_t par = (t / C::kStages) & 1;
        const int key0 = kv_begin + t * C::kKeys;
        const int nbox = min(boxes_per_tile, (seq_len - key0 + box_rows - 1) / box_rows);
        const std::uint32_t bytes = std::uint32_t(nbox) * box_rows * 128 * kBoxChunks;
        int page = 0, off = 0;
        if (lane < nbox) {
          const int key = key0 + lane * box_rows;
          page = block_row[key / p.block_size];
          off = key % p.block_size;
        }
        const std::uint32_t kdst = kKRing ? rk_s(s) : k_s(s) + kInPlaceAt;
        const std::uint32_t vdst = kVRing ? rv_s(s) : v_s(s) + kInPlaceAt;
        const std::uint32_t kbar = C::kWiden ? rk_full(s) : k_full(s), vbar = FP8 ? rv_full(s) : v_full(s);
        constexpr std::uint32_t kColumnStride = C::kKeys * 128;  // between a tile's box columns
        if (lane == 0) {
          mbar_wait_in_asm(kKRing ? rk_empty(s) : k_empty(s), par ^ 1);
          mbar_arrive_expect_tx(kbar, bytes);
        }
        __syncwarp();
        if (lane < nbox)
          for (int c = 0; c < kBoxChunks; ++c)
            tma_load_4d(kdst + c * kColumnStride + lane * box_rows * 128, &tm_k, kbar, c * kBoxColumns, it.kvh, off,
                        page);
        if (lane == 0) {
          mbar_wait_in_asm(kVRing ? rv_empty(s) : v_empty(s), par ^ 1);
          mbar_arrive_expect_tx(vbar, bytes);
        }
        __syncwarp();
        if constexpr (kVPageBoxes) {
          if (lane < nbox) tma_load_5d(vdst + lane * kVBox, &tm_v, vbar, 0, off, 0, it.kvh, page);
        } else if (lane < nbox) {
          for (int c = 0; c < kBoxChunks; ++c)
            tma_load_4d(vdst + c * kColumnStride + lane * box_rows * 128, &tm_v, vbar, c * kBoxColumns, it.kvh, off,
                        page);
        }
        if (t == 0) load_q();
      }
    } else if constexpr (FP8) {
      // Warps 1-3 convert each landed raw tile into the ring the consumers read: e4m3
      // products transpose V into the K-major tile P·V reads (K is read as stored); f16
      // products widen K and V.
      const int tid = threadIdx.x - 32;
      // Waits for the raw tile and a free destination, converts, and hands both back (in
      // place, the copies waited for the stage to be free and there is no raw stage).
      auto hand_over = [&](std::uint32_t raw_full, std::uint32_t raw_empty, std::uint32_t full,
                           std::uint32_t empty, std::uint32_t par, auto&& convert) {
        mbar_wait(raw_full, par);
        if constexpr (!C::kInPlace) mbar_wait(empty, par ^ 1);
        convert();
        fence_async_smem();
        __syncwarp();
        if (lane == 0) {
          if constexpr (!C::kInPlace) mbar_arrive(raw_empty);
          mbar_arrive(full);
        }
      };
      for (int t = 0; t < ntiles; ++t) {
        const int s = t % C::kStages;
        const std::uint32_t par = (t / C::kStages) & 1;
        const int valid = min(C::kKeys, seq_len - (kv_begin + t * C::kKeys));
        if constexpr (kE4m3) {
          hand_over(rv_full(s), rv_empty(s), v_full(s), v_empty(s), par,
                    [&] { transpose_v_e4m3<C, D>(ptr(rv_s(s)), ptr(v_s(s)), valid, tid); });
        } else if constexpr (C::kInPlace) {
          hand_over(rk_full(s), rk_empty(s), k_full(s), k_empty(s), par,
                    [&] { widen_e4m3_in_place<C, D>(ptr(k_s(s)), valid, tid); });
          hand_over(rv_full(s), rv_empty(s), v_full(s), v_empty(s), par,
                    [&] { widen_e4m3_in_place<C, D>(ptr(v_s(s)), valid, tid); });
        } else {
          hand_over(rk_full(s), rk_empty(s), k_full(s), k_empty(s), par,
                    [&] { widen_e4m3<C, D>(ptr(rk_s(s)), ptr(k_s(s)), valid, tid); });
          hand_over(rv_full(s), rv_empty(s), v_full(s), v_empty(s), par,
                    [&] { widen_e4m3<C, D>(ptr(rv_s(s)), ptr(v_s(s)), valid, tid); });
        }
      }
    }
  } else {
    // ---------------- consumers ----------------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(C::kConsumerRegs) : "memory");
    const int cw = wg - 1;
    const int ctid = threadIdx.x - 128 * wg;
    const int warp_in = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int wg_row0 = cw * 64;
    const int head = it.head, kvh = it.kvh, seq_len = it.seq_len, ctx = it.ctx, q0 = it.q0;
    const int rows_valid = it.rows_valid, kv_begin = it.kv_begin, ntiles = it.ntiles;
    // Stage and phase of this item's tile t in the rings.
    auto stage = [&](int t) { return t % C::kStages; };
    auto phase = [&](int t) { return std::uint32_t(t / C::kStages) & 1; };
    RowInfo ri;
    const bool has_alibi = p.alibi_slopes != nullptr;
    const float slope = has_alibi ? p.alibi_slopes[head] * kLog2e : 0.0f;
    const ScoreScale score_sc = score_scale(p, kvh);
  #pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = min(wg_row0 + warp_in * 16 + lane / 4 + 8 * h, rows_valid - 1);
      ri.pos[h] = ctx + q0 + r;
      ri.vis[h] = visible_keys(p, ri.pos[h], seq_len);
      ri.alibi[h] = slope;
    }
    const KeyRange wg_first = visible_keys(p, ctx + q0 + min(wg_row0, rows_valid - 1), seq_len);
    const KeyRange wg_last = visible_keys(p, ctx + q0 + min(wg_row0 + 63, rows_valid - 1), seq_len);
    const int full_lo = wg_last.lo, full_hi = wg_first.hi;

    WarpState<D> st;
    st.init();
    float sacc[C::kNT][4];
    // Per-row factors that take the scores back: the query's e4m3 descale (e4m3 products)
    // or its f16 scaling (f16 products with bf16 queries); 1 otherwise.
    float undo[2] = {1.0f, 1.0f};
    mbar_wait_in_asm(q_full, 0);
    if constexpr (kE4m3) {
      queries_to_e4m3<T, D, C::kRows>(base_ptr, ptr(q8_s), wg_row0, ctid, undo_s);
      fence_async_smem();  // generic writes, read next by wgmma (the async proxy)
      named_sync(2 + cw, 128);
  #pragma unroll
      for (int h = 0; h < 2; ++h) undo[h] = undo_s[wg_row0 + warp_in * 16 + lane / 4 + 8 * h];
    } else if constexpr (FP8 && !std::is_same_v<T, __half>) {
      queries_to_f16<D, C::kRows>(base_ptr, wg_row0, ctid, undo_s);
      fence_async_smem();  // generic writes, read next by wgmma (the async proxy)
      named_sync(2 + cw, 128);
  #pragma unroll
      for (int h = 0; h < 2; ++h) undo[h] = undo_s[wg_row0 + warp_in * 16 + lane / 4 + 8 * h];
    }
    const float row_scale[2] = {score_sc.scale_log2 * undo[0], score_sc.scale_log2 * undo[1]};

    const std::uint64_t q_desc = sw128_desc((kE4m3 ? q8_s : q_s) + wg_row0 * 128, 16, 1024);
    const std::uint64_t k_desc = sw128_desc(k_s(0), 16, 1024);
    // 16-bit V is read transposed (MN-major: the leading offset steps 64 columns); e4m3 V
    // was transposed to K-major (d rows).
    const std::uint64_t v_desc =
        sw128_desc(v_s(0), kE4m3 ? 16 : kVPageBoxes ? kVBoxRows * 128 : C::kKeys * 128, 1024);
    // P as register A-fragments: 16 keys per register quadruple (16-bit), 32 (e4m3).
    constexpr int kPK = kE4m3 ? 32 : 16;
    auto issue_qk = [&](int s) {
      if constexpr (kE4m3) {
  #pragma unroll
        for (int kk = 0; kk < D / 32; ++kk)
          WgmmaE4m3SS<C::kKeys>::run(sacc, desc_plus(q_desc, kk * 32), desc_plus(k_desc, s * C::kKBytes + kk * 32),
                                     kk > 0 ? 1 : 0);
      } else {
  #pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const std::uint64_t da = desc_plus(q_desc, (kk / 4) * C::kRows * 128 + (kk % 4) * 32);
          const std::uint64_t db = desc_plus(k_desc, s * C::kKBytes + (kk / 4) * C::kKeys * 128 + (kk % 4) * 32);
          WgmmaSS<M, C::kKeys>::run(sacc, da, db, kk > 0 ? 1 : 0);
        }
      }
    };
    auto issue_pv = [&](int s, const std::uint32_t (&pa)[C::kKeys / kPK][4]) {
  #pragma unroll
      for (int kb = 0; kb < C::kKeys / kPK; ++kb) {
        if constexpr (kE4m3) {
          WgmmaE4m3RS<D>::run(st.o, pa[kb], desc_plus(v_desc, s * C::kVBytes + kb * 32), 1);
        } else {
          const std::uint64_t dv = desc_plus(v_desc, s * C::kVBytes + kb * (kVPageBoxes ? kVBox : 16 * 128));
          WgmmaRS<M, D>::run(st.o, pa[kb], dv, 1);
        }
      }
    };
    // Scale, modifiers and mask of the tile of keys from key0, in the log2 domain; the plain
    // (positive) scale of a fully visible tile is left to the softmax's FMA (returns true).
    auto scores = [&](int key0) {
      const bool masked = key0 < full_lo || key0 + C::kKeys > full_hi;
      if (!masked && !has_alibi && score_sc.softcap_inv == 0.0f) {
        if (score_sc.scale_log2 > 0.0f) return true;
  #pragma unroll
        for (int n = 0; n < C::kNT; ++n)
  #pragma unroll
          for (int e = 0; e < 4; ++e) sacc[n][e] *= row_scale[e / 2];
        return false;
      }
      if constexpr (kE4m3 || (FP8 && !std::is_same_v<T, __half>)) {
  #pragma unroll
        for (int n = 0; n < C::kNT; ++n)
  #pragma unroll
          for (int e = 0; e < 4; ++e) sacc[n][e] *= undo[e / 2];
      }
      score_tile<C::kNT>(p, score_sc, sacc, key0, ri.pos, ri.vis, ri.alibi, masked);
      return false;
    };
    // 16-bit caches: key rows past the sequence hold stale or unloaded data (maybe NaN);
    // zero them in V, so that P = 0 there contributes exactly nothing (the fp8 wideners
    // write zeros there themselves). Both consumer warpgroups take part.
    auto zero_tail = [&](int s, int key0) {
      if constexpr (!FP8) {
        if (key0 + C::kKeys > seq_len) {
          const int first_bad = seq_len - key0;
          const int n16 = (C::kKeys - first_bad) * C::kChunks * 8;
          for (int idx = threadIdx.x - 128; idx < n16; idx += 256) {
            const int row = first_bad + idx / (C::kChunks * 8);
            const int c = (idx / 8) % C::kChunks;
            const int at = kVPageBoxes
                               ? (row / kVBoxRows) * int(kVBox) + c * kVBoxRows * 128 + (row % kVBoxRows) * 128
                               : c * C::kKeys * 128 + row * 128;
            *reinterpret_cast<uint4*>(ptr(v_s(s)) + at + (idx % 8) * 16) = make_uint4(0, 0, 0, 0);
          }
          fence_async_smem();
          named_sync(1, 256);
        }
      }
    };
    auto pack_p = [&](std::uint32_t (&pa)[C::kKeys / kPK][4]) {
  #pragma unroll
      for (int kb = 0; kb < C::kKeys / kPK; ++kb) {
        if constexpr (kE4m3) {
          // Byte b of A register j: the accumulator element fp8_layout::p_source names
          // (keys in the order the transposed V holds them).
  #pragma unroll
          for (int j = 0; j < 4; ++j) {
            float v[4];
  #pragma unroll
            for (int b = 0; b < 4; ++b) {
              const fp8_layout::AccElement a = fp8_layout::p_source(j, b);
              v[b] = sacc[4 * kb + a.n][a.e];
            }
            pa[kb][j] = e4m3x4(v[0], v[1], v[2], v[3]);
          }
        } else {
          pa[kb][0] = pack2<M>(sacc[2 * kb][0], sacc[2 * kb][1]);
          pa[kb][1] = pack2<M>(sacc[2 * kb][2], sacc[2 * kb][3]);
          pa[kb][2] = pack2<M>(sacc[2 * kb + 1][0], sacc[2 * kb + 1][1]);
          pa[kb][3] = pack2<M>(sacc[2 * kb + 1][2], sacc[2 * kb + 1][3]);
        }
      }
    };

    for (int t = 0; t < ntiles; ++t) {
      const int s = stage(t);
      const std::uint32_t par = phase(t);
      const int key0 = kv_begin + t * C::kKeys;
      if (!kIssueAhead || t == 0) {
        mbar_wait_in_asm(k_full(s), par);
        fence_operand<C::kNT>(sacc);
        wgmma_fence();
        issue_qk(s);
        wgmma_commit();
        wgmma_wait<0>();
        fence_operand<C::kNT>(sacc);
        __syncwarp();
        if (lane == 0) mbar_arrive(k_empty(s));
      }
      const bool scale_in_exp = scores(key0);
      softmax_scaled<D, C::kNT, kProbLog2, kLazy>(st, sacc, scale_in_exp ? row_scale[0] : 1.0f,
                                                  scale_in_exp ? row_scale[1] : 1.0f);
      mbar_wait_in_asm(v_full(s), par);
      zero_tail(s, key0);
      // P as register A-fragments, all packed before the first wgmma so the compiler need
      // not fence between them.
      std::uint32_t pa[C::kKeys / kPK][4];
      pack_p(pa);
      fence_operand<D / 8>(st.o);
      wgmma_fence();
      issue_pv(s, pa);
      wgmma_commit();
      // Issued ahead: the next tile's S behind this P·V (P is packed, so S's accumulators
      // are free), the two waited for together.
      const bool ahead = kIssueAhead && t + 1 < ntiles;
      if (ahead) {
        mbar_wait_in_asm(k_full(stage(t + 1)), phase(t + 1));
        fence_operand<C::kNT>(sacc);
        wgmma_fence();
        issue_qk(stage(t + 1));
        wgmma_commit();
      }
      wgmma_wait<0>();
      fence_operand<D / 8>(st.o);
      if (ahead) fence_operand<C::kNT>(sacc);
      __syncwarp();
      if (lane == 0) {
        mbar_arrive(v_empty(s));
        if (ahead) mbar_arrive(k_empty(stage(t + 1)));
      }
    }

    // ---- epilogue: normalise, stage in this warpgroup's Q rows (swizzled), store --------
    named_sync(2 + cw, 128);  // every warp of this warpgroup is done reading its Q rows
    const bool has_sink = p.sinks != nullptr;
    // e4m3: l carries P's factor 2^kProbLog2; so must the sink's term.
    const float sink = has_sink ? p.sinks[head] * kLog2e + float(kProbLog2) : 0.0f;
    const float out_sc = output_scale(p, kvh);
  #pragma unroll
    for (int h = 0; h < 2; ++h) {
      st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 1);
      st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 2);
      const float sc = finish_scale(st.m[h], st.l[h], sink, has_sink) * out_sc;
      const int r = wg_row0 + warp_in * 16 + lane / 4 + 8 * h;
  #pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        const int d = 8 * j + 2 * (lane % 4);
        const int c = d / 64, chunk = (d % 64) / 8;
        unsigned char* dst = base_ptr + c * C::kRows * 128 + r * 128 + ((chunk ^ (r % 8)) * 16) + (d % 8) * 2;
        *reinterpret_cast<std::uint32_t*>(dst) = pack2<T>(st.o[j][2 * h] * sc, st.o[j][2 * h + 1] * sc);
      }
    }
    // The warpgroup's 64 rows leave in one TMA store per 64-column chunk (the map clips
    // the columns past the head size) — unless they run past the item, whose next rows
    // belong to another sequence: the warps store those rows themselves.
    const bool by_tma = store_by_tma != 0 && wg_row0 + 64 <= rows_valid;
    if (by_tma) fence_async_smem();  // the staged rows, read next by the async proxy
    named_sync(2 + cw, 128);
    if (by_tma) {
      if (ctid == 0) {
        for (int c = 0; c < C::kChunks; ++c)
          tma_store_3d(&tm_o, q_s + c * C::kRows * 128 + wg_row0 * 128, c * 64, head, it.q_begin + q0 + wg_row0);
        bulk_stores_read();  // the staged rows must stay until the stores have read them
      }
    } else {
      T* out = static_cast<T*>(p.o);
      constexpr int CH = D / 8;
      for (int idx = ctid; idx < 64 * CH; idx += 128) {
        const int rl = idx / CH, d = (idx % CH) * 8;
        const int r = wg_row0 + rl;
        if (r >= rows_valid || d >= p.head_size) continue;  // padded rows and columns
        const int c = d / 64, chunk = (d % 64) / 8;
        const uint4 v =
            *reinterpret_cast<const uint4*>(base_ptr + c * C::kRows * 128 + r * 128 + ((chunk ^ (r % 8)) * 16));
        const std::int64_t tok = it.q_begin + q0 + r;
        *reinterpret_cast<uint4*>(out + tok * p.o_stride_tok + head * p.o_stride_head + d) = v;
      }
    }
  }
#endif
}

}  // namespace

void launch_prefill_sm90(const AttnParams& p, ScalarType e, int head_size, KvPath kv, const void* tma,
                         bool output_map, int box_rows, int variant, void* stream) {
  if (p.num_work == 0) return;
  const CUtensorMap* maps = static_cast<const CUtensorMap*>(tma);
  const int d = hopper_head_dim(head_size, kv);
  // The V map was encoded for the variant's layout: a mismatch is the planner's error.
  if ((variant & HopperVariant::wide_keys) && !hopper_wide_keys_apply(d, kv))
    throw_cuda_error(static_cast<int>(cudaErrorInvalidValue), "prefill_sm90_kernel",
                     cfg_string("176-key tiles at head size {} (they take 16-bit caches up to 128)", head_size));
  if ((variant & HopperVariant::v_page_boxes) && !hopper_v_page_boxes_apply(head_size, kv, box_rows))
    throw_cuda_error(static_cast<int>(cudaErrorInvalidValue), "prefill_sm90_kernel",
                     cfg_string("page-boxed V at head size {} with {}-key boxes (it takes 128 or 256 with 16)",
                                head_size, box_rows));
  dispatch_elem(e, [&]<class T>() {
    auto go = [&]<int D, KvPath KP, int V>() {
      using C = HopperConfig<T, D, KP, hopper_key_tile(D, V)>;
      auto kernel = prefill_sm90_kernel<T, D, KP, V>;
      auto cfg = [&] {
        return cfg_string("elem={} head_size={} (as {}) kv={} variant={} heads={}/{} work={} box_rows={} "
                          "block_size={} smem={}",
                          to_string(e), head_size, D,
                          KP == KvPath::b16           ? "16-bit"
                          : KP == KvPath::f16_widened ? "fp8_e4m3 (f16 products)"
                                                      : "fp8_e4m3 (e4m3 products)",
                          V, p.num_heads, p.num_kv_heads, p.num_work, box_rows, p.block_size, C::kSmemBytes);
      };
      static std::atomic<std::uint64_t> smem_set{0};
      set_max_smem_once(smem_set, kernel, int(C::kSmemBytes), "prefill_sm90_kernel: cudaFuncSetAttribute", cfg);
      kernel<<<p.num_work, C::kThreads, C::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(
          p, maps[0], maps[1], maps[2], maps[3], output_map ? 1 : 0, box_rows);
      check_launch_lazy("prefill_sm90_kernel", cfg);
    };
    // The variant's instantiation: 16-bit caches take each form where it applies (checked
    // above); the fp8 paths take none.
    auto go_variant = [&]<int D, KvPath KP>() {
      if constexpr (KP != KvPath::b16) {
        go.template operator()<D, KP, 0>();
      } else {
        constexpr bool kWide = hopper_wide_keys_apply(D, KP), kPages = hopper_v_page_boxes_apply(D, KP, 16);
        constexpr int kBoth = HopperVariant::wide_keys | HopperVariant::v_page_boxes;
        if (variant == kBoth) {
          if constexpr (kWide && kPages) go.template operator()<D, KP, kBoth>();
        } else if (variant == HopperVariant::wide_keys) {
          if constexpr (kWide) go.template operator()<D, KP, HopperVariant::wide_keys>();
        } else if (variant == HopperVariant::v_page_boxes) {
          if constexpr (kPages) go.template operator()<D, KP, HopperVariant::v_page_boxes>();
        } else {
          go.template operator()<D, KP, 0>();
        }
      }
    };
    if (kv == KvPath::e4m3 && d > 128)
      throw_cuda_error(static_cast<int>(cudaErrorInvalidValue), "prefill_sm90_kernel",
                       cfg_string("e4m3 products at head size {} (they take head sizes up to 128; f16 products "
                                  "take every head size)",
                                  head_size));
    switch (d) {
      case 64:
        if (kv == KvPath::e4m3) go_variant.template operator()<64, KvPath::e4m3>();
        else if (kv == KvPath::f16_widened) go_variant.template operator()<64, KvPath::f16_widened>();
        else go_variant.template operator()<64, KvPath::b16>();
        break;
      case 96:  // 16-bit caches only (hopper_head_dim)
        go_variant.template operator()<96, KvPath::b16>();
        break;
      case 128:
        if (kv == KvPath::e4m3) go_variant.template operator()<128, KvPath::e4m3>();
        else if (kv == KvPath::f16_widened) go_variant.template operator()<128, KvPath::f16_widened>();
        else go_variant.template operator()<128, KvPath::b16>();
        break;
      case 256:
        if (kv == KvPath::f16_widened) go_variant.template operator()<256, KvPath::f16_widened>();
        else go_variant.template operator()<256, KvPath::b16>();
        break;
      default:
        throw_cuda_error(static_cast<int>(cudaErrorInvalidValue), "prefill_sm90_kernel",
                         cfg_string("head size {} is above 256", head_size));
    }
  });
}

}  // namespace attnsel::kernel::cuda
