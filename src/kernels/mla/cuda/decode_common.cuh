// Internal: what both MLA decode kernels share on the device — walking a part's run of
// work, the rows' causal borders, the page ids of a key tile's TMA boxes, and writing a
// row's result (final output, or a split piece's partial for the combine).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device/cuda/async_copy_sm90.cuh"
#include "kernels/device/cuda/device_ops.cuh"
#include "kernels/mla/cuda/launch.hpp"

namespace attnsel::kernel::cuda::mla {

inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr int kMaxBoxesPerTile = 4;  ///< 64-key tiles of 16-key boxes (pages of 16, 48, 80, ...)

/// One request's share of a part, as a CTA of row tile `row_tile` sees it.
struct DecodePiece {
  int req = 0;
  int q_begin = 0, q_len = 0, seq_len = 0;
  int tile_begin = 0, tile_end = 0;  ///< key tiles [begin, end)
  int rows = 0;        ///< of this CTA's row tile that exist (1 .. rows per tile)
  int slot = -1;       ///< partial slot when the request is split, else -1 (write the output)
  int min_border = 0;  ///< the fewest keys any of the CTA's rows sees (causal among the query tokens)
};

/// The next piece of a part's run after request `req` (-1: the first), for the CTA of row
/// tile `row_tile`; requests with no rows in that tile (a varlen batch's shorter requests)
/// are skipped. Returns false when the run is done.
__device__ __forceinline__ bool next_piece(const DecodeParams& p, int req, int row_tile, int tile_rows,
                                           DecodePiece& out) {
  const DecodePart part = p.parts[blockIdx.z];
  if (part.first_req >= p.num_requests) return false;
  for (req = req < 0 ? part.first_req : req + 1; req <= part.last_req; ++req) {
    const DecodeRequest r = p.requests[req];
    const int rows = r.q_len * p.num_heads - row_tile * tile_rows;
    if (rows <= 0) continue;
    out.req = req;
    out.q_begin = r.q_begin;
    out.q_len = r.q_len;
    out.seq_len = r.seq_len;
    out.tile_begin = req == part.first_req ? part.first_tile : 0;
    out.tile_end = req == part.last_req ? part.end_tile : decode_key_tiles(r.seq_len);
    out.rows = rows < tile_rows ? rows : tile_rows;
    const int piece = req == part.first_req ? part.first_split : 0;
    out.slot = r.num_splits > 1 ? r.split_begin + piece : -1;
    // The tile's first row is its earliest query token: it sees the fewest keys.
    out.min_border = r.seq_len - r.q_len + (row_tile * tile_rows) / p.num_heads + 1;
    return true;
  }
  return false;
}

/// Keys a query row sees (exclusive end): row r of a request is token r / N, which sees keys
/// [0, seq_len - q_len + token]; rows past the request's see every key (they are not stored).
__device__ __forceinline__ int row_border(const DecodePiece& pc, int num_heads, int request_row) {
  return request_row < pc.q_len * num_heads ? pc.seq_len - pc.q_len + request_row / num_heads + 1 : pc.seq_len;
}

/// The page id of each TMA box of key tile `tile` (-1 for a box wholly past the keys: never
/// read, so a block-table entry past the request's blocks is never dereferenced), into
/// `pages` (kMaxBoxesPerTile entries; the issuing thread's shared memory, so that no
/// register of every thread holds them while the loads are in flight).
__device__ __forceinline__ void tile_pages(const DecodeParams& p, int req, int seq_len, int tile, int* pages) {
  const std::int32_t* row = p.block_table + std::int64_t(req) * p.block_table_stride;
  const int boxes = kKeyTile / p.box_rows;
#pragma unroll
  for (int b = 0; b < kMaxBoxesPerTile; ++b) {
    const int key0 = tile * kKeyTile + b * p.box_rows;
    pages[b] = b < boxes && key0 < seq_len ? row[key0 / p.page_size] : -1;
  }
}

/// Issues the TMA copies of pieces [first, last) of a key tile (piece c: 128 bytes of
/// columns, c · COLS elements in), each piece completing on its own barrier (bars + 8c),
/// pieces PIECE_BYTES apart from `dst`.
template <int COLS, std::uint32_t PIECE_BYTES>
__device__ __forceinline__ void issue_tile_pieces(const DecodeParams& p, const CUtensorMap* map, std::uint32_t dst,
                                                  std::uint32_t bars, const int* pages, int tile, int first,
                                                  int last) {
  const int boxes = kKeyTile / p.box_rows;
  int page[kMaxBoxesPerTile];
  std::uint32_t bytes = 0;
#pragma unroll
  for (int b = 0; b < kMaxBoxesPerTile; ++b) {
    page[b] = b < boxes ? pages[b] : -1;
    if (page[b] >= 0) bytes += std::uint32_t(p.box_rows) * 128;
  }
  for (int c = first; c < last; ++c) {
    const std::uint32_t bar = bars + 8 * c;
    mbar_arrive_expect_tx(bar, bytes);
#pragma unroll
    for (int b = 0; b < kMaxBoxesPerTile; ++b)
      if (page[b] >= 0)
        tma_load_3d(dst + c * PIECE_BYTES + std::uint32_t(b * p.box_rows) * 128, map, bar, c * COLS,
                    (tile * kKeyTile + b * p.box_rows) % p.page_size, page[b]);
  }
}

/// A row's log-sum-exp from its log2-domain state: natural log for the output, log2 for a
/// partial; -inf for a row that saw no key.
__device__ __forceinline__ float row_lse_log2(float m, float l) { return l > 0.0f ? m + __log2f(l) : -INFINITY; }

}  // namespace attnsel::kernel::cuda::mla
