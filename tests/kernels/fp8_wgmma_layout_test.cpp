// The Hopper prefill's e4m3-product layout, checked on the host: the keys P's register
// fragments hold match the keys the transposed V tile holds, column by column; the
// transposition moves every byte (zeros past the sequence); and its shared-memory accesses
// are free of bank conflicts. The fragment layouts are those the PTX ISA gives for wgmma
// (restated in src/kernels/attention/cuda/fp8_wgmma_layout.hpp).
#include "kernels/attention/cuda/fp8_wgmma_layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace {

using namespace attnsel::kernel::cuda::fp8_layout;

constexpr int kThreads = 96;  // the producer warpgroup's warps 1-3
constexpr int kKeys = 128;

TEST(Fp8WgmmaLayout, PackedColumnsHoldTheKeysOfTheTransposedV) {
  // Column c of a k32 step's A operand must hold the probability of key p_key_of_column(c),
  // in the row the A layout puts it in.
  std::set<int> keys;
  for (int c = 0; c < kStepKeys; ++c) keys.insert(p_key_of_column(c));
  EXPECT_EQ(keys.size(), 32u) << "the column order is a permutation of the step's keys";
  EXPECT_EQ(*keys.begin(), 0);
  EXPECT_EQ(*keys.rbegin(), 31);
  for (int lane = 0; lane < 32; ++lane)
    for (int j = 0; j < 4; ++j)
      for (int b = 0; b < 4; ++b) {
        SCOPED_TRACE(testing::Message() << "lane " << lane << " register " << j << " byte " << b);
        const int a_row = lane / 4 + 8 * (j % 2);                  // wgmma k32 8-bit A fragment
        const int a_col = 16 * (j / 2) + 4 * (lane % 4) + b;
        const AccElement src = p_source(j, b);
        ASSERT_GE(src.n, 0);
        ASSERT_LT(src.n, 4);
        const int acc_row = lane / 4 + 8 * (src.e / 2);             // f32 accumulator fragment
        const int acc_col = 8 * src.n + 2 * (lane % 4) + src.e % 2;
        EXPECT_EQ(acc_row, a_row);
        EXPECT_EQ(acc_col, p_key_of_column(a_col));
      }
}

/// Runs the 96 lanes' shares of one transposition on the host.
std::vector<std::uint8_t> transpose(int d, const std::vector<std::uint8_t>& raw, int valid,
                                    std::vector<int>* writes = nullptr) {
  std::vector<std::uint8_t> vt(std::size_t(d) * kKeys, 0xAB);  // poison
  auto run = [&]<int D>() {
    for (int tid = 0; tid < kThreads; ++tid)
      transpose_v_lane<D, kThreads>(
          tid, valid,
          [&](int off) {
            EXPECT_GE(off, 0);
            EXPECT_LE(off + 4, int(raw.size()));
            std::uint32_t w = 0;
            for (int i = 0; i < 4; ++i) w |= std::uint32_t(raw[std::size_t(off + i)]) << (8 * i);
            return w;
          },
          [&](int off, std::uint32_t w0, std::uint32_t w1, std::uint32_t w2, std::uint32_t w3) {
            EXPECT_GE(off, 0);
            EXPECT_LE(off + 16, int(vt.size()));
            EXPECT_EQ(off % 16, 0);
            const std::uint32_t w[4] = {w0, w1, w2, w3};
            for (int i = 0; i < 16; ++i) {
              vt[std::size_t(off + i)] = std::uint8_t(w[i / 4] >> (8 * (i % 4)));
              if (writes) ++(*writes)[std::size_t(off + i)];
            }
          });
  };
  if (d == 64) run.template operator()<64>();
  else run.template operator()<128>();
  return vt;
}

