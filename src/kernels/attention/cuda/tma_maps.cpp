#include "kernels/attention/cuda/tma_maps.hpp"

#include <cstring>

#include "kernels/device/cuda/tensor_map_encode.hpp"

namespace attnsel::kernel::cuda {
namespace {

/// How far an L2 miss of a copy is widened. The prefill reads each key tile from L2 many
/// times and keeps 256-byte fills; the decode streams every byte once, and 128-byte fills
/// (the boxes' row unit) read DRAM faster: 64 x 4096 269.5 -> 256.5 us, 32 x 16384 533 ->
/// 505, 1 x 32k 45.0 -> 44.1 on an H200 (`attnsel_cuda_bench --only decode`).
constexpr CUtensorMapL2promotion kPrefillPromotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
constexpr CUtensorMapL2promotion kDecodePromotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;

/// Page boxes: box_rows keys × every 64-column chunk of a 16-bit row, landing chunk after
/// chunk ([chunk][key][128 bytes]). The chunk dimension steps 128 bytes inside the row while
/// the key dimension steps whole rows: TMA takes the strides in any order.
std::string encode_page_boxes(const TensorView& t, int box_rows, CUtensorMapL2promotion promotion, CUtensorMap* map,
                              const char* name) {
  constexpr std::uint64_t es = 2;
  const cuuint64_t chunks = cuuint64_t(t.shape[3]) / 64;
  const cuuint64_t dims[5] = {64, cuuint64_t(t.shape[1]), chunks, cuuint64_t(t.shape[2]), cuuint64_t(t.shape[0])};
  const cuuint64_t strides[4] = {cuuint64_t(t.stride[1]) * es, 128, cuuint64_t(t.stride[2]) * es,
                                 cuuint64_t(t.stride[0]) * es};
  const cuuint32_t box[5] = {64, cuuint32_t(box_rows), cuuint32_t(chunks), 1, 1};
  return encode_tiled_map(map, t, 5, dims, strides, box, promotion, name);
}

/// K and V maps into maps[0] and maps[1]: boxes of box_rows keys × 128 bytes (64 16-bit
/// or 128 fp8 columns).
std::string encode_kv(const KVCacheView& cache, int box_rows, CUtensorMapL2promotion promotion, CUtensorMap* maps) {
  const bool bytes = cache.key.dtype != ScalarType::bf16 && cache.key.dtype != ScalarType::f16;
  const std::uint64_t es = bytes ? 1 : 2;
  const TensorView* kv[2] = {&cache.key, &cache.value};
  for (int i = 0; i < 2; ++i) {
    const TensorView& t = *kv[i];
    const cuuint64_t dims[4] = {cuuint64_t(t.shape[3]), cuuint64_t(t.shape[2]), cuuint64_t(t.shape[1]),
                                cuuint64_t(t.shape[0])};
    const cuuint64_t strides[3] = {cuuint64_t(t.stride[2]) * es, cuuint64_t(t.stride[1]) * es,
                                   cuuint64_t(t.stride[0]) * es};
    const cuuint32_t box[4] = {cuuint32_t(128 / es), 1, cuuint32_t(box_rows), 1};
    const char* name = i == 0 ? "key_cache" : "value_cache";
    if (auto e = encode_tiled_map(&maps[i], t, 4, dims, strides, box, promotion, name); !e.empty())
      return e;
  }
  return "";
}

/// A [tokens, heads, head size] tensor of 16-bit elements in boxes of 64 columns × `rows`
/// tokens of one head.
std::string encode_token_rows(const TensorView& t, cuuint32_t rows, CUtensorMap* map, const char* name) {
  const std::uint64_t es = 2;
  const cuuint64_t dims[3] = {cuuint64_t(t.shape[2]), cuuint64_t(t.shape[1]), cuuint64_t(t.shape[0])};
  const cuuint64_t strides[2] = {cuuint64_t(t.stride[1]) * es, cuuint64_t(t.stride[0]) * es};
  const cuuint32_t box[3] = {64, 1, rows};
  return encode_tiled_map(map, t, 3, dims, strides, box, kPrefillPromotion, name);
}

}  // namespace

std::string encode_tma_maps(const TensorView& query, const TensorView& output, const KVCacheView& cache,
                            int box_rows, bool v_page_boxes, TensorMaps& out) {
  CUtensorMap maps[4] = {};
  if (auto e = encode_token_rows(query, 128, &maps[0], "query"); !e.empty()) return e;
  if (auto e = encode_kv(cache, box_rows, kPrefillPromotion, &maps[1]); !e.empty()) return e;
  if (v_page_boxes)
    if (auto e = encode_page_boxes(cache.value, box_rows, kPrefillPromotion, &maps[2], "value_cache (page boxes)");
        !e.empty())
      return e;
  // The output: 64 rows, a consumer warpgroup's. An address or a stride TMA cannot express
  // (every stride a positive multiple of 16 bytes, even a one-element dimension's) leaves
  // the kernel's own stores in place; it is not handed to the driver to be refused.
  const auto tma_stride = [](std::int64_t elems) { return elems > 0 && (elems * 2) % 16 == 0; };
  const bool addressable = reinterpret_cast<std::uintptr_t>(output.data) % 16 == 0 &&
                           tma_stride(output.stride[0]) && tma_stride(output.stride[1]);
  out.output = addressable && encode_token_rows(output, 64, &maps[3], "output").empty();
  static_assert(sizeof(maps) == sizeof(out.bytes));
  std::memcpy(out.bytes.data(), maps, sizeof(maps));
  return "";
}

std::string encode_kv_tma_maps(const KVCacheView& cache, int box_rows, bool page_boxes, KVTensorMaps& out) {
  CUtensorMap maps[2];
  if (page_boxes) {
    if (auto e = encode_page_boxes(cache.key, box_rows, kDecodePromotion, &maps[0], "key_cache (page boxes)");
        !e.empty())
      return e;
    if (auto e = encode_page_boxes(cache.value, box_rows, kDecodePromotion, &maps[1], "value_cache (page boxes)");
        !e.empty())
      return e;
  } else if (auto e = encode_kv(cache, box_rows, kDecodePromotion, maps); !e.empty()) {
    return e;
  }
  static_assert(sizeof(maps) == sizeof(out.bytes));
  std::memcpy(out.bytes.data(), maps, sizeof(maps));
  return "";
}

}  // namespace attnsel::kernel::cuda
