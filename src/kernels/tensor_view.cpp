// TensorView helpers and the DLPack bridge.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>

#include "attnsel/errors.hpp"
#include "attnsel/kernel.hpp"

namespace attnsel::kernel {

bool TensorView::has_distinct_elements() const {
  if (numel() <= 1) return true;
  // The dimensions of more than one element, by increasing stride (insertion sort: at most kMaxDims).
  int dims[kMaxDims] = {};
  int n = 0;
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] <= 1) continue;
    int i = n++;
    for (; i > 0 && stride[dims[i - 1]] > stride[d]; --i) dims[i] = dims[i - 1];
    dims[i] = d;
  }
  std::int64_t span = 1;  // elements covered by the dimensions with smaller strides
  for (int i = 0; i < n; ++i) {
    const int d = dims[i];
    if (stride[d] < span) return false;
    span += stride[d] * (shape[d] - 1);
  }
  return true;
}

namespace {
void check_rank(std::size_t ndim) {
  if (ndim > static_cast<std::size_t>(TensorView::kMaxDims))
    throw ValueError(fmt::format("a tensor view has at most {} dimensions, got {}", TensorView::kMaxDims, ndim));
}
}  // namespace

TensorView TensorView::contiguous(void* data, ScalarType dtype, std::initializer_list<std::int64_t> shape,
                                  DeviceKind device) {
  check_rank(shape.size());
  const std::span<const std::int64_t> dims(shape.begin(), shape.size());
  std::array<std::int64_t, kMaxDims> strides{};  // row-major
  std::int64_t stride = 1;
  for (std::size_t d = dims.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= dims[d];
  }
  return strided(data, dtype, dims, std::span(strides.data(), dims.size()), device);
}

TensorView TensorView::strided(void* data, ScalarType dtype, std::span<const std::int64_t> shape,
                               std::span<const std::int64_t> strides, DeviceKind device) {
  if (shape.size() != strides.size())
    throw ValueError(fmt::format("a tensor view needs one stride per dimension: {} dimensions, {} strides",
                                 shape.size(), strides.size()));
  check_rank(shape.size());
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.ndim = static_cast<int>(shape.size());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = shape[static_cast<std::size_t>(d)];
    v.stride[d] = strides[static_cast<std::size_t>(d)];
  }
  return v;
}

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  std::int64_t expected = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && stride[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

std::string TensorView::describe() const {
  const std::span<const std::int64_t> sh(shape, static_cast<std::size_t>(ndim));
  const std::span<const std::int64_t> st(stride, static_cast<std::size_t>(ndim));
  return fmt::format("{}[{}] strides [{}]{}", to_string(dtype), fmt::join(sh, ", "), fmt::join(st, ", "),
                     device == DeviceKind::cuda ? fmt::format(" on cuda:{}", device_index) : "");
}

namespace {
// The float8 type codes of DLPack 1.1 (dlpack.h 0.6, Debian 12's, predates them).
constexpr std::uint8_t kDLFloat8_e4m3fn = 10, kDLFloat8_e5m2 = 12;

ScalarType dl_scalar_type(const DLDataType& t) {
  if (t.lanes != 1)
    throw ValueError(fmt::format("DLPack tensors with vector lanes are not supported (lanes = {})", t.lanes));
  if (t.code == kDLFloat && t.bits == 32) return ScalarType::f32;
  if (t.code == kDLFloat && t.bits == 16) return ScalarType::f16;
  if (t.code == kDLBfloat && t.bits == 16) return ScalarType::bf16;
  if (t.code == kDLFloat8_e4m3fn && t.bits == 8) return ScalarType::fp8_e4m3;
  if (t.code == kDLFloat8_e5m2 && t.bits == 8) return ScalarType::fp8_e5m2;
  if (t.code == kDLUInt && t.bits == 8) return ScalarType::u8;
  if (t.code == kDLInt && t.bits == 32) return ScalarType::i32;
  if (t.code == kDLInt && t.bits == 64) return ScalarType::i64;
  throw ValueError(fmt::format(
      "unsupported DLPack dtype (code {}, bits {}); supported: float32, float16, bfloat16, float8_e4m3fn, "
      "float8_e5m2, uint8, int32, int64",
      t.code, t.bits));
}
}  // namespace

TensorView from_dlpack(const DLTensor& t) {
  if (t.ndim < 0 || t.ndim > TensorView::kMaxDims)
    throw ValueError(fmt::format("DLPack tensor rank {} is outside [0, {}]", t.ndim, TensorView::kMaxDims));
  if (t.ndim > 0 && t.shape == nullptr) throw ValueError("DLPack tensor has no shape array");
  TensorView v;
  v.dtype = dl_scalar_type(t.dtype);
  switch (t.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: v.device = DeviceKind::cpu; break;
    case kDLCUDA:
    case kDLCUDAManaged: v.device = DeviceKind::cuda; break;
    default:
      throw ValueError(fmt::format("unsupported DLPack device type {}; supported: CPU (1), CUDA (2), "
                                   "CUDAHost (3), CUDAManaged (13)",
                                   static_cast<int>(t.device.device_type)));
  }
  v.device_index = t.device.device_id;
  if (t.byte_offset % element_size(v.dtype) != 0)
    throw ValueError(fmt::format("DLPack byte_offset {} is not a multiple of the element size {}", t.byte_offset,
                                 element_size(v.dtype)));
  v.data = static_cast<char*>(t.data) + t.byte_offset;
  v.ndim = t.ndim;
  std::int64_t expected = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] < 0) throw ValueError(fmt::format("DLPack shape[{}] = {} is negative", d, t.shape[d]));
    v.shape[d] = t.shape[d];
    v.stride[d] = t.strides ? t.strides[d] : expected;  // null strides mean row-major
    expected *= t.shape[d];
  }
  return v;
}

}  // namespace attnsel::kernel
