// Internal: compile-time dispatch over element type and padded head dimension.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <sstream>

#include <string>

#include "kernels/attention/cuda/device_common.cuh"
#include "kernels/device/cuda/cuda_check.cuh"

namespace attnsel::kernel::cuda {

/// Padded head dimensions the mma.sync kernels are compiled for (head sizes are padded up
/// to the next one; the padding columns are zero-filled and never written back).
inline constexpr int kHeadDimPads[] = {32, 64, 96, 128, 160, 192, 224, 256};

inline int pad_head_dim(int head_size) { return (head_size + 31) / 32 * 32; }

template <class F>
void dispatch_elem(ScalarType e, F&& f) {  // e: f16 or bf16 (the planner checked)
  if (e == ScalarType::bf16) f.template operator()<__nv_bfloat16>();
  else f.template operator()<__half>();
}

template <class F>
void dispatch_head_dim_pad(int dp, F&& f) {
  switch (dp) {
    case 32: f.template operator()<32>(); break;
    case 64: f.template operator()<64>(); break;
    case 96: f.template operator()<96>(); break;
    case 128: f.template operator()<128>(); break;
    case 160: f.template operator()<160>(); break;
    case 192: f.template operator()<192>(); break;
    case 224: f.template operator()<224>(); break;
    case 256: f.template operator()<256>(); break;
    default:
      throw_cuda_error(static_cast<int>(cudaErrorInvalidValue), "head dimension dispatch",
                       "padded head dimension " + std::to_string(dp) +
                           " is not one of 32, 64, 96, 128, 160, 192, 224, 256");
  }
}

}  // namespace attnsel::kernel::cuda
