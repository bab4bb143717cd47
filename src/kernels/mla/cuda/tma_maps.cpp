#include "kernels/mla/cuda/tma_maps.hpp"

#include <cstring>

#include "kernels/device/cuda/tensor_map_encode.hpp"

namespace attnsel::kernel::cuda::mla {

/// Every byte is streamed once: L2 fills of 128 bytes, the boxes' row unit.
constexpr CUtensorMapL2promotion kStreamedOnce = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;

std::string encode_cache_map(const TensorView& cache, int box_rows, DecodeMaps& out) {
  const std::uint64_t es = cache.dtype == ScalarType::bf16 || cache.dtype == ScalarType::f16 ? 2 : 1;
  const int r = cache.ndim;  // [blocks, page, (1,) 576]
  const cuuint64_t dims[3] = {cuuint64_t(cache.shape[r - 1]), cuuint64_t(cache.shape[1]), cuuint64_t(cache.shape[0])};
  const cuuint64_t strides[2] = {cuuint64_t(cache.stride[1]) * es, cuuint64_t(cache.stride[0]) * es};
  const cuuint32_t box[3] = {cuuint32_t(128 / es), cuuint32_t(box_rows), 1};
  CUtensorMap map;
  if (auto e = encode_tiled_map(&map, cache, 3, dims, strides, box, kStreamedOnce, "latent cache"); !e.empty())
    return e;
  std::memcpy(out.bytes.data(), &map, sizeof(map));
  return "";
}

std::string encode_query_map(const TensorView& q, DecodeMaps& out) {
  const cuuint64_t dims[2] = {cuuint64_t(q.shape[1]), cuuint64_t(q.shape[0])};
  const cuuint64_t strides[1] = {cuuint64_t(q.stride[0]) * 2};
  const cuuint32_t box[2] = {64, 64};
  CUtensorMap map;
  if (auto e = encode_tiled_map(&map, q, 2, dims, strides, box, kStreamedOnce, "queries"); !e.empty()) return e;
  std::memcpy(out.bytes.data() + 128, &map, sizeof(map));
  return "";
}

}  // namespace attnsel::kernel::cuda::mla
