// The sizes of the tile state the CPU MLA kernels keep in an item's scratch (TileState of
// tile_steps-inl.h): the packed query pairs, a tile's logits and probability pairs, the
// output accumulators and four per-row values (running maximum and sum, rescale factors,
// positions), each for kMaxRows rows and a multiple of 64 bytes.
#pragma once

#include <cstddef>

#include "kernels/attention/cpu/work.hpp"

namespace attnsel::kernel::mla::cpu {

struct TileStateBytes {
  std::size_t qp = 0, s = 0, pp = 0, o = 0, row_state = 0;
  constexpr std::size_t total() const { return qp + s + pp + o + 4 * row_state; }
};

/// For queries and keys `d` wide, tiles of `tile_keys` keys and values `dv` wide.
constexpr TileStateBytes tile_state_bytes(int d, int tile_keys, int dv) {
  constexpr std::size_t rows = kernel::cpu::kMaxRows;
  TileStateBytes b;
  b.qp = static_cast<std::size_t>(d / 2) * rows * 4;
  b.s = static_cast<std::size_t>(tile_keys) * rows * 4;
  b.pp = static_cast<std::size_t>(tile_keys / 2) * rows * 4;
  b.o = rows * static_cast<std::size_t>(dv) * 4;
  b.row_state = rows * 4;
  return b;
}

}  // namespace attnsel::kernel::mla::cpu
