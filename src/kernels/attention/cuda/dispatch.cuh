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

template <class F>
void dispatch_elem(ScalarType e, F&& f) {  // e: f16 or bf16 (the planner checked)
  if (e == ScalarType::bf16) f.template operator()<__nv_bfloat16>();
  else f.template operator()<__half>();
}

/// Calls f.template operator()<DP>() for the DP of PADS that equals `dp`.
template <int... PADS, class F>
void dispatch_pad(int dp, F&& f) {
  const bool found = ((dp == PADS ? (f.template operator()<PADS>(), true) : false) || ...);
  if (!found) {
    std::string valid;
    ((valid += (valid.empty() ? "" : ", ") + std::to_string(PADS)), ...);
    throw_cuda_error(static_cast<int>(cudaErrorInvalidValue), "head dimension dispatch",
                     "padded head dimension " + std::to_string(dp) + " is not one of " + valid);
  }
}

/// The padded head dimensions the kernels are compiled for (launch.hpp's *_head_dim_pad).
template <class F>
void dispatch_decode_head_dim_pad(int dp, F&& f) {
  dispatch_pad<64, 128, 192, 256>(dp, f);
}
template <class F>
void dispatch_prefill_sm80_head_dim_pad(int dp, F&& f) {
  dispatch_pad<32, 64, 96, 128, 160, 192, 224, 256>(dp, f);
}

}  // namespace attnsel::kernel::cuda
