// Internal: the data layout of the Hopper prefill's e4m3 products (fp8 wgmma, k32), in plain
// C++ so that the host can check it: which key each byte of P's register A-fragments holds,
// and the transposition of a raw V tile into the K-major B operand that matches it.
//
// Fragment layouts (PTX ISA, wgmma .m64nNk32 with 8-bit A from registers, and the f32
// accumulator of any wgmma; CUTLASS's ALayout_64x32 / CLayout_64xN say the same), for
// lane l of a warp, t = l % 4, rows r = l / 4 and r + 8 of the warp's 16:
//   A register j (4 bytes, b = 0..3): row r + 8·(j % 2), column 16·(j / 2) + 4t + b.
//   accumulator d[n][e]:              row r + 8·(e / 2), column 8n + 2t + e % 2.
// A thread may pack only values it holds, so A's column 4t + b of a 16-column half takes
// the accumulator column 8·(b / 2) + 2t + b % 2: P's columns (keys) come in a permuted
// order, and V's keys are stored in that same order, which leaves the sum unchanged.
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define ATTNSEL_HD __host__ __device__
#define ATTNSEL_HD_INLINE __host__ __device__ __forceinline__
#else
#define ATTNSEL_HD
#define ATTNSEL_HD_INLINE inline
#endif

