// Internal: the TMA tensor maps of the MLA decode, encoded on the host through the driver's
// cuTensorMapEncodeTiled (reached via the runtime, so nothing links libcuda).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "attnsel/kernel.hpp"

namespace attnsel::kernel::cuda::mla {

/// Two CUtensorMap objects (128 bytes each) as the decode kernels take them: [0] the latent
/// cache, [1] the queries (the rows64 form only).
struct alignas(64) DecodeMaps {
  std::array<std::byte, 2 * 128> bytes{};
};

/// The cache map: `cache` [num_blocks, page_size, 576] (16-bit or e4m3 bytes), boxes of 128
/// bytes of columns × box_rows keys of one page, 128-byte swizzled, L2 fills of 128 bytes
/// (each byte is streamed once). Returns an error text, or "" on success.
std::string encode_cache_map(const TensorView& cache, int box_rows, DecodeMaps& out);
/// The query map: `q` [rows, 576] 16-bit, boxes of 64 columns × 64 rows, 128-byte swizzled.
std::string encode_query_map(const TensorView& q, DecodeMaps& out);

}  // namespace attnsel::kernel::cuda::mla
