// Internal: encoding a TMA tensor map on the host through the driver's
// cuTensorMapEncodeTiled, reached via the runtime so that nothing links libcuda.
#pragma once

#include <cuda.h>

#include <string>

#include "attnsel/kernel.hpp"

namespace attnsel::kernel::cuda {

/// Encodes a tiled, 128-byte-swizzled map of `t` into `map`: `rank` dimensions (innermost
/// first), the strides in bytes of all but the innermost, `box` elements per dimension,
/// L2 fills widened by `promotion`. 16-bit tensors are mapped as bf16 or f16, anything else
/// as bytes (fp8). Returns an error text naming `name`, or "" on success.
std::string encode_tiled_map(CUtensorMap* map, const TensorView& t, cuuint32_t rank, const cuuint64_t* dims,
                             const cuuint64_t* strides_bytes, const cuuint32_t* box,
                             CUtensorMapL2promotion promotion, const char* name);

}  // namespace attnsel::kernel::cuda