namespace attnsel::kernel::cuda::fp8_layout {

/// Bytes of a transposed V row and of a raw K/V row: 128 keys, or 128 e4m3 head elements.
inline constexpr int kRowBytes = 128;
/// Keys per P·V wgmma step (k32).
inline constexpr int kStepKeys = 32;

/// PRMT in its default mode: byte i of the result is byte (s >> 4i) & 7 of {y:x}.
ATTNSEL_HD_INLINE std::uint32_t byte_perm(std::uint32_t x, std::uint32_t y, std::uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  const std::uint64_t xy = (std::uint64_t(y) << 32) | x;
  std::uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= std::uint32_t((xy >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
  return r;
#endif
}

/// Offset of byte `col` of row `row` in a tile of 128-byte rows with the 128-byte swizzle
/// (TMA's CU_TENSOR_MAP_SWIZZLE_128B and wgmma's 128-byte-swizzle descriptors), tile
/// start aligned to 1024 bytes.
/// (Unsigned arithmetic: rows and columns are never negative, and the signed forms of / and
/// % cost the device four instructions each.)
ATTNSEL_HD constexpr int sw128(int row, int col) {
  const auto r = static_cast<std::uint32_t>(row), c = static_cast<std::uint32_t>(col);
  return static_cast<int>(r * kRowBytes + (((c / 16) ^ (r % 8)) << 4) + c % 16);
}

/// The key (0..31, within a k32 step) in column c of P's A-fragments as the consumers pack
/// them: the accumulator column of the same thread's value (see above).
ATTNSEL_HD constexpr int p_key_of_column(int c) {
  const int half = c / 16, t = (c % 16) / 4, b = c % 4;
  return 16 * half + 8 * (b / 2) + 2 * t + b % 2;
}

/// Where byte b of A register j of a k32 step comes from: the accumulator tile n (0..3,
/// counted from the step's first 8-key tile) and element e.
struct AccElement {
  int n, e;
};
ATTNSEL_HD constexpr AccElement p_source(int j, int b) { return {2 * (j / 2) + b / 2, 2 * (j % 2) + b % 2}; }

/// One lane's share of transposing a raw V tile (128 keys × 128 bytes, d along the row,
/// swizzled) into the K-major tile P·V reads (D rows of d × 128 key bytes, swizzled, keys
/// in P's column order; keys at or past `valid` become zeros). 96 lanes (three warps,
/// `tid` = 32·warp + lane) share a tile: a lane owns a column of 4 d values (d = 4w..4w+3)
/// of one 16-key chunk: 16 loads of 4 bytes (a warp's lanes read one key row: no bank
/// conflicts), byte permutes, and 4 stores of 16 bytes, one per d row. Lane pairs start at
/// different rows (rot), so each quarter warp's stores hit 8 different 16-byte bank groups.
/// load(offset) returns the 4 bytes at a raw-tile offset; store(offset, w0, w1, w2, w3)
/// writes 16 bytes at a transposed-tile offset.
template <int D, int kThreads, class Load, class Store>
ATTNSEL_HD_INLINE void transpose_v_lane(int tid, int valid, Load&& load, Store&& store) {
  static_assert(D == 64 || D == 128, "e4m3 V rows of 64 or 128 head elements");
  constexpr int kKeys = kRowBytes;            // keys per tile: one transposed row's bytes
  constexpr int kWords = D / 4;               // 4-byte d columns per key row
  constexpr int kGroups = kKeys / 16;         // 16-key chunks
  constexpr int kGroupsPerWarp = 32 / kWords; // 1 at d=128, 2 at d=64
  constexpr int kWarps = kThreads / 32;
  const int warp = tid / 32, lane = tid % 32;
  const int w = lane % kWords;
  const std::uint32_t rot = std::uint32_t(lane / 2) % 4;
  // Store slot s writes d row 4w + ((s + rot) & 3).
  const std::uint32_t r0 = rot, r1 = (1 + rot) & 3u, r2 = (2 + rot) & 3u, r3 = (3 + rot) & 3u;
  // Byte permutes: bytes r_a of x and y, then bytes r_b of x and y.
  const std::uint32_t sel01 = r0 | ((4 + r0) << 4) | (r1 << 8) | ((4 + r1) << 12);
  const std::uint32_t sel23 = r2 | ((4 + r2) << 4) | (r3 << 8) | ((4 + r3) << 12);
  // One 16-key chunk; kFull: every key exists (all chunks but the sequence's last), so the
  // loads need no bounds checks (the checked form costs a branch per load).
  auto chunk = [&](int grp, int nvalid, auto full) {
    constexpr bool kFull = decltype(full)::value;
    std::uint32_t out[4][4];  // [store slot][4-byte word q of the 16-byte chunk]
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int q = 0; q < 4; ++q) {
      // Word q of a transposed 16-key chunk holds keys 2q, 2q+1, 2q+8, 2q+9 (p_key_of_column).
      std::uint32_t src[4];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int m = 0; m < 4; ++m) {
        const int k = 2 * q + (m % 2) + 8 * (m / 2);
        // The chunk starts on a multiple of 8 rows, so row 16·grp + k swizzles as row k:
        // one lane-constant offset per k % 8, and k's row as an immediate.
        const int off = 16 * grp * kRowBytes + sw128(k, 4 * w);
        src[m] = kFull || k < nvalid ? load(off) : 0u;
      }
      const std::uint32_t x01 = byte_perm(src[0], src[1], sel01), y01 = byte_perm(src[2], src[3], sel01);
      const std::uint32_t x23 = byte_perm(src[0], src[1], sel23), y23 = byte_perm(src[2], src[3], sel23);
      out[0][q] = byte_perm(x01, y01, 0x5410);
      out[1][q] = byte_perm(x01, y01, 0x7632);
      out[2][q] = byte_perm(x23, y23, 0x5410);
      out[3][q] = byte_perm(x23, y23, 0x7632);
    }
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int s = 0; s < 4; ++s) {
      const int d = 4 * w + int((std::uint32_t(s) + rot) & 3u);
      store(sw128(d, 16 * grp), out[s][0], out[s][1], out[s][2], out[s][3]);
    }
  };
  for (int g0 = warp * kGroupsPerWarp; g0 < kGroups; g0 += kWarps * kGroupsPerWarp) {
    const int grp = g0 + lane / kWords;
    if (grp >= kGroups) continue;
    const int nvalid = valid - 16 * grp;  // keys of this chunk that exist
    if (nvalid >= 16)
      chunk(grp, nvalid, std::true_type{});
    else
      chunk(grp, nvalid, std::false_type{});
  }
}

}  // namespace attnsel::kernel::cuda::fp8_layout
