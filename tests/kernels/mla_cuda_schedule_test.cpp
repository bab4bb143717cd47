// The MLA decode's work split (kernels/mla/cuda/decode_schedule.hpp), on the host: every
// (request, key tile) is computed by exactly one part, pieces are numbered in order and
// given their own partial slots, one long request fills every part as a large batch does,
// and batch-invariant plans never split a request.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <utility>
#include <vector>

#include "kernels/mla/cuda/decode_schedule.hpp"

namespace attnsel::kernel::cuda::mla {
namespace {

struct Batch {
  std::vector<std::int32_t> qsl, lens;
};

Batch batch(const std::vector<int>& lens, int q_len) {
  Batch b;
  b.qsl.push_back(0);
  for (int l : lens) {
    b.lens.push_back(l);
    b.qsl.push_back(b.qsl.back() + q_len);
  }
  return b;
}

/// Checks the schedule's invariants and returns how many parts have work.
int check_covers_once(const Batch& b, const DecodeSchedule& s) {
  const int n = static_cast<int>(b.lens.size());
  std::map<std::pair<int, int>, int> seen;       // (request, tile) -> parts computing it
  std::vector<std::vector<int>> pieces(static_cast<std::size_t>(n));  // each request's piece indices, in part order
  int busy = 0;
  for (const DecodePart& p : s.parts) {
    if (p.first_req >= n) continue;
    ++busy;
    EXPECT_LE(p.first_req, p.last_req);
    for (int r = p.first_req; r <= p.last_req; ++r) {
      const int begin = r == p.first_req ? p.first_tile : 0;
      const int end = r == p.last_req ? p.end_tile : decode_key_tiles(b.lens[std::size_t(r)]);
      EXPECT_LT(begin, end) << "request " << r << " gets an empty piece";
      for (int t = begin; t < end; ++t) ++seen[{r, t}];
      pieces[std::size_t(r)].push_back(r == p.first_req ? p.first_split : 0);
    }
  }
  int slot_end = 0;
  for (int r = 0; r < n; ++r) {
    const int tiles = decode_key_tiles(b.lens[std::size_t(r)]);
    for (int t = 0; t < tiles; ++t) EXPECT_EQ((seen[{r, t}]), 1) << "request " << r << " tile " << t;
    const DecodeRequest& q = s.requests[std::size_t(r)];
    EXPECT_EQ(q.num_splits, static_cast<int>(pieces[std::size_t(r)].size())) << "request " << r;
    for (std::size_t k = 0; k < pieces[std::size_t(r)].size(); ++k) EXPECT_EQ(pieces[std::size_t(r)][k], int(k));
    EXPECT_EQ(q.q_begin, b.qsl[std::size_t(r)]);
    EXPECT_EQ(q.seq_len, b.lens[std::size_t(r)]);
    if (q.num_splits > 1) {
      EXPECT_EQ(q.split_begin, slot_end);
      slot_end += q.num_splits;
    }
  }
  EXPECT_EQ(s.total_splits, slot_end);
  EXPECT_LE(s.total_splits, max_decode_splits(n, static_cast<int>(s.parts.size())));
  return busy;
}

TEST(MlaDecodeSchedule, EveryTileOnceOnRandomBatches) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<int> lens;
    for (int i = 0; i < n; ++i) lens.push_back(static_cast<int>(rng() % 9000) * (rng() % 8 == 0 ? 0 : 1));
    const Batch b = batch(lens, 1 + static_cast<int>(rng() % 4));
    const int parts = 1 + static_cast<int>(rng() % 140);
    check_covers_once(b, schedule_decode(b.qsl, b.lens, parts, false));
  }
}

TEST(MlaDecodeSchedule, OneLongRequestFillsEveryPart) {
  const Batch b = batch({32768}, 1);
  for (int parts : {66, 132}) {
    const DecodeSchedule s = schedule_decode(b.qsl, b.lens, parts, false);
    EXPECT_EQ(check_covers_once(b, s), parts);
    EXPECT_EQ(s.requests[0].num_splits, parts);
    // Balanced: no part has more than one tile over the mean.
    for (const DecodePart& p : s.parts) EXPECT_LE(p.end_tile - p.first_tile, 512 / parts + 1);
  }
}

TEST(MlaDecodeSchedule, LargeBatchSplitsFewRequests) {
  const Batch b = batch(std::vector<int>(128, 4096), 1);
  const DecodeSchedule s = schedule_decode(b.qsl, b.lens, 132, false);
  EXPECT_GE(check_covers_once(b, s), 128);  // a part each at least: a split would cost more than it saves
  int split = 0;
  for (const DecodeRequest& r : s.requests) split += r.num_splits > 1;
  EXPECT_LT(split, 132);  // each part cuts at most one request
}

TEST(MlaDecodeSchedule, RequestsWithoutKeysGetOneTileAndAreNeverSplit) {
  const Batch b = batch({0, 5000, 0, 0, 70}, 2);
  const DecodeSchedule s = schedule_decode(b.qsl, b.lens, 132, false);
  check_covers_once(b, s);
  EXPECT_EQ(s.requests[0].num_splits, 1);
  EXPECT_EQ(s.requests[2].num_splits, 1);
  EXPECT_EQ(s.requests[3].num_splits, 1);
}

TEST(MlaDecodeSchedule, BatchInvariantRunsEachRequestWholeOnItsOwnPart) {
  const Batch b = batch({4099, 1, 300, 0}, 3);
  const DecodeSchedule s = schedule_decode(b.qsl, b.lens, 4, true);
  check_covers_once(b, s);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(s.parts[std::size_t(r)].first_req, r);
    EXPECT_EQ(s.parts[std::size_t(r)].last_req, r);
    EXPECT_EQ(s.requests[std::size_t(r)].num_splits, 1);
  }
  EXPECT_EQ(s.total_splits, 0);
}

}  // namespace
}  // namespace attnsel::kernel::cuda::mla
