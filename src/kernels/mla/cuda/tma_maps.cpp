#include "kernels/mla/cuda/tma_maps.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstring>

namespace attnsel::kernel::cuda::mla {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encoder() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<EncodeTiled>(nullptr);
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

CUtensorMapDataType data_type(ScalarType t) {
  return t == ScalarType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
         : t == ScalarType::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                : CU_TENSOR_MAP_DATA_TYPE_UINT8;  // e4m3 bytes
}

std::string encode(CUtensorMap* map, const TensorView& t, cuuint32_t rank, const cuuint64_t* dims,
                   const cuuint64_t* strides_bytes, const cuuint32_t* box, const char* name) {
  const EncodeTiled fn = encoder();
  if (!fn) return "the driver does not provide cuTensorMapEncodeTiled";
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = fn(map, data_type(t.dtype), rank, t.data, dims, strides_bytes, box, elem_strides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return fmt::format("cuTensorMapEncodeTiled failed for the {} (CUresult {}): {}", name, int(r), t.describe());
  return "";
}

}  // namespace

std::string encode_cache_map(const TensorView& cache, int box_rows, DecodeMaps& out) {
  const std::uint64_t es = cache.dtype == ScalarType::bf16 || cache.dtype == ScalarType::f16 ? 2 : 1;
  const int r = cache.ndim;  // [blocks, page, (1,) 576]
  const cuuint64_t dims[3] = {cuuint64_t(cache.shape[r - 1]), cuuint64_t(cache.shape[1]), cuuint64_t(cache.shape[0])};
  const cuuint64_t strides[2] = {cuuint64_t(cache.stride[1]) * es, cuuint64_t(cache.stride[0]) * es};
  const cuuint32_t box[3] = {cuuint32_t(128 / es), cuuint32_t(box_rows), 1};
  CUtensorMap map;
  if (auto e = encode(&map, cache, 3, dims, strides, box, "latent cache"); !e.empty()) return e;
  std::memcpy(out.bytes.data(), &map, sizeof(map));
  return "";
}

std::string encode_query_map(const TensorView& q, DecodeMaps& out) {
  const cuuint64_t dims[2] = {cuuint64_t(q.shape[1]), cuuint64_t(q.shape[0])};
  const cuuint64_t strides[1] = {cuuint64_t(q.stride[0]) * 2};
  const cuuint32_t box[2] = {64, 64};
  CUtensorMap map;
  if (auto e = encode(&map, q, 2, dims, strides, box, "queries"); !e.empty()) return e;
  std::memcpy(out.bytes.data() + 128, &map, sizeof(map));
  return "";
}

}  // namespace attnsel::kernel::cuda::mla