TEST(Fp8WgmmaLayout, TransposedVHoldsEveryKeyOfEveryColumnAndZerosPastTheSequence) {
  std::mt19937 rng(17);
  for (int d : {64, 128})
    for (int valid : {128, 1, 16, 17, 77, 127}) {
      SCOPED_TRACE(testing::Message() << "d " << d << " valid keys " << valid);
      // The raw tile as TMA lands it: key rows of 128 bytes (columns past d zero), swizzled;
      // every byte value occurs (NaN codes included).
      std::vector<std::uint8_t> v(std::size_t(kKeys) * 128);  // logical [key][col]
      for (int key = 0; key < kKeys; ++key)
        for (int c = 0; c < 128; ++c) v[std::size_t(key * 128 + c)] = c < d ? std::uint8_t(rng()) : 0;
      std::vector<std::uint8_t> raw(v.size());
      for (int key = 0; key < kKeys; ++key)
        for (int c = 0; c < 128; ++c) raw[std::size_t(sw128(key, c))] = v[std::size_t(key * 128 + c)];
      std::vector<int> writes(std::size_t(d) * kKeys, 0);
      const std::vector<std::uint8_t> vt = transpose(d, raw, valid, &writes);
      int wrong = 0;
      for (int row = 0; row < d; ++row)
        for (int c = 0; c < kKeys; ++c) {
          const int off = sw128(row, c);
          EXPECT_EQ(writes[std::size_t(off)], 1) << "row " << row << " column " << c;
          const int key = kStepKeys * (c / kStepKeys) + p_key_of_column(c % kStepKeys);
          const std::uint8_t want = key < valid ? v[std::size_t(key * 128 + row)] : 0;
          if (vt[std::size_t(off)] != want && ++wrong < 5)
            ADD_FAILURE() << "row " << row << " column " << c << " (key " << key << "): got "
                          << int(vt[std::size_t(off)]) << ", want " << int(want);
        }
      EXPECT_EQ(wrong, 0);
    }
}

TEST(Fp8WgmmaLayout, TransposeAccessesAreFreeOfBankConflicts) {
  for (int d : {64, 128}) {
    SCOPED_TRACE(testing::Message() << "d " << d);
    std::vector<std::uint8_t> raw(std::size_t(kKeys) * 128, 1);
    // The n-th load (store) of each lane of a warp is one load (store) instruction of the warp.
    std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> loads, stores;  // (warp, n) -> (lane, offset)
    std::vector<std::uint8_t> vt(std::size_t(d) * kKeys);
    auto run = [&]<int D>() {
      for (int tid = 0; tid < kThreads; ++tid) {
        int nl = 0, ns = 0;
        transpose_v_lane<D, kThreads>(
            tid, kKeys,
            [&](int off) {
              loads[{tid / 32, nl++}].push_back({tid % 32, off});
              return 0u;
            },
            [&](int off, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t) {
              stores[{tid / 32, ns++}].push_back({tid % 32, off});
            });
      }
    };
    if (d == 64) run.template operator()<64>();
    else run.template operator()<128>();
    ASSERT_FALSE(loads.empty());
    ASSERT_FALSE(stores.empty());
    // 4-byte loads: 32 banks of 4 bytes; one key row per 32 lanes at d=128 (32 distinct
    // banks), two rows of 16 lanes at d=64 (each row's lanes distinct: at most 2 ways).
    for (const auto& [at, acc] : loads) {
      std::map<int, std::set<int>> words_per_bank;
      for (const auto& [lane, off] : acc) words_per_bank[(off / 4) % 32].insert(off / 4);
      std::size_t ways = 0;
      for (const auto& [bank, words] : words_per_bank) ways = std::max(ways, words.size());
      EXPECT_LE(ways, d == 128 ? 1u : 2u) << "warp " << at.first << " load " << at.second;
    }
    // 16-byte stores go out a quarter warp at a time: its 8 lanes must use 8 different
    // 16-byte bank groups.
    for (const auto& [at, acc] : stores) {
      std::map<int, std::set<int>> per_quarter;
      for (const auto& [lane, off] : acc) {
        const bool fresh = per_quarter[lane / 8].insert((off / 16) % 8).second;
        EXPECT_TRUE(fresh) << "warp " << at.first << " store " << at.second << " lane " << lane;
      }
    }
  }
}

}  // namespace
