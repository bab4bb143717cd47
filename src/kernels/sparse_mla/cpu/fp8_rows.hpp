// Rows of e4m3 bytes widened to bf16 for the sparse kernels' bf16 products: the indexer's
// cached keys (scale 1: exact) and the fp8_ds_mla latent tiles (FlashMLA's reading,
// bf16(e4m3 · scale)). SIMD (Highway, run-time dispatch), the same bits on every target.
// The e4m3 NaN bytes (0x7F, 0xFF), which no writer stores, read as ±480.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace attnsel::kernel::sparse_mla::cpu {

/// dst[i] = bf16(float(e4m3(src[i])) · scale) for i < n, the product rounded to nearest even.
void e4m3_to_bf16(const std::uint8_t* src, int n, float scale, std::uint16_t* dst);

}  // namespace attnsel::kernel::sparse_mla::cpu
