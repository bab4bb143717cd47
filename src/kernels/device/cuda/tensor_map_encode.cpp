#include "kernels/device/cuda/tensor_map_encode.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace attnsel::kernel::cuda {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/// The driver's encoder, looked up once (null where the driver lacks it).
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
  return t == ScalarType::bf16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
         : t == ScalarType::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                : CU_TENSOR_MAP_DATA_TYPE_UINT8;  // fp8 bytes
}

}  // namespace

std::string encode_tiled_map(CUtensorMap* map, const TensorView& t, cuuint32_t rank, const cuuint64_t* dims,
                             const cuuint64_t* strides_bytes, const cuuint32_t* box,
                             CUtensorMapL2promotion promotion, const char* name) {
  const EncodeTiled fn = encoder();
  if (!fn) return "the driver does not provide cuTensorMapEncodeTiled";
  const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  const CUresult r = fn(map, data_type(t.dtype), rank, t.data, dims, strides_bytes, box, elem_strides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promotion,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return fmt::format("cuTensorMapEncodeTiled failed for the {} (CUresult {}): {}", name, int(r), t.describe());
  return "";
}

}  // namespace attnsel::kernel::cuda
