// Internal: how the absorbed MLA decode splits a batch's work over the GPU's CTAs — host
// code, shared by the planner, the kernels (the structs' layout) and the tests.
//
// The scheduler follows FlashMLA's (csrc/smxx/decode/get_decoding_sched_meta): every request
// is cut into 64-key tiles (at least one, so a request with no keys still gets its output
// and LSE written), each request costs kTileOverhead tiles more for its prologue and
// epilogue, and the requests are walked in order, giving each of `num_parts` parts a
// contiguous run of (request, tile) work of about the same cost. A request cut across
// parts is split: each piece writes a partial output and log-sum-exp to its own slot, and
// the combine kernel merges them. One long request therefore fills every part as a large
// batch does. A part is one CTA of the decode kernels (for each tile of query rows).
//
// Batch-invariant plans never split a request: part i runs request i whole, so a request's
// result does not depend on the rest of the batch.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace attnsel::kernel::cuda::mla {

inline constexpr int kKeyTile = 64;      ///< keys per tile: the unit of the work split
inline constexpr int kTileOverhead = 5;  ///< a request's fixed cost, in tiles (FlashMLA's choice)

/// One decode request as the kernels read it. Its query rows r = 0 .. q_len·N - 1 are
/// (token q_begin + r / N, head r % N).
struct DecodeRequest {
  std::int32_t q_begin = 0;      ///< its first query token
  std::int32_t q_len = 0;        ///< query tokens (causal among them)
  std::int32_t seq_len = 0;      ///< keys in the cache, this step's tokens included
  std::int32_t split_begin = 0;  ///< its first partial slot (split requests only)
  std::int32_t num_splits = 1;   ///< pieces it is cut into (1: its part writes the output)
  std::int32_t pad[3] = {};
};
static_assert(sizeof(DecodeRequest) == 32);

/// One part's run: requests first_req..last_req, from tile first_tile of the first to tile
/// end_tile (exclusive) of the last; the requests between run whole. A part with no work
/// has first_req = number of requests.
struct DecodePart {
  std::int32_t first_req = 0;
  std::int32_t last_req = -1;
  std::int32_t first_tile = 0;
  std::int32_t end_tile = 0;
  std::int32_t first_split = 0;  ///< which piece of first_req this part's is (0-based)
  std::int32_t pad[3] = {};
};
static_assert(sizeof(DecodePart) == 32);

struct DecodeSchedule {
  std::vector<DecodeRequest> requests;
  std::vector<DecodePart> parts;
  int total_splits = 0;  ///< partial slots the split requests use
};

/// Tiles of a request with `seq_len` keys: ceil(seq_len / 64), at least one.
constexpr int decode_key_tiles(int seq_len) { return seq_len <= 0 ? 1 : (seq_len + kKeyTile - 1) / kKeyTile; }


/// Partial slots a batch of `num_requests` over `num_parts` parts can need at most: each
/// part adds at most one piece to the count of requests.
constexpr int max_decode_splits(int num_requests, int num_parts) { return num_requests + num_parts; }

/// The schedule of a batch: query_start_loc [num_requests + 1], seq_lens [num_requests]
/// (already validated), over `num_parts` parts (batch_invariant: num_parts must be at least
/// the number of requests; each runs whole on its own part). Inline: the tests check it in
/// every build, with or without CUDA.
inline DecodeSchedule schedule_decode(std::span<const std::int32_t> query_start_loc, std::span<const std::int32_t> seq_lens,
                               int num_parts, bool batch_invariant) {
  const int n = static_cast<int>(seq_lens.size());
  DecodeSchedule s;
  s.requests.resize(std::size_t(n));
  s.parts.assign(std::size_t(std::max(num_parts, 1)), DecodePart{.first_req = n});
  std::vector<int> tiles(static_cast<std::size_t>(n));
  long long total = 0;
  for (int i = 0; i < n; ++i) {
    DecodeRequest& r = s.requests[std::size_t(i)];
    r.q_begin = query_start_loc[std::size_t(i)];
    r.q_len = query_start_loc[std::size_t(i) + 1] - r.q_begin;
    r.seq_len = seq_lens[std::size_t(i)];
    tiles[std::size_t(i)] = decode_key_tiles(r.seq_len);
    total += tiles[std::size_t(i)] + kTileOverhead;
  }
  if (batch_invariant) {
    for (int i = 0; i < n; ++i)
      s.parts[std::size_t(i)] =
          DecodePart{.first_req = i, .last_req = i, .first_tile = 0, .end_tile = tiles[std::size_t(i)]};
    return s;
  }
  // Each part's budget; a part spends kTileOverhead on every request piece it computes.
  // The cost counts one extra piece per part boundary (at most one request is cut there),
  // and part k's budget is its share of it rounded so the shares add up exactly: one long
  // request is spread over every part, 3 or 4 tiles each at 1 x 32768 on 132.
  const long long parts = static_cast<long long>(s.parts.size());
  const long long cost = total + kTileOverhead * (parts - 1);
  int req = 0, tile = 0, piece = 0;  // the next work: request, its tile, the piece it starts
  for (long long k = 0; k < parts; ++k) {
    DecodePart& part = s.parts[std::size_t(k)];
    if (req == n) break;
    part.first_req = req;
    part.first_tile = tile;
    part.first_split = piece;
    long long budget = (k + 1) * cost / parts - k * cost / parts;
    while (req < n) {
      const int left = tiles[std::size_t(req)] - tile;
      if (budget >= left + kTileOverhead) {  // the rest of this request fits
        budget -= left + kTileOverhead;
        s.requests[std::size_t(req)].num_splits = piece + 1;
        part.last_req = req;
        part.end_tile = tiles[std::size_t(req)];
        ++req;
        tile = 0;
        piece = 0;
        continue;
      }
      if (budget - kTileOverhead > 0) {  // a piece of it, the rest for the next part
        tile += static_cast<int>(budget - kTileOverhead);
        part.last_req = req;
        part.end_tile = tile;
        ++piece;
      }
      break;
    }
    // A part whose budget could not take one tile of its first request has no work; the
    // next part starts where it would have.
    if (part.last_req < part.first_req) part = DecodePart{.first_req = n};
  }
  int slot = 0;
  for (DecodeRequest& r : s.requests)
    if (r.num_splits > 1) {
      r.split_begin = slot;
      slot += r.num_splits;
    }
  s.total_splits = slot;
  return s;
}

}  // namespace attnsel::kernel::cuda::mla
