// Internal: TMA tensor maps for the Hopper prefill and decode kernels, encoded on the host through the
// driver's cuTensorMapEncodeTiled (reached via the runtime, so nothing links libcuda).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "attnsel/kernel.hpp"

namespace attnsel::kernel::cuda {

/// Four CUtensorMap objects (Q, K, V, O), 128 bytes each, as the kernel takes them; O's
/// only where the output's address and strides allow a TMA store (`output`).
struct alignas(64) TensorMaps {
  std::array<std::byte, 4 * 128> bytes{};
  bool output = false;
};

/// Two CUtensorMap objects (K, V cache), as the decode kernel takes them.
struct alignas(64) KVTensorMaps {
  std::array<std::byte, 2 * 128> bytes{};
};

/// Encodes the maps: Q boxes of 64 columns × 128 query tokens of one head; K/V boxes of
/// 64 columns × box_rows keys of one page and one KV head (v_page_boxes: V boxes of every
/// 64-column chunk of box_rows keys, HopperVariant::v_page_boxes); O boxes of 64 columns ×
/// 64 query tokens of one head, when TMA can address the output (else out.output stays
/// false and the kernel stores it itself). Returns an error text, or "" on success.
std::string encode_tma_maps(const TensorView& query, const TensorView& output, const KVCacheView& cache,
                            int box_rows, bool v_page_boxes, TensorMaps& out);
/// The K/V maps alone (boxes of 64 columns × box_rows keys of one page and one KV head;
/// page_boxes: boxes of every 64-column chunk of box_rows keys, kLoadsTmaPages).
std::string encode_kv_tma_maps(const KVCacheView& cache, int box_rows, bool page_boxes, KVTensorMaps& out);

}  // namespace attnsel::kernel::cuda
